"""JSON read strictly: a duplicate key is an error, never a choice.

`json.loads` keeps the last of two equal keys, so a body `{"content": "A", "content":
"B"}` would be graded as B without a word. An endpoint that sends one is broken (or an
adversary): its answer is MALFORMED, naming the key.

A model's endpoint is read with `loads_wire`, which also refuses NaN and the infinities:
Python's reader takes them, JSON (RFC 8259) has no words for them, and a usage count or a
log-probability that is NaN would reach the costs and the confidence figures unseen.
"""

from __future__ import annotations

import json
from typing import Any


class VerbatimJSON(str):
    """A string that JSON writes as itself between quotes (no character to escape), by
    construction: a base64 data URL (models/images.py). The light client copies it into a
    request body instead of having the encoder scan it (models/light_http.py `json_body`)."""

    __slots__ = ()


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice."""


class NonStandardNumberError(ValueError):
    """A body carries NaN, Infinity or -Infinity, which are not JSON."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


def loads_strict(data: str | bytes) -> Any:
    """`json.loads`, refusing duplicate keys (DuplicateKeyError, a ValueError)."""
    return json.loads(data, object_pairs_hook=_no_duplicates)


def _no_constant(name: str) -> Any:
    raise NonStandardNumberError(f"{name} is not a JSON number (JSON has no NaN or infinities)")


def loads_wire(data: str | bytes) -> Any:
    """What an endpoint sent, read strictly: duplicate keys (DuplicateKeyError) and NaN or
    infinities (NonStandardNumberError) refused; both are ValueErrors."""
    return json.loads(data, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
