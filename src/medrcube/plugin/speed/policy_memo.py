"""The policy file's parse remembered across runs (docs/speed.md).

Reading thresholds.yaml is PyYAML's pure-Python composer with the strict loader
(yamlconf.py): about 12 ms of CPU for the shipped policy, before the gate's first
request, on every run of an unchanged file. The parsed document is a function of the
file's bytes, the reader's code, PyYAML's version and the interpreter's limits alone, so
it is kept in the user's authenticated cache (cube/derived_cache.py) under their digest,
as JSON text (its keys in the file's order: a policy's profiles are listed so), and only
when it is plain JSON whose round trip gives it back exactly (no date, no key other than
text, no NaN). What is remembered is the parse, never the validation:
`policy_from_dict` checks the document on every run. A file changed while it was read is
not remembered; with the cache off, or a file that cannot be read, the file is read as
before (`load_policy`, whose errors name it).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from medrcube.gate.policy import Policy


def remembered_policy(path: str | os.PathLike[str], profile: str | None = None) -> Policy:
    """`load_policy(path, profile)`, its document parsed once per file content."""
    from medrcube.gate.thresholds import load_policy, policy_from_dict, read_policy_doc

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return load_policy(path, profile)
    slot = _slot(data)
    hit = None if slot is None else slot.read(_document)
    if hit is not None:
        return policy_from_dict(hit[0], profile, source=str(path))
    doc = read_policy_doc(path)
    if slot is not None and _exact_json(doc) and _unchanged(path, data):
        slot.write(json.dumps(doc, allow_nan=False))  # as text: the cache sorts an entry's keys, the file's order counts
    return policy_from_dict(doc, profile, source=str(path))


def _slot(data: bytes) -> Any:
    import importlib.util

    from medrcube.cube.derived_cache import Slot, source_digest

    # The reader's source and PyYAML's (its __init__ names its version), found without
    # importing either: a hit does not load PyYAML at all.
    reader, pyyaml = importlib.util.find_spec("medrcube.yamlconf"), importlib.util.find_spec("yaml")
    sources = [spec.origin for spec in (reader, pyyaml) if spec is not None and spec.origin]
    return Slot.open("policy-document", {
        "text": hashlib.sha256(data).hexdigest(), "reader": source_digest(sources), "found": len(sources),
        "limits": [sys.get_int_max_str_digits(), sys.getrecursionlimit()]})


def _document(value: Any) -> Any:
    doc = json.loads(value) if isinstance(value, str) else None
    if not isinstance(doc, dict):
        raise ValueError("not a policy document")  # an entry of another shape is absent
    return doc


def _exact_json(doc: Any) -> bool:
    try:
        again = json.loads(json.dumps(doc, allow_nan=False))
    except (TypeError, ValueError):
        return False
    return _same(doc, again)


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1 == 1.0 == True in Python)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)  # the keys in the same order
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _unchanged(path: str | os.PathLike[str], data: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read() == data
    except OSError:
        return False
