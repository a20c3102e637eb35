"""The checked records of one test.json remembered by the file's content (docs/speed.md).

Parsing and checking a release file's records (cube/records.py) is the largest part of a
load once the image checks come from the cache (cube/image_cache.py): 0.035 s of CPU for
the bundled cube's 864 records, ~0.3 s for 7,626. What it yields is a function of the
file's bytes, the name the messages give the file, the dataset name a record without one
gets, the JSON reader's limits and the checking code; so it is remembered in this user's
authenticated cache (cube/derived_cache.py), one entry per file name under the SHA-256
of the others, holding the SHA-256 of the bytes it was made from: one byte changed in
the file, or another release of the code, is a miss (and the entry is rewritten). The value is the drafts
and the problems, in order; the problems are reported again on a hit, through the
load's collector (so `strict=True` raises at the same first error). A malformed entry is
absent; `MEDRCUBE_CACHE_DIR=off` parses every time.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from medrcube.cube.item import Problem
from medrcube.cube.problems import REASONS, Collector
from medrcube.cube.records import Draft

if TYPE_CHECKING:
    from medrcube.cube.derived_cache import Slot

KIND = "release-records"

Parsed = tuple[list[Draft], list[Problem]]


def _code() -> str:
    from medrcube import taxonomy
    from medrcube.cube import derived_cache, item, problems, records

    return derived_cache.source_digest([records.__file__, taxonomy.__file__, problems.__file__, item.__file__, __file__])


def _encode(parsed: Parsed) -> dict[str, Any]:
    drafts, found = parsed
    return {"drafts": [[d.source, d.id, d.image_ref, {**d.fields, "options": list(d.fields["options"])}] for d in drafts],
            "problems": [[p.source, p.item_id, p.field, p.message, p.reason, p.severity] for p in found]}


def _decode(value: Any, digest: str) -> Parsed:
    if value["file"] != digest:
        raise ValueError("another version of the file")  # the entry is then absent
    drafts = []
    for source, item_id, image_ref, fields in value["drafts"]:
        if not (isinstance(source, str) and isinstance(item_id, str) and (image_ref is None or isinstance(image_ref, str))
                and isinstance(fields, dict) and isinstance(fields.get("options"), list)):
            raise ValueError("malformed draft")
        drafts.append(Draft(source, item_id, image_ref, {**fields, "options": tuple(fields["options"])}))
    found = []
    for source, item_id, field, message, reason, severity in value["problems"]:
        if reason not in REASONS or severity not in ("error", "warning"):
            raise ValueError("malformed problem")
        found.append(Problem(source, item_id, field, message, reason, severity))
    return drafts, found


def entry_slot(source: str, default_dataset: str) -> Slot | None:
    """The entry of the release file named `source` (None when caching is off)."""
    from medrcube.cube.derived_cache import Slot

    # One entry per file name (rewritten when the file changes, so that editing a cube
    # does not leave an entry per version); the bytes' digest is in the value.
    parts = {"source": source, "default_dataset": default_dataset,
             "limits": [sys.get_int_max_str_digits(), sys.getrecursionlimit()], "code": _code()}
    return Slot.open(KIND, parts)


def checked_records(data: bytes, *, source: str, default_dataset: str, col: Collector,
                    parse: Callable[[Collector], list[Draft] | None]) -> list[Draft] | None:
    """The drafts of one release file whose bytes are `data`: remembered, or `parse(private)`
    (which reports to a private collector, and returns None for a file that is not a list
    of records: not remembered). Its problems are reported to `col` either way."""
    digest = hashlib.sha256(data).hexdigest()
    slot = entry_slot(source, default_dataset)
    hit = None if slot is None else slot.read(lambda v: _decode(v, digest))
    if hit is not None:
        drafts, found = hit[0]
    else:
        private = Collector()
        got = parse(private)
        if got is None:
            _report(private.problems, col)
            return None
        drafts, found = got, list(private.problems)
        if slot is not None:
            try:
                slot.write({"file": digest, **_encode((drafts, found))})
            except (TypeError, ValueError):  # a value JSON cannot write (none known): not remembered
                pass
    _report(found, col)
    return drafts


def _report(found: list[Problem], col: Collector) -> None:
    for p in found:  # in order: under strict=True the first error raises, as the parse did
        (col.error if p.severity == "error" else col.warn)(p.source, p.item_id, p.field, p.message, p.reason)
