"""A release-layout cube's load remembered whole, checked against its files (docs/speed.md).

With the records (cube/records_cache.py) and the image checks (cube/image_cache.py) taken
from this user's cache, what is left of a load is building the cube again from them: the
drafts decoded, the items built and frozen, the fingerprint hashed over every record (at
paper scale, 7,626 items, about 0.2 s of CPU before the gate's first request). A load is a
function of what it reads: the release files' bytes, where each image path leads (the
lexical and symlink checks), each image file's identity, the cache entries it takes
records, checks and content keys from, and the code. So the loaded cube is remembered in
the same authenticated cache (HMAC'd JSON, never pickle: cube/derived_cache.py) with
all of those, and taken from it only when every one is found again, checked as the load
would check it:

- the list of release files (an added or removed test.json is a miss), each one's
  realpath inside the cube root, and the SHA-256 of its bytes, read whole (one byte
  changed is a miss);
- every image path resolved again as `DirImages.resolve` does (a path that now goes
  through a symlink, out of the root or not, leads elsewhere: a miss; a plain path, when
  no image file is a symlink, from its text and its folder's real path,
  `DirImages.plain_key`), and every image
  file opened and fstat'd as the image checks' cache does: its identity (device, inode,
  size, mtime, ctime) must be the one recorded (any write, chmod or replacement changes
  the ctime or the inode: a miss), and an image recorded missing (a restricted item's)
  must still be missing;
- the MAC of each cache entry the load took something from (the records of each file,
  the image checks, the content keys) must be the one it had: an entry rewritten since,
  even by this user's own cache, is a miss, so the snapshot never gives what the load
  would not.

A miss is the load as before (its own caches, its messages, its strict mode), which then
writes the snapshot again. Only a load that found no error is remembered (its warnings,
in order, are part of the snapshot), and only when every image it checked was settled
(`image_cache.SETTLE_NS`) and every entry it used verifies: a cube with a bad record or
image is loaded, and reported, the long way every time. The key holds the cube's path
as given and as resolved, the pixel and size limits, the JSON reader's limits, Pillow's
version and the code of the whole `cube` package (with the taxonomy and the records'
types). As with the image checks, the bytes sent are not taken on trust: every image read
later is checked against the digest recorded (`DirImages.reader`).
`MEDRCUBE_CACHE_DIR=off` loads the long way every time.

The snapshot is kept in parts of a few hundred KB (the items a thousand at a time, the
image paths, the files' identities, the digests, the content keys, the warnings), each an
entry of its own whose MAC the head entry records, and is taken only if every part read
has the MAC recorded: so no part of another snapshot is mixed in. Parts, because a process
that reads and frees one text of megabytes has glibc's malloc raise its mmap threshold to
that size for good, and the run's later buffers (request bodies, prepared images) then
stay in the heap: in one piece (3.6 MB at paper scale) the gate's peak RSS rose by about
15 MiB.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from medrcube.cube.content import canonical_keys
from medrcube.cube.content import entry_slot as content_slot
from medrcube.cube.derived_cache import Slot, cache_root, entry_mac, package_sources, source_digest
from medrcube.cube.dirimages import MAX_IMAGE_BYTES, DirImages, FileCheck, open_regular_stat
from medrcube.cube.image_cache import identity
from medrcube.cube.item import Content, Cube, Item, Problem
from medrcube.cube.problems import REASONS
from medrcube.cube.records_cache import entry_slot as records_slot

KIND = "cube-snapshot"
T = TypeVar("T")
_FIELDS = ("id", "dataset", "image", "question", "options", "answer", "task", "modality", "part", "original_task",
           "restricted", "meta", "attributes")


def _parts(shown_root: str, real_root: str, max_pixels: int) -> dict[str, Any]:
    import PIL

    from medrcube import records, taxonomy

    code = source_digest([*package_sources(Path(__file__).parent), records.__file__, taxonomy.__file__])
    return {"root": shown_root, "real": real_root, "max_pixels": max_pixels, "max_bytes": MAX_IMAGE_BYTES,
            "limits": [sys.get_int_max_str_digits(), sys.getrecursionlimit()], "pillow": PIL.__version__, "code": code}


@dataclass(frozen=True)
class Seen:
    """What a full load read, for its snapshot: each release file (its path relative to the
    root, its bytes' SHA-256, the name its messages give it, its default dataset) and each
    distinct image path (the folder of its release file, the path as written, its key)."""

    files: Sequence[tuple[str, str, str, str]]
    refs: Sequence[tuple[str, str, str]]


@dataclass(frozen=True)
class _Head:
    files: list[tuple[str, str]]
    entries: list[tuple[str, str]]
    fingerprint: str
    parts: list[tuple[str, str]]  # (part name, the MAC it was written with), in order


def _str(x: Any) -> str:
    if not isinstance(x, str):
        raise ValueError("malformed cube snapshot")
    return x


def _decode_head(v: Any) -> _Head:
    """The head's value, its shape checked (any other shape: the entry is absent)."""
    return _Head([(_str(rel), _str(digest)) for rel, digest in v["files"]],
                 [(_str(path), _str(mac)) for path, mac in v["entries"]], _str(v["fingerprint"]),
                 [(_str(name), _str(mac)) for name, mac in v["parts"]])


def _refs(v: Any) -> list[tuple[str, str, str]]:
    return [(_str(folder), _str(ref), _str(key)) for folder, ref, key in v]


def _images(v: Any) -> dict[str, list[int] | None]:
    images: dict[str, list[int] | None] = {}
    for key, ident in v.items():
        if ident is not None and not (isinstance(ident, list) and len(ident) == 5 and all(type(x) is int for x in ident)):
            raise ValueError("malformed cube snapshot")
        images[_str(key)] = ident
    return images


def _rows(v: Any) -> list[list[Any]]:
    if not isinstance(v, list) or not all(isinstance(row, list) and len(row) == len(_FIELDS) for row in v):
        raise ValueError("malformed cube snapshot")
    return v


def _problems(v: Any) -> list[Problem]:
    problems = []
    for source, item_id, field, message, reason, severity in v:
        if reason not in REASONS or severity != "warning":
            raise ValueError("malformed cube snapshot")
        problems.append(Problem(source, item_id, field, message, reason, severity))
    return problems


def _digests(v: Any) -> dict[str, str]:
    return {_str(k): _str(d) for k, d in v.items()}


def _contents(v: Any) -> dict[str, Content]:
    contents = {}
    for k, (key, dhash) in v.items():
        if type(dhash) is not int:
            raise ValueError("malformed cube snapshot")
        contents[_str(k)] = Content(_str(key), dhash)
    return contents


PART_KIND = "cube-snapshot-part"
ITEMS_PER_PART = 1000  # ~0.25 MB of JSON at paper scale (module docstring)
_SINGLE = ("refs", "images", "problems", "digests", "contents")


class Snapshot:
    """The snapshot of one cube root: `take` before loading it, `keep` after a full load."""

    def __init__(self, slot: Slot, shown_root: str, max_pixels: int) -> None:
        self.slot, self.shown_root, self.max_pixels = slot, shown_root, max_pixels

    @classmethod
    def open(cls, shown_root: str, max_pixels: int) -> Snapshot | None:
        """None when caching is off or cannot be used."""
        slot = Slot.open(KIND, _parts(shown_root, os.path.realpath(shown_root), max_pixels))
        return None if slot is None else cls(slot, shown_root, max_pixels)

    def take(self, files: Sequence[str]) -> Cube | None:
        """The remembered cube if everything it was loaded from is found again (module
        docstring), else None; `files` are the release files found now, in load order."""
        hit = self.slot.read(_decode_head)
        if hit is None:
            return None
        head = hit[0]
        images = DirImages(self.shown_root, max_pixels=self.max_pixels)
        macs = dict(head.parts)
        if set(macs) != {*_SINGLE, *(f"items-{n}" for n in range(len(macs) - len(_SINGLE)))} or len(macs) != len(head.parts):
            return None
        if not self._same_files(head, files, images.root):
            return None
        refs, idents = self._part("refs", macs, _refs), self._part("images", macs, _images)
        if refs is None or idents is None or not _same_images(refs, idents, images) or not _same_entries(head):
            return None
        rows: list[list[Any]] = []
        for n in range(len(macs) - len(_SINGLE)):
            part = self._part(f"items-{n}", macs, _rows)
            if part is None:
                return None
            rows += part
        problems, digests = self._part("problems", macs, _problems), self._part("digests", macs, _digests)
        contents = self._part("contents", macs, _contents)
        if problems is None or digests is None or contents is None:
            return None
        return _cube(rows, problems, digests, contents, head.fingerprint, self.shown_root, images)

    def _part(self, name: str, macs: Mapping[str, str], decode: Callable[[Any], T]) -> T | None:
        slot = Slot.open(PART_KIND, {"snapshot": self.slot.key, "part": name})
        got = None if slot is None else slot.read_as(decode, macs[name])
        return None if got is None else got[0]

    def _same_files(self, head: _Head, files: Sequence[str], real_root: str) -> bool:
        if [rel for rel, _ in head.files] != list(files):
            return False
        for rel, digest in head.files:
            real = os.path.realpath(os.path.join(self.shown_root, rel))
            if not (real + os.sep).startswith(real_root + os.sep):
                return False
            try:
                with open(real, "rb") as f:
                    data = f.read()
            except OSError:
                return False
            if hashlib.sha256(data).hexdigest() != digest:
                return False
        return True

    def keep(self, cube: Cube, seen: Seen, images: DirImages, checks: Mapping[str, FileCheck]) -> None:
        """Remember a full load of this root, if it may be (module docstring)."""
        if any(p.severity != "warning" for p in cube.problems) or images.checks_cache is None:
            return
        settled = images.checks_cache.identities()
        idents: dict[str, list[int] | None] = {}
        for key, check in checks.items():
            if check.missing:
                idents[key] = None
            elif key in settled and check.check is not None and check.check.reason is None:
                idents[key] = settled[key]
            else:
                return  # read unsettled (or failed): not remembered
        slots = [records_slot(shown, dataset) for _, _, shown, dataset in seen.files]
        slots += [images.checks_cache.slot, content_slot(os.path.realpath(self.shown_root))]  # as assemble.finish keys it
        root = cache_root()
        entries = []
        for slot in slots:
            mac = None if slot is None or root is None else slot.mac(verify=True)
            if slot is None or mac is None:
                return  # an entry the load did not use or could not keep
            entries.append((os.path.relpath(slot.path, root), mac))
        rows = [[_row_value(it, name) for name in _FIELDS] for it in cube.items]
        parts: dict[str, Any] = {
            "refs": [list(r) for r in seen.refs],
            "images": idents,
            "problems": [[p.source, p.item_id, p.field, p.message, p.reason, p.severity] for p in cube.problems],
            "digests": dict(cube.digests),
            "contents": {k: [c.key, c.dhash] for k, c in cube.contents.items()},
            **{f"items-{n}": rows[at:at + ITEMS_PER_PART] for n, at in enumerate(range(0, len(rows), ITEMS_PER_PART))},
        }
        written = []
        for name, value in parts.items():  # the parts first, the head that names them last
            slot = Slot.open(PART_KIND, {"snapshot": self.slot.key, "part": name})
            if slot is None:
                return
            slot.write(value)
            mac = slot.mac(verify=True)
            if mac is None:
                return  # not written (a cache that cannot be written)
            written.append([name, mac])
        self.slot.write({
            "files": [[rel, digest] for rel, digest, _, _ in seen.files],
            "entries": [list(e) for e in entries],
            "fingerprint": cube.fingerprint,
            "parts": written,
        })


def _row_value(it: Item, name: str) -> Any:
    value = getattr(it, name)
    if name == "options":
        return list(value)
    if name == "meta":
        return dict(value)
    if name == "attributes":
        return None if value is None else value.to_dict()
    return value


def _same_images(refs: list[tuple[str, str, str]], idents: Mapping[str, list[int] | None], images: DirImages) -> bool:
    """Every image path leads where it led, and every image file is the one checked.

    The files first, each looked at without following a symlink at its last component: when
    none is one, a path whose text is plain leads where the text says as long as its folder
    does (`DirImages.plain_key`: no lstat per image, a realpath per folder), and only the
    others are resolved the long way. A cube with a symlinked image file (or a dangling
    link where an image is recorded missing) is checked the long way throughout."""
    same = _same_identities(idents, images, nofollow=True)
    if same is None:  # an image file is a symlink
        return _same_images_the_long_way(refs, idents, images)
    if not same:
        return False
    for folder, ref, key in refs:
        got = images.plain_key(folder, ref)
        if got is None:
            got = images.resolve(os.path.join(images.root, folder), ref).key
        if got != key:
            return False
    return True


def _same_images_the_long_way(refs: list[tuple[str, str, str]], idents: Mapping[str, list[int] | None],
                              images: DirImages) -> bool:
    """`_same_images` as the load checks, every path resolved and every file followed."""
    for folder, ref, key in refs:
        if images.resolve(os.path.join(images.root, folder), ref).key != key:
            return False
    return _same_identities(idents, images, nofollow=False) is True


def _same_identities(idents: Mapping[str, list[int] | None], images: DirImages, *, nofollow: bool) -> bool | None:
    """Every image file is there with the identity recorded (one recorded missing is missing): a regular
    file within the size limit, unchanged; with `nofollow`, None as soon as one is a symlink at its last
    component. With `nofollow` each file is looked at by `lstat`, one system call where opening it took
    three (open, fstat, close: about 10 ms of a paper-scale cube's load for 3,441 image files): a file
    with the identity it had when this user's load opened and read it (device, inode, size, modification
    and change times) is that file unchanged, its permissions too (a chmod changes the change time).
    Without, each is opened, following symlinks (the long way)."""
    for key, ident in idents.items():
        path = images.path(key)
        try:
            if nofollow:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    return None
                if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_IMAGE_BYTES:
                    return False
            else:
                st = open_regular_stat(path)
        except FileNotFoundError:
            if ident is not None:
                return False
            continue
        except OSError:
            return False
        if ident is None or identity(st) != ident:
            return False
    return True


def _same_entries(head: _Head) -> bool:
    """Each cache entry the load used still holds what it held (the same MAC)."""
    root = cache_root()
    if root is None:
        return False
    return all(entry_mac(root / path) == mac for path, mac in head.entries)


def _cube(rows: list[list[Any]], problems: list[Problem], digests: dict[str, str], contents: dict[str, Content],
          fingerprint: str, source: str, images: DirImages) -> Cube:
    from medrcube.records import Attributes

    items = tuple(Item(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
                       None if r[12] is None else Attributes.from_dict(r[12])) for r in rows)  # _FIELDS
    return Cube(
        items=items,
        source=source,
        fingerprint=fingerprint,
        read_image=images.reader(digests),
        digests=digests,
        problems=tuple(problems),
        root=images.root,
        contents=contents,
        same_image=canonical_keys(contents),
    )
