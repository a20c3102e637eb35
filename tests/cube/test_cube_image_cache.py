"""The image checks remembered across loads (cube/image_cache.py) and the load's cheaper
cold path (issue 29): a second load of an unchanged cube reads no image; a rewritten image
is read again, or refused when its bytes are read; a planted or corrupt entry is ignored;
`MEDRCUBE_CACHE_DIR=off` reads everything; the shortcuts give what the long ways gave."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from enum import IntEnum
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.cube.derived_cache import Slot, cache_root
from medrcube.cube.dirimages import MAX_IMAGE_BYTES, DirImages, ImageFileError
from medrcube.cube.image_cache import KIND, SETTLE_NS, ImageChecks
from medrcube.cube.images import DEFAULT_MAX_PIXELS
from medrcube.cube.item import _freeze
from medrcube.cube.records import text_may_hold_surrogates


@pytest.fixture(scope="module")
def settled(small_cube_template, tmp_path_factory):
    """Copies of the small cube whose files were last changed more than SETTLE_NS ago
    (only those are remembered): made at once, then waited for once (at most 2 s)."""
    base = tmp_path_factory.mktemp("settled")
    copies = [Path(shutil.copytree(small_cube_template, base / f"cube{i}", symlinks=True)) for i in range(6)]
    newest = max(os.stat(p).st_ctime_ns for c in copies for p in c.rglob("*"))
    while time.time_ns() <= newest + SETTLE_NS:
        time.sleep(0.05)
    return copies


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(d))
    return d


def _images(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.png"))


def _entry(root: Path) -> Slot:
    slot = Slot.open(KIND, ImageChecks._parts(os.path.realpath(root), DEFAULT_MAX_PIXELS, MAX_IMAGE_BYTES))
    assert slot is not None
    return slot


def test_a_second_load_of_an_unchanged_cube_takes_every_check_from_the_cache(settled, cache):
    root = settled[0]
    first = DirImages(root)
    keys = [p.relative_to(root).as_posix() for p in _images(root)]
    checks = first.check_all(keys)
    assert first.remembered == 0 and (cache / KIND).is_dir()
    again = DirImages(root)
    assert again.check_all(keys) == checks  # digests, formats, sizes: the same
    assert again.remembered == len(keys) > 0
    a, b = load_cube(root), load_cube(root)
    assert (a.fingerprint, dict(a.digests)) == (b.fingerprint, dict(b.digests))
    assert {k: hashlib.sha256(p.read_bytes()).hexdigest() for k, p in
            ((p.relative_to(root).as_posix(), p) for p in _images(root)) if k in a.digests} == dict(a.digests)


def test_an_image_rewritten_in_place_with_its_mtime_restored_is_read_again(settled, cache):
    root = settled[1]
    before = load_cube(root)
    key = next(k for k in before.digests)
    path = root / key
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF  # same size, other bytes
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime restored; ctime cannot be
    assert os.stat(path).st_mtime_ns == st.st_mtime_ns and os.stat(path).st_size == st.st_size
    images = DirImages(root)
    out = images.check_all([key])
    assert images.remembered == 0  # a miss: its ctime changed
    assert out[key].check is not None and out[key].check.digest == hashlib.sha256(bytes(data)).hexdigest()
    # The cube loaded before the rewrite refuses the new bytes when it reads them.
    with pytest.raises(ImageFileError) as err:
        before.read_image(key)
    assert err.value.reason == "image_changed"


def test_a_wrong_entry_this_user_wrote_still_sends_nothing_but_the_recorded_bytes(settled, cache):
    # The cache is not what keeps a changed image out: every read is checked against the
    # digest the load recorded. An entry that names the right file identity but another
    # digest (as if a file had changed without its ctime changing) is taken at load, and
    # the image is refused when read: never sent under a digest its bytes do not have.
    root = settled[2]
    load_cube(root)
    slot = _entry(root)
    doc = json.loads(slot.path.read_text(encoding="utf-8"))
    key = sorted(doc["value"])[0]
    doc["value"][key][1] = "0" * 64
    slot.write(doc["value"])  # with this user's secret: the MAC is good
    cube = load_cube(root)
    assert cube.digests[key] == "0" * 64  # taken from the entry
    with pytest.raises(ImageFileError) as err:
        cube.read_image(key)
    assert err.value.reason == "image_changed"


@pytest.mark.parametrize("how", ["planted", "corrupt", "malformed"])
def test_an_entry_this_user_did_not_write_or_cannot_read_is_ignored(settled, cache, how):
    root = settled[3 + ["planted", "corrupt", "malformed"].index(how)]
    good = load_cube(root)
    slot = _entry(root)
    doc = json.loads(slot.path.read_text(encoding="utf-8"))
    key = sorted(doc["value"])[0]
    if how == "planted":  # another digest, with a MAC made without the secret
        doc["value"][key][1] = "0" * 64
        doc["mac"] = hashlib.sha256(b"guess").hexdigest()
        slot.path.write_text(json.dumps(doc), encoding="utf-8")
    elif how == "corrupt":
        slot.path.write_text("{not json", encoding="utf-8")
    else:  # MAC'd by this user's cache but not the shape of an entry
        doc["value"][key] = ["x"]
        slot.write(doc["value"])
    images = DirImages(root)
    keys = sorted(good.digests)
    out = images.check_all(keys)
    assert images.remembered == 0
    assert {k: c.check.digest for k, c in out.items() if c.check} == dict(good.digests)
    assert _entry(root).read(lambda v: v) is not None  # rewritten: good again
    assert DirImages(root).check_all(keys) == out


def test_cache_off_reads_every_image_and_writes_nothing(settled, tmp_path, monkeypatch):
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", "off")
    assert cache_root() is None
    root = settled[0]
    keys = [p.relative_to(root).as_posix() for p in _images(root)]
    for _ in range(2):
        images = DirImages(root)
        images.check_all(keys)
        assert images.remembered == 0


def test_a_freshly_written_image_is_not_remembered(small_cube, cache):
    # A file changed within SETTLE_NS of the read could change again within the same tick
    # of the file system's clock without its ctime changing: it is read every time.
    keys = [p.relative_to(small_cube).as_posix() for p in _images(small_cube)]
    DirImages(small_cube).check_all(keys)
    again = DirImages(small_cube)
    again.check_all(keys)
    assert again.remembered == 0
    DirImages(small_cube, settle_ns=0).check_all(keys)  # no window: remembered at once
    hit = DirImages(small_cube, settle_ns=0)
    hit.check_all(keys)
    assert hit.remembered == len(keys) > 0


@pytest.mark.parametrize("layout", ["plain", "linked_dir", "linked_file", "missing", "dangling", "loop"])
def test_realpath_per_folder_is_realpath(tmp_path, layout):
    root = tmp_path / "cube"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.png").write_bytes(b"x")
    if layout == "linked_dir":
        (root / "b").symlink_to(root / "a")
        p = root / "b" / "x.png"
    elif layout == "linked_file":
        (root / "a" / "y.png").symlink_to(root / "a" / "x.png")
        p = root / "a" / "y.png"
    elif layout == "missing":
        p = root / "a" / "nope" / "z.png"
    elif layout == "dangling":
        (root / "a" / "d.png").symlink_to(tmp_path / "gone")
        p = root / "a" / "d.png"
    elif layout == "loop":
        (root / "a" / "l1").symlink_to(root / "a" / "l2")
        (root / "a" / "l2").symlink_to(root / "a" / "l1")
        p = root / "a" / "l1" / "x.png"
    else:
        p = root / "a" / "x.png"
    images = DirImages(root)
    assert images._realpath(str(p)) == os.path.realpath(p)
    assert images._realpath(str(p)) == os.path.realpath(p)  # from the folder's memo


@pytest.mark.parametrize("text, may", [
    ('[{"q": "plain \\u00e9 text"}]', False),
    ('[{"q": "a pair \\ud83d\\ude00"}]', True),  # a pair: checked record by record (and passes)
    ('[{"q": "lone \\ud800"}]', True),
    ('[{"q": "lone \\uDC00"}]', True),
    ('[{"q": "\\ud7ff is below the range"}]', False),
])
def test_text_may_hold_surrogates(text, may):
    assert text_may_hold_surrogates(text.encode("utf-8")) is may
    assert text_may_hold_surrogates(text.encode("utf-16")) is True  # not UTF-8: always checked


def test_raw_utf8_surrogate_bytes_are_refused_as_escapes_are(small_cube):
    # json.loads decodes bytes with 'surrogatepass': ED A0 80 is a lone \ud800 too.
    f = next(small_cube.rglob("test.json"))
    recs = json.loads(f.read_text(encoding="utf-8"))
    victim = next(r for r in recs if not r.get("restricted"))
    victim["question"] = "MARK"
    f.write_bytes(json.dumps(recs, ensure_ascii=False).encode("utf-8").replace(b"MARK", b"Which \xed\xa0\x80 one?"))
    cube = load_cube(small_cube)
    p = next(p for p in cube.problems if p.reason == "invalid_value")
    assert p.field == "question" and "lone UTF-16 surrogate (\\ud800)" in p.message
    assert victim["id"] not in {it.id for it in cube.items}


class Level(IntEnum):
    LOW = 1


@pytest.mark.parametrize("meta", [
    {}, {"b": 1, "a": [1, 2.5, (3, "x")], "c": {"z": None, "y": True}},
    {"n": float("nan"), "i": float("-inf"), "z": -0.0, "big": 2**70, "s": "\ud800"},
    {1: "int key", 2: "v"}, {"level": Level.LOW}, {"t": (1, [2, {"u": ()}])},
])
def test_freeze_is_the_json_round_trip(meta):
    want = json.loads(json.dumps(meta, sort_keys=True))
    got = dict(_freeze(meta))
    assert json.dumps(got) == json.dumps(want) and list(got) == list(want)
    assert [type(v) for v in got.values()] == [type(v) for v in want.values()]


@pytest.mark.parametrize("meta", [{"o": object()}, {"x": {1: "a", "b": 2}}, {1: "int key", "k": "v"}])
def test_freeze_raises_what_the_json_round_trip_raises(meta):
    with pytest.raises(TypeError) as want:
        json.dumps(meta, sort_keys=True)
    with pytest.raises(TypeError) as got:
        _freeze(meta)
    assert str(got.value) == str(want.value)


def test_freeze_of_a_circular_value_raises_as_before():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        _freeze({"l": loop})


def test_the_secret_is_read_again_when_its_file_is_another(tmp_path, monkeypatch):
    """The cache's secret is remembered per file (cube/derived_cache._secret): an entry written
    under it reads back; a secret.key replaced by another file is read (the old entries then
    fail their MAC and are absent), and one of the wrong size is refused, every time."""
    # The same file written in place with the same size and time would be taken as read: only its
    # owner can do that, and the cache is the owner's.
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path / "c"))
    first = Slot.open("kind", {"n": 1})
    assert first is not None
    first.write({"v": 1})
    assert Slot.open("kind", {"n": 1}).read(lambda v: v) == ({"v": 1},)
    path = tmp_path / "c" / "secret.key"
    replacement = tmp_path / "other.key"
    replacement.write_bytes(os.urandom(32))
    os.replace(replacement, path)  # another file: another inode
    again = Slot.open("kind", {"n": 1})
    assert again.secret == path.read_bytes() != first.secret
    assert again.read(lambda v: v) is None  # MAC'd under the old secret: absent
    path.unlink()
    fresh = Slot.open("kind", {"n": 2})  # made afresh, 0600
    assert fresh.secret == path.read_bytes() != again.secret
    assert path.stat().st_mode & 0o777 == 0o600
    path.write_bytes(b"short")  # in place, another size: not a secret, the cache is not used
    assert Slot.open("kind", {"n": 2}) is None
    assert Slot.open("kind", {"n": 2}) is None
