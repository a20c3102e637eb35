"""rundir/jsontext.py: the run directory's indented documents, as json.dumps would lay them out,
every value read back the same, NaN and infinities as null."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from medrcube.rundir.jsontext import compact_sorted, indented

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_no_floats = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=30,
)
_finite = st.floats(allow_nan=False, allow_infinity=False)
_with_floats = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _text | _finite,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=30,
)


@given(_no_floats)
def test_the_layout_is_json_dumps_own(doc: object) -> None:
    assert indented(doc) == json.dumps(doc, indent=2, ensure_ascii=False)


@given(_with_floats)
def test_every_value_reads_back_the_same(doc: object) -> None:
    assert json.loads(indented(doc)) == json.loads(json.dumps(doc))


def test_nan_and_infinities_are_null_keys_as_json_writes_them_and_big_integers_kept() -> None:
    doc = {"nan": math.nan, "inf": math.inf, "ninf": -math.inf, 2: "two", None: "none", True: "yes"}
    assert json.loads(indented(doc)) == {"nan": None, "inf": None, "ninf": None, "2": "two", "null": "none",
                                         "true": "yes"}
    assert "NaN" not in indented(doc) and "Infinity" not in indented(doc)
    big = {"n": 2**70, "s": "r\u00e9sum\u00e9"}  # beyond orjson's 64 bits: the standard library's text
    assert indented(big) == json.dumps(big, indent=2, ensure_ascii=False)


def test_default_turns_other_values_into_text() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    assert json.loads(indented({"x": Opaque()}, default=str)) == {"x": "opaque"}
    assert indented({"p": 1.839028516776933e-08}) == '{\n  "p": 1.839028516776933e-8\n}'


@given(_with_floats)
def test_a_payload_on_one_line_with_sorted_keys_reads_back_the_same(doc: object) -> None:
    text = compact_sorted(doc)
    assert "\n" not in text
    assert json.loads(text) == json.loads(json.dumps(doc, sort_keys=True))
    if isinstance(doc, dict):
        assert list(json.loads(text)) == sorted(str(k) for k in doc)
