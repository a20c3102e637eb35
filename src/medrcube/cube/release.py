"""Loader for the MedRCube release layout: a directory tree of `<dataset>/test.json` files.

Each test.json is a JSON list of release records (cube/records.py) whose `image_path` is
relative to the test.json's folder. The reference evaluator walks the tree the same way;
unlike it, this loader checks every record and every image and says what is wrong.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from medrcube.cube.assemble import ImageOutcome, build_items, drop_duplicate_ids, finish
from medrcube.cube.dirimages import DirImages, FileCheck, Resolved
from medrcube.cube.images import DEFAULT_MAX_PIXELS
from medrcube.cube.item import Cube, CubeError
from medrcube.cube.problems import Collector
from medrcube.cube.records import Draft, parse_release_record, text_may_hold_surrogates
from medrcube.cube.records_cache import checked_records
from medrcube.cube.snapshot import Seen, Snapshot

RELEASE_FILE = "test.json"


def find_release_files(root: str | os.PathLike[str]) -> list[str]:
    """Paths of every test.json under `root` relative to it, sorted (symlinked dirs not followed)."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        if RELEASE_FILE in files:
            found.append(os.path.relpath(os.path.join(folder, RELEASE_FILE), root))
    return sorted(found, key=lambda p: p.split(os.sep))


def read_json_file(path: str, shown: str, col: Collector) -> object | None:
    """Parse one JSON file; on failure report where (line and column) and return None."""
    data = read_file_bytes(path, shown, col)
    return None if data is None else parse_json_bytes(data, shown, col)


def read_file_bytes(path: str, shown: str, col: Collector) -> bytes | None:
    """The bytes of one cube file; on failure report it and return None."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        col.error(shown, None, None, f"cannot read the file ({exc.strerror or exc}); expected a readable JSON file", "unreadable_file")
        return None


def parse_json_bytes(data: bytes, shown: str, col: Collector) -> object | None:
    """The JSON value of a file's bytes; on failure report where (line and column) and return None."""
    try:
        value: object = json.loads(data)
        return value
    except json.JSONDecodeError as exc:
        col.error(shown, None, None, f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; expected a JSON list of records", "malformed_json")
    except UnicodeDecodeError as exc:
        col.error(shown, None, None, f"not UTF-8 text (byte {exc.start}: {exc.reason}); expected a UTF-8 JSON file", "malformed_json")
    except (RecursionError, ValueError) as exc:  # beyond the parser's limits: no line to give
        col.error(shown, None, None, f"malformed JSON: {json_limit(exc)}; expected a JSON list of records", "malformed_json")
    return None


def _utf8(name: str) -> bool:
    """False for a name decoded from the file system with surrogate escapes (not UTF-8)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(name: str) -> str:
    """A non-UTF-8 name shown with its odd bytes escaped (\\xNN), printable anywhere."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def json_limit(exc: RecursionError | ValueError) -> str:
    """Say which of the parser's limits a JSON text crossed.

    json.loads raises these outside JSONDecodeError (so without a position): RecursionError
    for arrays or objects nested beyond the recursion limit, ValueError for an integer
    literal longer than Python's integer-string limit (4300 digits by default). Neither
    belongs in a cube record, so the file (or line) is refused rather than the limit raised.
    """
    if isinstance(exc, RecursionError):
        return "arrays or objects nested too deeply to read"
    if "integer string conversion" in str(exc):
        return f"an integer longer than {sys.get_int_max_str_digits()} digits"
    return str(exc)


def load_release(root: str | os.PathLike[str], *, strict: bool = False, max_pixels: int = DEFAULT_MAX_PIXELS) -> Cube:
    """Load and validate a release-layout directory; see load_cube for the policy."""
    shown_root = os.fspath(root)
    if not _utf8(shown_root):
        raise CubeError(f"{_printable(shown_root)}: the cube's path is not valid UTF-8; rename it (or a folder above "
                        "it) in UTF-8: the path goes into run.json, results and reports")
    if not os.path.isdir(root):
        raise CubeError(f"{shown_root}: not a directory; expected a release-layout cube (<dataset>/test.json files)")
    files = find_release_files(root)
    if not files:
        raise CubeError(
            f"{shown_root}: no {RELEASE_FILE} found anywhere below it; expected the release layout "
            f"<dataset>/{RELEASE_FILE} (a JSON list of records per dataset folder)"
        )
    snapshot = Snapshot.open(shown_root, max_pixels)  # the whole load remembered (cube/snapshot.py)
    if snapshot is not None and (cube := snapshot.take(files)) is not None:
        return cube
    col = Collector(strict=strict)
    images = DirImages(root, max_pixels=max_pixels)
    drafts: list[Draft] = []
    bases: dict[int, str] = {}  # id(draft) -> absolute folder its image_path is relative to
    folders: dict[int, str] = {}  # id(draft) -> that folder relative to the root (for the snapshot)
    seen: list[tuple[str, str, str, str]] = []  # each file read: rel, sha256, shown, default dataset
    for rel in files:
        shown = str(Path(shown_root) / rel)
        if not _utf8(rel):
            col.error(_printable(shown), None, None, "the path is not valid UTF-8 (the folder or file name holds "
                      "bytes of another encoding); rename it in UTF-8: names go into item ids, keys and reports",
                      "non_utf8_name")
            continue
        real = os.path.realpath(os.path.join(root, rel))
        if not (real + os.sep).startswith(images.root + os.sep):
            col.error(shown, None, None, f"is a symlink to {real!r}, outside the cube root {images.root!r}; expected the file itself inside the cube", "unreadable_file")
            continue
        data = read_file_bytes(real, shown, col)
        if data is None:
            continue
        folder_rel = os.path.dirname(rel)
        default_dataset = folder_rel.replace(os.sep, "/") or os.path.basename(os.path.realpath(root))
        here = checked_records(data, source=shown, default_dataset=default_dataset, col=col,
                               parse=functools.partial(_parse_file, data, shown, default_dataset))
        base = os.path.join(images.root, folder_rel)
        seen.append((rel, hashlib.sha256(data).hexdigest(), shown, default_dataset))
        for d in here or ():
            drafts.append(d)
            bases[id(d)] = base
            folders[id(d)] = folder_rel
    drafts = drop_duplicate_ids(drafts, col)
    cube, checks = _attach_images(drafts, bases, images, col, source=shown_root)
    if snapshot is not None:
        refs = {(folders[id(d)], d.image_ref): "" for d in drafts if d.image_ref is not None}
        snapshot.keep(cube, Seen(seen, [(folder, ref, images.resolve(os.path.join(images.root, folder), ref).key or "")
                                        for folder, ref in refs]), images, checks)
    return cube


def _parse_file(data: bytes, shown: str, default_dataset: str, col: Collector) -> list[Draft] | None:
    """The drafts of one test.json's bytes (its problems reported to `col`); None when it
    is not a JSON list of records."""
    records = parse_json_bytes(data, shown, col)
    if records is None:
        return None
    if not isinstance(records, list):
        col.error(shown, None, None, f"holds a JSON {type(records).__name__}; expected a JSON list of records", "not_a_list")
        return None
    clean = not text_may_hold_surrogates(data)
    drafts = []
    for n, rec in enumerate(records, start=1):
        d = parse_release_record(rec, source=shown, where=f"record #{n}", default_dataset=default_dataset, col=col,
                                 no_surrogates=clean)
        if d is not None:
            drafts.append(d)
    return drafts


def _attach_images(drafts: list[Draft], bases: dict[int, str], images: DirImages, col: Collector, *,
                   source: str) -> tuple[Cube, dict[str, FileCheck]]:
    """The cube, and the check of each image file it read."""
    resolved = [None if d.image_ref is None else images.resolve(bases[id(d)], d.image_ref) for d in drafts]
    checks = images.check_all(r.key for r in resolved if r is not None and r.key is not None)
    outcomes = [image_outcome(d.image_ref, r, checks) for d, r in zip(drafts, resolved, strict=True)]
    items = build_items(drafts, outcomes, col)
    digests = {k: c.check.digest for k, c in checks.items() if c.check is not None and c.check.reason is None}
    return finish(items, col, source=source, reader=images.reader, digests=digests, root=images.root), checks


def image_outcome(ref: str | None, r: Resolved | None, checks: Mapping[str, FileCheck], field: str = "image_path") -> ImageOutcome:
    """Map a resolved path (None when the record names no image) and its file check onto the
    loader-independent outcome."""
    if ref is None or r is None:
        return ImageOutcome(absent=True, message=f"no {field}", field=field)
    if r.key is None:
        return ImageOutcome(reason=r.reason, message=r.message, field=field)
    c = checks[r.key]
    if c.missing:
        return ImageOutcome(absent=True, message=f"{field} {ref!r}: file {r.key!r} does not exist in the cube", field=field)
    if c.read_error is not None and c.read_reason != "image_unreadable":
        return ImageOutcome(reason=c.read_reason, message=f"{field} {ref!r}: {r.key!r} {c.read_error}", field=field)
    if c.read_error is not None:
        return ImageOutcome(reason="image_unreadable", message=f"{field} {ref!r}: cannot read {r.key!r} ({c.read_error}); expected a readable image file", field=field)
    if c.check is not None and c.check.reason is not None:
        return ImageOutcome(reason=c.check.reason, message=f"{field} {ref!r}: {c.check.message}", field=field)
    return ImageOutcome(key=r.key, field=field)
