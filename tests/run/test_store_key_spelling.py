"""A store key is the same bytes however its canonical JSON is spelled: the field-by-field
spelling (run/store/responses.canonical_request) against json.dumps of the same payload,
so that every answer stored before it is still found."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from medrcube.run.store import make_key
from medrcube.run.store.responses import canonical_request

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)  # no lone surrogates: not UTF-8
PARAMS = st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.booleans(), st.integers(), TEXT,
                                                         st.floats(allow_nan=False, allow_infinity=False)), max_size=4)


def reference(fingerprint: Any, prompt: Any, digests: Any, params: Any, variant: Any, rotation: Any,
              item_id: Any) -> str:
    payload: dict[str, Any] = {"model": fingerprint, "prompt": prompt, "images": list(digests),
                               "params": dict(params or {}), "variant": variant, "rotation": int(rotation)}
    if item_id is not None:
        payload["item"] = item_id
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@settings(max_examples=300, deadline=None)
@given(TEXT, TEXT, st.lists(TEXT, max_size=3), st.one_of(st.none(), PARAMS), TEXT,
       st.integers(-5, 10**6), st.one_of(st.none(), TEXT))
def test_the_spelled_out_json_is_json_dumps_byte_for_byte(fingerprint: str, prompt: str, digests: list[str],
                                                          params: dict[str, Any] | None, variant: str,
                                                          rotation: int, item_id: str | None) -> None:
    expected = reference(fingerprint, prompt, digests, params, variant, rotation, item_id)
    assert canonical_request(fingerprint, prompt, digests, params, variant, rotation, item_id) == expected
    assert make_key(fingerprint, prompt, digests, params, variant, rotation, item_id=item_id) == \
        hashlib.sha256(expected.encode("utf-8")).hexdigest()


def test_fields_of_another_type_take_json_dumps_and_still_agree() -> None:
    # a tuple of digests, a bool rotation, a str subclass: the general path, the same bytes
    class Named(str):
        pass

    args = (Named("fp"), "prompt \u00e9\u2028\u0000", ("d1", "d2"), {"b": [1, 2], "a": {"z": None}}, "blind", True, None)
    assert canonical_request(*args) == reference(*args)


def test_a_known_key_is_unchanged() -> None:
    # pinned: a key the store wrote before this spelling must be found after it
    assert make_key("openai:gpt@http://x", "Q?\nA. a\nB. b", ["ab" * 32], {"temperature": 0}, "shuffled:1", 2) == \
        hashlib.sha256(b'{"images":["' + b"ab" * 32 + b'"],"model":"openai:gpt@http://x","params":{"temperature":0},'
                       b'"prompt":"Q?\\nA. a\\nB. b","rotation":2,"variant":"shuffled:1"}').hexdigest()
