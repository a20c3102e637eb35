"""A release cube's load remembered whole (cube/snapshot.py): a second load of an unchanged
cube is the snapshot and is the cube the long way gives; any change of what the load
reads (an image's bytes, a file replaced by another of the same size, a chmod, a
test.json edited, added or removed, an image removed or swapped for a symlink, a cache
entry the load used rewritten) is a miss, and the load is then what the long way gives,
problems included; a planted or corrupt snapshot is ignored; a cube with an error, a
freshly written cube and `MEDRCUBE_CACHE_DIR=off` are never remembered."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from medrcube.cube import CubeError, load_cube
from medrcube.cube.derived_cache import Slot
from medrcube.cube.image_cache import SETTLE_NS
from medrcube.cube.images import DEFAULT_MAX_PIXELS
from medrcube.cube.snapshot import ITEMS_PER_PART, KIND, PART_KIND, _parts
from medrcube.testing.gencube import edit_record, find_record, image_of

MARK = "taken from the snapshot"
N_COPIES = 26


@pytest.fixture(scope="module")
def copies(small_cube_template, tmp_path_factory) -> list[Path]:
    """Copies of the small cube whose files were last changed more than SETTLE_NS ago (only
    settled images are remembered, hence snapshots): made at once, waited for once. The
    last has one image file swapped for a symlink to a copy inside the root."""
    base = tmp_path_factory.mktemp("snapshot")
    made = [Path(shutil.copytree(small_cube_template, base / f"cube{i}", symlinks=True)) for i in range(N_COPIES + 1)]
    _symlink_image_in(made[-1])
    newest = max(os.lstat(p).st_ctime_ns for c in made for p in c.rglob("*"))
    while time.time_ns() <= newest + SETTLE_NS:
        time.sleep(0.05)
    return made


@pytest.fixture(scope="module")
def settled(copies):
    return iter(copies[:-1])


@pytest.fixture(scope="module")
def linked(copies) -> Path:
    return copies[-1]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(d))
    return d


def _slot(root: Path) -> Slot:
    slot = Slot.open(KIND, _parts(str(root), os.path.realpath(root), DEFAULT_MAX_PIXELS))
    assert slot is not None
    return slot


def _fields(cube) -> dict:
    return {f.name: getattr(cube, f.name) for f in dataclasses.fields(cube) if f.name != "read_image"}


def _long_way(root: Path, monkeypatch, **kw):
    """The load with every cache off: what a snapshot must never differ from."""
    with monkeypatch.context() as m:
        m.setenv("MEDRCUBE_CACHE_DIR", "off")
        return load_cube(root, **kw)


def _part(root: Path, name: str) -> Slot:
    slot = Slot.open(PART_KIND, {"snapshot": _slot(root).key, "part": name})
    assert slot is not None
    return slot


def _plant_mark(root: Path) -> str:
    """Rewrite the snapshot, with this user's secret, so that a hit shows: the first item's
    question, in its part, and the part's new MAC in the head."""
    head = _slot(root).read(lambda v: v)
    assert head is not None, "no snapshot was written"
    part = _part(root, "items-0")
    rows = part.read(lambda v: v)
    assert rows is not None
    rows[0][0][3] = MARK
    part.write(rows[0])
    head[0]["parts"] = [[name, part.mac(verify=True) if name == "items-0" else mac] for name, mac in head[0]["parts"]]
    _slot(root).write(head[0])
    return rows[0][0][0]


def _question(root: Path, item_id: str) -> str:
    return next(it.question for it in load_cube(root) if it.id == item_id)


def test_a_second_load_is_the_snapshot_and_the_cube_the_long_way_gives(settled, cache, monkeypatch):
    root = next(settled)
    first = load_cube(root)
    assert _slot(root).path.is_file()
    again = load_cube(root)
    assert _fields(again) == _fields(first) == _fields(_long_way(root, monkeypatch))
    key = sorted(again.digests)[0]
    assert again.read_image(key) == (root / key).read_bytes()
    item_id = _plant_mark(root)
    assert _question(root, item_id) == MARK  # the hit is the snapshot, not a load


def _rewrite_image_in_place(root: Path) -> None:
    f, rec = find_record(root)
    path = image_of(f, rec)
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF  # same size, other bytes (the PNG's last chunk: its CRC fails)
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime restored; ctime cannot be


def _replace_image_same_size(root: Path) -> None:
    f, rec = find_record(root)
    path = image_of(f, rec)
    other = next(p for p in sorted(root.rglob("*.png")) if p != path and p.stat().st_size != path.stat().st_size)
    data = other.read_bytes()[: path.stat().st_size].ljust(path.stat().st_size, b"\0")
    tmp = path.with_suffix(".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _same_bytes_new_file(root: Path) -> None:
    f, rec = find_record(root)
    path = image_of(f, rec)
    tmp = path.with_suffix(".new")
    shutil.copy2(path, tmp)  # the same bytes and mtime, another inode
    os.replace(tmp, path)


def _chmod_image(root: Path) -> None:
    f, rec = find_record(root)
    path = image_of(f, rec)
    os.chmod(path, 0o600)
    os.chmod(path, 0o644)


def _edit_json(root: Path) -> None:
    _, rec = find_record(root)
    edit_record(root, rec["id"], question="edited in the file")


def _edit_json_same_size(root: Path) -> None:
    f, _ = find_record(root)
    text = f.read_text(encoding="utf-8")
    i = text.index('"question": "') + len('"question": "')
    f.write_text(text[:i] + ("X" if text[i] != "X" else "Y") + text[i + 1:], encoding="utf-8")


def _add_json(root: Path) -> None:
    f, _ = find_record(root)
    new = root / "ZZ_added"
    new.mkdir()
    recs = json.loads(f.read_text(encoding="utf-8"))
    for r in recs:
        r["id"] = "added-" + r["id"]
        r["image_path"] = os.path.relpath(f.parent / r["image_path"], new)
    (new / "test.json").write_text(json.dumps(recs), encoding="utf-8")


def _remove_json(root: Path) -> None:
    f, _ = find_record(root)
    f.unlink()


def _remove_image(root: Path) -> None:
    f, rec = find_record(root)
    image_of(f, rec).unlink()


def _symlink_image_out(root: Path) -> None:
    f, rec = find_record(root)
    path = image_of(f, rec)
    outside = root.parent / f"outside-{root.name}.png"
    shutil.copy2(path, outside)
    path.unlink()
    path.symlink_to(outside)


def _symlink_image_in(root: Path) -> None:
    # still inside the root: allowed, but another file (another identity) and another real path
    f, rec = find_record(root)
    path = image_of(f, rec)
    inside = path.with_name("elsewhere.png")
    shutil.copy2(path, inside)
    path.unlink()
    path.symlink_to(inside.name)


def _folder_moved_out_and_linked(root: Path) -> None:
    # The files keep their inodes and ctimes (a rename changes the folder's, not theirs):
    # only resolving the paths again sees that they now lead out of the root.
    f, rec = find_record(root)
    folder = image_of(f, rec).parent
    outside = root.parent / f"outside-{root.name}"
    shutil.move(folder, outside)
    folder.symlink_to(outside, target_is_directory=True)


def _fifo_for_image(root: Path) -> None:
    # Not a regular file where an image was (the files are looked at by lstat, not opened: docs/speed.md).
    f, rec = find_record(root)
    path = image_of(f, rec)
    path.unlink()
    os.mkfifo(path)


CHANGES = {
    "image rewritten in place, mtime restored": _rewrite_image_in_place,
    "image replaced by another file of the same size": _replace_image_same_size,
    "image replaced by a copy of its own bytes": _same_bytes_new_file,
    "image chmod": _chmod_image,
    "test.json edited": _edit_json,
    "test.json edited, same size": _edit_json_same_size,
    "test.json added": _add_json,
    "test.json removed": _remove_json,
    "image removed": _remove_image,
    "image swapped for a symlink out of the root": _symlink_image_out,
    "image swapped for a symlink inside the root": _symlink_image_in,
    "image folder moved out of the root and linked back": _folder_moved_out_and_linked,
    "image swapped for a FIFO": _fifo_for_image,
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_any_change_of_what_the_load_reads_is_a_miss_and_loads_as_the_long_way(settled, cache, monkeypatch, change):
    root = next(settled)
    load_cube(root)
    item_id = _plant_mark(root)
    assert _question(root, item_id) == MARK
    CHANGES[change](root)
    got = load_cube(root)
    assert MARK not in {it.question for it in got}
    assert _fields(got) == _fields(_long_way(root, monkeypatch))
    assert _fields(load_cube(root)) == _fields(got)  # and again (from the snapshot rewritten, or not)


def test_the_problems_found_are_those_of_the_long_way(settled, cache, monkeypatch):
    root = next(settled)
    load_cube(root)
    _remove_image(root)
    got = load_cube(root)
    assert any(p.reason == "image_missing" for p in got.problems)
    assert got.problems == _long_way(root, monkeypatch).problems
    with pytest.raises(CubeError) as err:
        load_cube(root, strict=True)
    assert err.value.problems[0].reason == "image_missing"


def test_a_cache_entry_the_load_used_rewritten_is_a_miss(settled, cache):
    # The records of a test.json rewritten in their own entry (with this user's secret, as
    # tests/cube/test_cube_records_cache.py does): the load takes them from that entry, as
    # it would without a snapshot.
    from medrcube.cube.records_cache import KIND as RECORDS

    root = next(settled)
    f, rec = find_record(root)
    load_cube(root)
    _plant_mark(root)
    for p in (cache / RECORDS).glob("*.json"):
        doc = json.loads(p.read_text(encoding="utf-8"))
        drafts = doc["value"]["drafts"]
        if any(d[1] == rec["id"] for d in drafts):
            next(d for d in drafts if d[1] == rec["id"])[3]["question"] = "from the records' entry"
            Slot(p, (cache / "secret.key").read_bytes(), doc["key"]).write(doc["value"])
    assert _question(root, rec["id"]) == "from the records' entry"


def test_warnings_are_kept_in_order_and_a_strict_load_is_as_before(settled, cache, monkeypatch):
    root = next(settled)
    _, rec = find_record(root)
    edit_record(root, rec["id"], task="Not A Task")  # a warning: the item is kept
    first = load_cube(root)
    assert any(p.reason == "unknown_task" for p in first.problems)
    hit = load_cube(root)
    assert hit.problems == first.problems == _long_way(root, monkeypatch).problems
    assert _fields(load_cube(root, strict=True)) == _fields(_long_way(root, monkeypatch, strict=True))


@pytest.mark.parametrize("how", ["planted", "corrupt", "malformed"])
def test_a_snapshot_this_user_did_not_write_or_cannot_read_is_ignored(settled, cache, monkeypatch, how):
    root = next(settled)
    load_cube(root)
    slot = _slot(root)
    doc = json.loads(slot.path.read_text(encoding="utf-8"))
    if how == "planted":  # another fingerprint, with a MAC made without the secret
        doc["value"]["fingerprint"] = "0" * 64
        doc["mac"] = "0" * 64
        slot.path.write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
    elif how == "corrupt":
        slot.path.write_text("{not json", encoding="utf-8")
    else:  # MAC'd by this user's cache but not the shape of a snapshot
        doc["value"]["parts"][0] = ["too", "short", "!"]
        slot.write(doc["value"])
    got = load_cube(root)
    assert got.fingerprint != "0" * 64
    assert _fields(got) == _fields(_long_way(root, monkeypatch))
    assert slot.read(lambda v: v) is not None  # written again by the long way


@pytest.mark.parametrize("how", ["rewritten", "missing", "corrupt"])
def test_a_part_not_the_one_the_head_names_is_a_miss(settled, cache, monkeypatch, how):
    # A part rewritten since the head was (even with this user's secret), gone or corrupt:
    # never mixed into a snapshot; the long way loads.
    root = next(settled)
    load_cube(root)
    part = _part(root, "items-0")
    rows = part.read(lambda v: v)
    assert rows is not None
    if how == "rewritten":
        rows[0][0][3] = MARK
        part.write(rows[0])
    elif how == "missing":
        part.path.unlink()
    else:
        part.path.write_text("{not json", encoding="utf-8")
    got = load_cube(root)
    assert MARK not in {it.question for it in got}
    assert _fields(got) == _fields(_long_way(root, monkeypatch))


def test_the_items_are_kept_in_parts_of_a_thousand(settled, cache, monkeypatch):
    root = next(settled)
    cube = load_cube(root)
    head = _slot(root).read(lambda v: v)
    assert head is not None
    names = [name for name, _ in head[0]["parts"]]
    n_parts = -(-len(cube.items) // ITEMS_PER_PART)
    assert names == ["refs", "images", "problems", "digests", "contents", *(f"items-{n}" for n in range(n_parts))]
    monkeypatch.setattr("medrcube.cube.snapshot.ITEMS_PER_PART", 7)  # several parts, read back in order
    _slot(root).path.unlink()
    load_cube(root)
    assert len([n for n, _ in _slot(root).read(lambda v: v)[0]["parts"] if n.startswith("items-")]) == -(-len(cube.items) // 7)
    assert _fields(load_cube(root)) == _fields(cube)


def test_a_cube_with_an_error_is_never_remembered(settled, cache, monkeypatch):
    root = next(settled)
    _, rec = find_record(root)
    edit_record(root, rec["id"], gt_answer="matches no option")
    for _ in range(2):
        got = load_cube(root)
        assert any(p.reason == "gt_answer_no_match" for p in got.problems)
    assert not _slot(root).path.exists()
    with pytest.raises(CubeError):
        load_cube(root, strict=True)


def test_a_freshly_written_cube_and_a_cache_off_are_never_remembered(small_cube, cache, monkeypatch):
    load_cube(small_cube)
    load_cube(small_cube)
    assert not (cache / KIND).exists()  # its images changed within SETTLE_NS: read each time
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", "off")
    load_cube(small_cube)
    assert not (cache / KIND).exists()


def test_a_cube_with_an_image_linked_inside_the_root_is_found_again_the_long_way(linked, cache, monkeypatch):
    """An image file that is a symlink (inside the root, which the load allows) sends the
    check of the paths the long way (`_same_images_the_long_way`): the snapshot is still
    taken when nothing changed, and a change behind the link is still a miss."""
    root = linked
    first = load_cube(root)
    assert _fields(first) == _fields(_long_way(root, monkeypatch))
    item_id = _plant_mark(root)
    assert _question(root, item_id) == MARK  # remembered, and found again through the link
    f, rec = find_record(root)
    target = image_of(f, rec).with_name("elsewhere.png")
    _same_bytes_new_file_at(target)
    got = load_cube(root)
    assert MARK not in {it.question for it in got}
    assert _fields(got) == _fields(_long_way(root, monkeypatch))


def _same_bytes_new_file_at(path: Path) -> None:
    tmp = path.with_suffix(".new")
    shutil.copy2(path, tmp)  # the same bytes and mtime, another inode
    os.replace(tmp, path)


def test_a_plain_path_and_its_resolution_give_the_same_key(tmp_path):
    """`DirImages.plain_key` is `resolve` from the text: the same key for a plain path, and
    None (resolve it) for every path it cannot read from the text alone."""
    from medrcube.cube.dirimages import DirImages

    root = tmp_path / "root"
    (root / "a" / "images").mkdir(parents=True)
    (root / "a" / "images" / "x.png").write_bytes(b"x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "a" / "out").symlink_to(outside, target_is_directory=True)
    (root / "a" / "in").symlink_to(root / "a" / "images", target_is_directory=True)
    images = DirImages(root)
    plain = [("a", "images/x.png"), ("", "a/images/x.png"), ("a", "in/x.png"), ("a", "images/missing.png")]
    for folder, ref in plain:
        assert images.plain_key(folder, ref) == images.resolve(os.path.join(images.root, folder), ref).key is not None
    for folder, ref in [("a", "../a/images/x.png"), ("a", "./images/x.png"), ("a", "images//x.png"), ("a", "/etc/x.png"),
                        ("a", "C:x.png"), ("a", "out/x.png"), ("a", "images/x.png\x00"), ("a", "")]:
        assert images.plain_key(folder, ref) is None
