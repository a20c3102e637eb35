"""The run directory's indented JSON documents encoded by orjson: one encoding for every writer.

gate.json, run.json, metrics_summary.json, the seal and a gate case's "check and verdict"
attachment are written indented, for people to read. The standard library encodes an
indented document with its pure-Python encoder (its C encoder serves no indent): 13.5 ms for
a paper-scale gate.json against 0.74 ms with orjson's `OPT_INDENT_2`, and about 0.2 ms a gate
case's attachment, all after the last answer (docs/speed.md). orjson makes the same text as
`json.dumps(doc, indent=2, ensure_ascii=False)` (keys in their order, two spaces, ": " and
",", non-ASCII characters as they are, the shortest float that reads back the same) with
two differences, both kept: a float's small exponent is written without a padding zero
(`1.8e-8`, where the standard library writes `1.8e-08`: the same number read back), and a
NaN or an infinity is written as `null`, as strict JSON requires (the standard library
writes `NaN` and `Infinity`, which a browser's JSON.parse and jq refuse).

Keys that are not strings are written as the standard library writes them (`OPT_NON_STR_KEYS`);
a value orjson does not take (an integer beyond 64 bits) is encoded by the standard library.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def indented(doc: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """`doc` as indented JSON text (the module doc says how it compares with `json.dumps`).
    `default` turns a value JSON has no type for into one it has (as json.dumps's)."""
    try:
        return orjson.dumps(doc, default=default, option=_OPTIONS).decode("utf-8")
    except orjson.JSONEncodeError:  # beyond orjson's types or ranges: the standard library's text
        return json.dumps(doc, indent=2, ensure_ascii=False, default=default)


def compact_sorted(doc: Any) -> str:
    """`doc` as one line of JSON with its keys sorted: a gate case's payload as its report carries
    it to the controller (plugin/summary.py, which reads it with `json.loads`: orjson's reader
    would read an integer beyond 64 bits as a float). orjson's separators are "," and ":"
    (json.dumps's ", " and ": "); the values read back the same."""
    try:
        return orjson.dumps(doc, option=_SORTED).decode("utf-8")
    except orjson.JSONEncodeError:
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
