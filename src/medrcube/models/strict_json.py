"""JSON read strictly: a duplicate key is an error, never a choice.

`json.loads` keeps the last of two equal keys, so a body `{"content": "A", "content":
"B"}` would be graded as B without a word. An endpoint that sends one is broken (or an
adversary): its answer is MALFORMED, naming the key.
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
