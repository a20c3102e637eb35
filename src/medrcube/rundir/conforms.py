"""A fast, one-sided check of a JSON document against a JSON Schema (draft 2020-12).

`conforms(doc, schema)` is True only when every keyword of the schema that applies is
one it knows and the document satisfies it; anything else is False, which means "ask
jsonschema", never "invalid". So True implies that jsonschema accepts the document, and
rundir/documents.validate keeps jsonschema for every refusal and its wording.

The known keywords are the ones the shipped schemas use (type, enum, const, required,
properties, additionalProperties, items, minimum, maximum, pattern, if/then) and the
annotations ($schema, $id, title, description, default, $comment); a schema that uses
another keyword anywhere it is reached (oneOf, $ref, ...) is left to jsonschema whole.
tests/rundir/test_rundir_conforms.py holds it to jsonschema's answers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "default", "$comment", "examples"})
KNOWN = frozenset({"type", "enum", "const", "required", "properties", "additionalProperties", "items", "minimum",
                   "maximum", "pattern", "if", "then"}) | ANNOTATIONS


class _Unknown(Exception):
    """A keyword this check does not implement: jsonschema decides."""


def conforms(doc: Any, schema: Any) -> bool:
    try:
        return _ok(doc, schema)
    except _Unknown:
        return False


def _is_type(value: Any, kind: str) -> bool:
    # JSON's types as jsonschema's draft 2020-12 checker reads Python values: an object is
    # a dict and an array a list (a tuple is neither), a bool is no number, an integral
    # float is an integer.
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if kind == "number":
        return isinstance(value, int | float)
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    raise _Unknown(kind)


def _equal(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1 (Python's True == 1 is), 1 is 1.0.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    plain = (int, float, str, type(None))
    return type(a) in plain and type(b) in plain and bool(a == b)


@cache
def _pattern(text: str) -> re.Pattern[str]:
    if not text.isascii():  # ECMA-262 and Python regexes part ways beyond ASCII classes
        raise _Unknown(text)
    return re.compile(text)


def _ok(value: Any, schema: Any) -> bool:
    if schema is True:
        return True
    if not isinstance(schema, Mapping) or schema is False:
        return False
    if not KNOWN.issuperset(schema):
        raise _Unknown(sorted(set(schema) - KNOWN))
    if "type" in schema:
        kinds = schema["type"]
        if not any(_is_type(value, k) for k in ([kinds] if isinstance(kinds, str) else kinds)):
            return False
    if "enum" in schema and not any(_equal(value, e) for e in schema["enum"]):
        return False
    if "const" in schema and not _equal(value, schema["const"]):
        return False
    if isinstance(value, dict):
        if any(k not in value for k in schema.get("required", ())):
            return False
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                if not _ok(item, props[key]):
                    return False
            elif "additionalProperties" in schema and not _ok(item, schema["additionalProperties"]):
                return False
    elif isinstance(value, list):
        if "items" in schema and not all(_ok(v, schema["items"]) for v in value):
            return False
    elif isinstance(value, int | float) and not isinstance(value, bool):  # an IntEnum too, as jsonschema
        if "minimum" in schema and value < schema["minimum"]:
            return False
        if "maximum" in schema and value > schema["maximum"]:
            return False
    elif isinstance(value, str) and "pattern" in schema and not _pattern(schema["pattern"]).search(value):
        return False
    # if/then: `then` applies when `if` holds; an unknown keyword inside either is jsonschema's.
    return not ("if" in schema and "then" in schema and _ok(value, schema["if"]) and not _ok(value, schema["then"]))
