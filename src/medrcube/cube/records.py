"""One release record (a `test.json` entry or a dataset row) -> a checked Draft of an Item.

The release schema: id, dataset, image_path, question, option_A..option_D (2 or more,
contiguous from A), gt_answer (the option text), correct_index (a letter or a 0-based
int), task, modality, parts, original_task, restricted. Other keys go into the item's
`meta` (a `meta` object key is merged on top). The image is resolved by the loader, which
knows where bytes live (a directory or a dataset column); everything else is checked here,
and every finding names the field and says what was expected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from medrcube import taxonomy
from medrcube.cube.item import LETTERS
from medrcube.cube.problems import Collector

OPTION_KEY = re.compile(r"^option_([A-Z])$")
SCHEMA_KEYS: frozenset[str] = frozenset(
    {
        "id", "dataset", "image_path", "question", "gt_answer", "correct_index",
        "task", "modality", "parts", "original_task", "restricted", "meta",
    }
)  # fmt: skip
_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0", ""}


@dataclass(slots=True)
class Draft:
    """An item whose fields passed every check; the loader resolves `image_ref` to a key."""

    source: str
    id: str
    image_ref: str | None
    fields: dict[str, Any]  # Item keyword arguments except `image`

    @property
    def restricted(self) -> bool:
        return bool(self.fields["restricted"])


class RecordFields:
    """Field access for one record that reports each bad field once."""

    def __init__(self, rec: Mapping[str, Any], source: str, where: str, col: Collector):
        self.rec, self.source, self.where, self.col = rec, source, where, col
        self.item_id: str | None = None
        self.ok = True

    def error(self, field: str | None, message: str, reason: str) -> None:
        self.ok = False
        self.col.error(self.source, self.item_id, field, message, reason)

    def warn(self, field: str | None, message: str, reason: str) -> None:
        self.col.warn(self.source, self.item_id, field, message, reason)

    def text(self, key: str, *, required: bool, default: str = "") -> str | None:
        """A string field; numbers are accepted as their decimal text (an option "2")."""
        value = self.rec.get(key)
        # A required field must say something; an optional one is "absent" only when it
        # is None or "" (any other text is kept as written, so records round-trip).
        if value is None or value == "" or (required and isinstance(value, str) and not value.strip()):
            if required:
                found = "is missing" if key not in self.rec else f"is empty ({value!r})"
                self.error(key, f"{key} {found}; expected a non-empty string", "missing_field")
                return None
            return default
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.error(key, f"{key} is {type(value).__name__} {short_json(value)}; expected a string", "invalid_type")
            return None
        return value if isinstance(value, str) else str(value)


def _lone_surrogate(value: Any) -> str | None:
    """The first lone UTF-16 surrogate in the strings of `value` (a JSON value), or None.

    A JSON escape such as \\ud800 decodes to a lone surrogate: a Python string that no
    UTF-8 encode accepts, so the cube's fingerprint, image paths and every file written
    later would fail on it with a traceback. One serialisation finds it in nested values.
    """
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return text[exc.start]
    return None


# What a lone surrogate can be decoded from in a JSON text read as bytes: a \\u escape of
# D800-DFFF (hex digits in either case), or the UTF-8 form of one, ED A0..BF, which
# json.loads lets through (it decodes bytes with 'surrogatepass').
_SURROGATE_SOURCE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def text_may_hold_surrogates(data: bytes) -> bool:
    """False only when no string json.loads(data) returns can hold a lone surrogate: the
    text is UTF-8 (json.detect_encoding) and holds neither source of one. Then
    `refuse_non_utf8` would find nothing in any of its records, and is not needed (one
    scan of the file instead of a serialisation per record). A surrogate pair, or a
    backslash before "ud8", answers True: the records are then checked one by one."""
    if json.detect_encoding(data) not in ("utf-8", "utf-8-sig"):
        return True
    if b"\\u" not in data and b"\xed" not in data:  # a byte search, several times the regex's speed
        return False
    return _SURROGATE_SOURCE.search(data) is not None


def refuse_non_utf8(rec: Mapping[str, Any], *, source: str, where: str, col: Collector) -> bool:
    """Report each field of `rec` (key or value) holding a lone surrogate; True when none does.

    A record with one is skipped whole: its other checks would quote the bad text in
    messages that cannot be printed or written either. Names and values in the messages
    carry the surrogate as its escape, so the message itself encodes."""
    found = [(k, c) for k, v in rec.items() if (c := _lone_surrogate(k) or _lone_surrogate(v)) is not None]
    if not found:
        return True
    raw_id = rec.get("id")
    clean_id = isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) and raw_id != "" and _lone_surrogate(raw_id) is None
    item_id = str(raw_id) if clean_id else None
    for key, char in found:
        field = _escaped(str(key))
        subject = f"{where} id '{_escaped(str(raw_id))}'" if key == "id" else field
        col.error(
            source, item_id, field,
            f"{subject} holds a lone UTF-16 surrogate (\\u{ord(char):04x}), which is not valid Unicode text; "
            "expected UTF-8 text (correct or remove that \\u escape in the file)",
            "invalid_value",
        )  # fmt: skip
    return False


def _escaped(text: str) -> str:
    """`text` with any lone surrogate written as its backslash escape (encodable, printable)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def short_json(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_index(value: Any) -> int | None:
    """correct_index as a 0-based int: a letter ("B"), an int (1) or a digit string ("1")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        v = value.strip()
        if len(v) == 1 and v.upper() in LETTERS:
            return LETTERS.index(v.upper())
        if v.isdigit():
            return int(v)
    return None


def parse_bool(value: Any) -> bool | None:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().casefold() in _TRUE | _FALSE:
        return value.strip().casefold() in _TRUE
    return None


def parse_release_record(
    rec: Any,
    *,
    source: str,
    where: str,
    default_dataset: str,
    col: Collector,
    extra_keys: frozenset[str] = frozenset(),
    from_table: bool = False,
    no_surrogates: bool = False,
) -> Draft | None:
    """Check one release record; return a Draft, or None after reporting its errors.

    `where` locates the record for messages when it has no usable id ("record #12").
    `extra_keys` are loader-owned keys that must not land in meta (the HF `image` column).
    `from_table` is set for dataset rows: a table has every column in every row, so a
    None in an extra column means "absent", and `meta` may be a JSON-encoded string.
    `no_surrogates` is set when the record comes from a text that cannot hold a lone
    surrogate (`text_may_hold_surrogates` said so): the per-record search is skipped.
    """
    if not isinstance(rec, Mapping):
        col.error(source, None, None, f"{where} is {type(rec).__name__} {short_json(rec)}; expected a JSON object", "not_an_object")
        return None
    if not no_surrogates and not refuse_non_utf8(rec, source=source, where=where, col=col):
        return None
    r = RecordFields(rec, source, where, col)

    raw_id = rec.get("id")
    if raw_id is None or raw_id == "":
        r.error("id", f"{where} has no id; expected a unique non-empty string", "missing_field")
    elif isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
        r.error("id", f"{where} has id {short_json(raw_id)}; expected a string", "invalid_type")
    else:
        r.item_id = str(raw_id)

    question = r.text("question", required=True)
    dataset = r.text("dataset", required=False, default=default_dataset)
    options = _options(r)
    answer = _answer(r, options)
    task = axis_field(r, "task", taxonomy.canonical_task, taxonomy.TASK_NAMES, "unknown_task")
    modality = axis_field(r, "modality", taxonomy.canonical_modality, taxonomy.MODALITIES, "unknown_modality")
    part = axis_field(r, "parts", taxonomy.canonical_part, taxonomy.KNOWN_PARTS, "unknown_part")
    original_task = r.text("original_task", required=False)

    restricted = parse_bool(rec.get("restricted"))
    if restricted is None:
        r.error("restricted", f"restricted is {short_json(rec.get('restricted'))}; expected true or false", "invalid_value")

    image_ref = rec.get("image_path")
    if image_ref is not None and not isinstance(image_ref, str):
        r.error("image_path", f"image_path is {type(image_ref).__name__} {short_json(image_ref)}; expected a relative path string", "invalid_type")
        image_ref = None
    image_ref = image_ref or None  # "" means "no image", as None does

    meta = _meta(r, rec, extra_keys, from_table)
    if not r.ok or r.item_id is None:
        return None
    fields = dict(
        id=r.item_id, dataset=dataset, question=question, options=tuple(options or ()), answer=answer,
        task=task, modality=modality, part=part, original_task=original_task, restricted=restricted, meta=meta,
    )  # fmt: skip
    return Draft(source, r.item_id, image_ref, fields)


def _options(r: RecordFields) -> list[str] | None:
    present: dict[str, str] = {}
    for key in sorted(k for k in r.rec if isinstance(k, str) and OPTION_KEY.match(k)):
        value = r.rec[key]
        # A table (or a hand-written file) carries option_D: None/"" for a 3-option item.
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        text = r.text(key, required=True)
        if text is None:
            return None
        present[key[-1]] = text
    letters = sorted(present)
    for i, letter in enumerate(letters):
        if letter != LETTERS[i]:
            missing = LETTERS[i]
            r.error(
                f"option_{missing}",
                f"option_{letter} is present but option_{missing} is missing; "
                f"options must be contiguous from option_A (found {', '.join('option_' + x for x in letters)})",
                "option_gap",
            )
            return None
    if len(letters) < 2:
        found = ", ".join("option_" + x for x in letters) or "none"
        r.error("option_" + LETTERS[len(letters)], f"{len(letters)} option(s) ({found}); expected at least option_A and option_B", "too_few_options")
        return None
    options = [present[x] for x in letters]
    seen: dict[str, str] = {}
    for letter, text in zip(letters, options, strict=True):
        if text in seen:
            r.warn(f"option_{letter}", f"option_{letter} repeats option_{seen[text]} ({text!r}); expected distinct options", "duplicate_options")
        seen.setdefault(text, letter)
    return options


def _answer(r: RecordFields, options: list[str] | None) -> int | None:
    gt = r.text("gt_answer", required=True)
    raw_index = r.rec.get("correct_index")
    index = None if raw_index is None else parse_index(raw_index)
    if raw_index is not None and index is None:
        r.error("correct_index", f"correct_index is {short_json(raw_index)}; expected a letter (A, B, ...) or a 0-based integer", "invalid_value")
        return None
    if options is None or gt is None:
        return None
    if index is not None and not 0 <= index < len(options):
        r.error(
            "correct_index",
            f"correct_index {short_json(raw_index)} is outside the {len(options)} options; expected A..{LETTERS[len(options) - 1]} or 0..{len(options) - 1}",
            "invalid_value",
        )
        return None
    matches = [i for i, o in enumerate(options) if o == gt]
    listing = "; ".join(f"{LETTERS[i]}={o!r}" for i, o in enumerate(options))
    if not matches:
        hint = taxonomy.did_you_mean(gt, options)
        if index is not None:
            hint += f" (correct_index points to option_{LETTERS[index]} {options[index]!r})"
        r.error("gt_answer", f"gt_answer {gt!r} matches no option ({listing}); expected the exact text of one option{hint}", "gt_answer_no_match")
        return None
    if len(matches) > 1:
        which = ", ".join("option_" + LETTERS[i] for i in matches)
        r.error("gt_answer", f"gt_answer {gt!r} matches several options ({which}); expected exactly one", "gt_answer_ambiguous")
        return None
    answer = matches[0]
    if index is not None and index != answer:
        r.error(
            "correct_index",
            f"correct_index {short_json(raw_index)} points to option_{LETTERS[index]} {options[index]!r} but gt_answer {gt!r} "
            f"is option_{LETTERS[answer]}; expected {LETTERS[answer]!r} (or {answer})",
            "correct_index_mismatch",
        )
        return None
    return answer


def axis_field(r: RecordFields, key: str, canon: Callable[[str], taxonomy.Canonical], known: tuple[str, ...], reason: str) -> str | None:
    value = r.rec.get(key)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]  # ["Chest"]: a one-element list names one part
    elif isinstance(value, list):
        r.error(key, f"{key} is a list of {len(value)} values {short_json(value)}; expected one value (an item sits in one cell)", "invalid_value")
        return None
    if value is None or (isinstance(value, str) and not value.strip()):
        r.error(key, f"{key} is {'missing' if key not in r.rec else 'empty'}; expected one of {', '.join(known)} (or a site-specific name)", "missing_field")
        return None
    if not isinstance(value, str):
        r.error(key, f"{key} is {type(value).__name__} {short_json(value)}; expected a string", "invalid_type")
        return None
    c = canon(value)
    if not c.known:
        r.warn(key, f"{key} {value!r} is not in the taxonomy (kept as {c.value!r}); known: {', '.join(known)}{taxonomy.did_you_mean(value, known)}", reason)
    return c.value


def _meta(r: RecordFields, rec: Mapping[str, Any], extra_keys: frozenset[str], from_table: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for key, value in rec.items():
        if key in SCHEMA_KEYS or key in extra_keys or (isinstance(key, str) and OPTION_KEY.match(key)):
            continue
        if from_table and value is None:
            continue
        meta[str(key)] = value
    inner = rec.get("meta")
    if from_table and isinstance(inner, str):
        try:
            inner = json.loads(inner) if inner.strip() else None
        except (ValueError, RecursionError) as exc:  # RecursionError: nested beyond the parser's limit
            r.error("meta", f"meta column holds invalid JSON ({exc}); expected a JSON object", "invalid_value")
            return meta
        if (char := _lone_surrogate(inner)) is not None:  # a \\ud800 escape inside the JSON text
            r.error("meta", f"meta column holds a lone UTF-16 surrogate (\\u{ord(char):04x}); expected UTF-8 text", "invalid_value")
            return meta
    if inner is not None and not isinstance(inner, Mapping):
        r.error("meta", f"meta is {type(inner).__name__} {short_json(inner)}; expected an object", "invalid_type")
        return meta
    meta.update(inner or {})
    try:
        json.dumps(meta)
    except (TypeError, ValueError) as exc:
        r.error("meta", f"metadata is not JSON-serialisable ({exc}); expected strings, numbers, lists and objects", "invalid_type")
    return meta
