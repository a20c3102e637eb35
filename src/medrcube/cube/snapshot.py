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
- every image path resolved again through `DirImages.resolve` (a path that now goes
  through a symlink, out of the root or not, leads elsewhere: a miss), and every image
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
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrcube.cube.content import canonical_keys
from medrcube.cube.content import entry_slot as content_slot
from medrcube.cube.derived_cache import Slot, cache_root, entry_mac, package_sources, source_digest
from medrcube.cube.dirimages import MAX_IMAGE_BYTES, DirImages, FileCheck, open_regular_stat
from medrcube.cube.image_cache import identity
from medrcube.cube.item import Content, Cube, Item, Problem
from medrcube.cube.problems import REASONS
from medrcube.cube.records_cache import entry_slot as records_slot

KIND = "cube-snapshot"
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
class _Value:
    files: list[tuple[str, str]]
    refs: list[tuple[str, str, str]]
    images: dict[str, list[int] | None]
    entries: list[tuple[str, str]]
    items: list[list[Any]]
    problems: list[Problem]
    digests: dict[str, str]
    contents: dict[str, Content]
    fingerprint: str


def _str(x: Any) -> str:
    if not isinstance(x, str):
        raise ValueError("malformed cube snapshot")
    return x


def _decode(v: Any) -> _Value:
    """The snapshot's value, its shape checked (any other shape: the entry is absent)."""
    files = [(_str(rel), _str(digest)) for rel, digest in v["files"]]
    refs = [(_str(folder), _str(ref), _str(key)) for folder, ref, key in v["refs"]]
    images: dict[str, list[int] | None] = {}
    for key, ident in v["images"].items():
        if ident is not None and not (isinstance(ident, list) and len(ident) == 5 and all(type(x) is int for x in ident)):
            raise ValueError("malformed cube snapshot")
        images[key] = ident
    entries = [(_str(path), _str(mac)) for path, mac in v["entries"]]
    items = v["items"]
    if not isinstance(items, list) or not all(isinstance(row, list) and len(row) == len(_FIELDS) for row in items):
        raise ValueError("malformed cube snapshot")
    problems = []
    for source, item_id, field, message, reason, severity in v["problems"]:
        if reason not in REASONS or severity != "warning":
            raise ValueError("malformed cube snapshot")
        problems.append(Problem(source, item_id, field, message, reason, severity))
    digests = {_str(k): _str(d) for k, d in v["digests"].items()}
    contents = {}
    for k, (key, dhash) in v["contents"].items():
        if type(dhash) is not int:
            raise ValueError("malformed cube snapshot")
        contents[k] = Content(_str(key), dhash)
    return _Value(files, refs, images, entries, items, problems, digests, contents, _str(v["fingerprint"]))


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
        hit = self.slot.read(_decode)
        if hit is None:
            return None
        snap = hit[0]
        images = DirImages(self.shown_root, max_pixels=self.max_pixels)
        if not (self._same_files(snap, files, images.root) and _same_images(snap, images) and _same_entries(snap)):
            return None
        return _cube(snap, self.shown_root, images)

    def _same_files(self, snap: _Value, files: Sequence[str], real_root: str) -> bool:
        if [rel for rel, _ in snap.files] != list(files):
            return False
        for rel, digest in snap.files:
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
        slots += [images.checks_cache.slot, content_slot(self.shown_root)]
        root = cache_root()
        entries = []
        for slot in slots:
            mac = None if slot is None or root is None else slot.mac(verify=True)
            if slot is None or mac is None:
                return  # an entry the load did not use or could not keep
            entries.append((os.path.relpath(slot.path, root), mac))
        self.slot.write({
            "files": [[rel, digest] for rel, digest, _, _ in seen.files],
            "refs": [list(r) for r in seen.refs],
            "images": idents,
            "entries": [list(e) for e in entries],
            "items": [[_row_value(it, name) for name in _FIELDS] for it in cube.items],
            "problems": [[p.source, p.item_id, p.field, p.message, p.reason, p.severity] for p in cube.problems],
            "digests": dict(cube.digests),
            "contents": {k: [c.key, c.dhash] for k, c in cube.contents.items()},
            "fingerprint": cube.fingerprint,
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


def _same_images(snap: _Value, images: DirImages) -> bool:
    """Every image path leads where it led, and every image file is the one checked."""
    for folder, ref, key in snap.refs:
        if images.resolve(os.path.join(images.root, folder), ref).key != key:
            return False
    for key, ident in snap.images.items():
        try:
            st = open_regular_stat(images.path(key))
        except FileNotFoundError:
            if ident is not None:
                return False
            continue
        except OSError:
            return False
        if ident is None or identity(st) != ident:
            return False
    return True


def _same_entries(snap: _Value) -> bool:
    """Each cache entry the load used still holds what it held (the same MAC)."""
    root = cache_root()
    if root is None:
        return False
    return all(entry_mac(root / path) == mac for path, mac in snap.entries)


def _cube(snap: _Value, source: str, images: DirImages) -> Cube:
    from medrcube.records import Attributes

    items = tuple(Item(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
                       None if r[12] is None else Attributes.from_dict(r[12])) for r in snap.items)  # _FIELDS
    return Cube(
        items=items,
        source=source,
        fingerprint=snap.fingerprint,
        read_image=images.reader(snap.digests),
        digests=snap.digests,
        problems=tuple(snap.problems),
        root=images.root,
        contents=snap.contents,
        same_image=canonical_keys(snap.contents),
    )
