"""JSON Lines cubes: one `Item.to_dict()` record per line, images relative to the file.

This is the canonical, lossless format: `write_jsonl(cube.items, path)` followed by
`load_cube(path)` gives back equal items (with the images beside the file, as they were
beside the original cube root), hence the same fingerprint.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from medrcube import taxonomy
from medrcube.cube.assemble import build_items, drop_duplicate_ids, finish
from medrcube.cube.dirimages import DirImages
from medrcube.cube.images import DEFAULT_MAX_PIXELS
from medrcube.cube.item import LETTERS, Cube, CubeError, Item
from medrcube.cube.problems import Collector
from medrcube.cube.records import Draft, RecordFields, axis_field, parse_bool, refuse_non_utf8, short_json
from medrcube.cube.release import image_outcome, json_limit

# `attributes` is read from meta by cube/attributes.py (load_cube), like a release record's.
CANONICAL_KEYS: frozenset[str] = frozenset(Item.__dataclass_fields__) - {"attributes"}


def write_jsonl(items: Iterable[Item], path: str | os.PathLike[str]) -> None:
    """Write items as JSON Lines (UTF-8, one record per line, keys in schema order)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for item in items:
            f.write(json.dumps(item.to_dict(), ensure_ascii=False) + "\n")


def parse_canonical_record(rec: Any, *, source: str, where: str, col: Collector) -> Draft | None:
    """Check one canonical record; a key outside the schema is kept in `meta`."""
    if not isinstance(rec, Mapping):
        col.error(source, None, None, f"{where} is {type(rec).__name__} {short_json(rec)}; expected a JSON object", "not_an_object")
        return None
    if not refuse_non_utf8(rec, source=source, where=where, col=col):
        return None
    r = RecordFields(rec, source, where, col)
    raw_id = rec.get("id")
    if not isinstance(raw_id, str) or not raw_id:
        found = "missing" if "id" not in rec else short_json(raw_id)
        r.error("id", f"{where} has id {found}; expected a unique non-empty string", "missing_field" if not raw_id else "invalid_type")
    else:
        r.item_id = raw_id
    dataset = r.text("dataset", required=True)
    question = r.text("question", required=True)
    options = rec.get("options")
    if not isinstance(options, list) or not all(isinstance(o, str) and o.strip() for o in options):
        r.error("options", f"options is {short_json(options)}; expected a list of non-empty strings", "invalid_type" if "options" in rec else "missing_field")
        options = None
    elif len(options) < 2:
        r.error("options", f"{len(options)} option(s); expected at least 2", "too_few_options")
        options = None
    elif len(options) > len(LETTERS):  # a prompt letters its options A..Z
        r.error("options", f"{len(options)} options; expected at most {len(LETTERS)} (a prompt letters them A..Z)", "invalid_value")
        options = None
    answer = rec.get("answer")
    if isinstance(answer, bool) or not isinstance(answer, int):
        r.error("answer", f"answer is {short_json(answer)}; expected the 0-based index of the correct option", "invalid_type" if "answer" in rec else "missing_field")
        answer = None
    elif options is not None and not 0 <= answer < len(options):
        r.error("answer", f"answer {answer} is outside the {len(options)} options; expected 0..{len(options) - 1}", "invalid_value")
    if options is not None:
        first: dict[str, int] = {}  # text -> index of its first occurrence
        for i, o in enumerate(options):
            if o in first:
                r.warn("options", f"option {i} repeats option {first[o]} ({o!r}); expected distinct options", "duplicate_options")
            first.setdefault(o, i)
    task = axis_field(r, "task", taxonomy.canonical_task, taxonomy.TASK_NAMES, "unknown_task")
    modality = axis_field(r, "modality", taxonomy.canonical_modality, taxonomy.MODALITIES, "unknown_modality")
    part = axis_field(r, "part", taxonomy.canonical_part, taxonomy.KNOWN_PARTS, "unknown_part")
    original_task = r.text("original_task", required=False)
    restricted = rec.get("restricted", False)
    if not isinstance(restricted, bool):
        restricted = parse_bool(restricted)
        if restricted is None:
            r.error("restricted", f"restricted is {short_json(rec.get('restricted'))}; expected true or false", "invalid_value")
    image = rec.get("image")
    if image is not None and not isinstance(image, str):
        r.error("image", f"image is {short_json(image)}; expected a path relative to the JSON Lines file, or null", "invalid_type")
    meta_in = rec.get("meta", {})
    if not isinstance(meta_in, Mapping):
        r.error("meta", f"meta is {short_json(meta_in)}; expected an object", "invalid_type")
        meta_in = {}
    meta = {k: v for k, v in rec.items() if k not in CANONICAL_KEYS}
    meta.update(meta_in)
    if not r.ok or r.item_id is None:
        return None
    fields = dict(
        id=r.item_id, dataset=dataset, question=question, options=tuple(options or ()), answer=answer,
        task=task, modality=modality, part=part, original_task=original_task, restricted=restricted, meta=meta,
    )  # fmt: skip
    return Draft(source, r.item_id, image or None, fields)


def load_jsonl(path: str | os.PathLike[str], *, strict: bool = False, max_pixels: int = DEFAULT_MAX_PIXELS) -> Cube:
    """Load a JSON Lines cube; its images are resolved relative to the file's folder."""
    shown = os.fspath(path)
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError as exc:
        raise CubeError(f"{shown}: cannot read ({exc.strerror or exc}); expected a JSON Lines file") from exc
    root = os.path.dirname(os.path.abspath(path))
    col = Collector(strict=strict)
    images = DirImages(root, max_pixels=max_pixels)
    drafts: list[Draft] = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as exc:
            col.error(shown, None, None, f"malformed JSON at line {n} column {exc.colno}: {exc.msg}; expected one JSON object per line", "malformed_json")
            continue
        except UnicodeDecodeError as exc:
            col.error(shown, None, None, f"line {n} is not UTF-8 (byte {exc.start}: {exc.reason}); expected UTF-8 JSON Lines", "malformed_json")
            continue
        except (RecursionError, ValueError) as exc:  # beyond the parser's limits
            col.error(shown, None, None, f"malformed JSON at line {n}: {json_limit(exc)}; expected one JSON object per line", "malformed_json")
            continue
        d = parse_canonical_record(rec, source=shown, where=f"line {n}", col=col)
        if d is not None:
            drafts.append(d)
    drafts = drop_duplicate_ids(drafts, col)
    resolved = [None if d.image_ref is None else images.resolve(images.root, d.image_ref) for d in drafts]
    checks = images.check_all(r.key for r in resolved if r is not None and r.key is not None)
    outcomes = [image_outcome(d.image_ref, r, checks, field="image") for d, r in zip(drafts, resolved, strict=True)]
    items = build_items(drafts, outcomes, col)
    digests = {k: c.check.digest for k, c in checks.items() if c.check is not None and c.check.reason is None}
    return finish(items, col, source=shown, reader=images.reader, digests=digests, root=images.root)
