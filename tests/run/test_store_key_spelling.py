"""A store key is pinned: the bytes it hashes are the canonical JSON of its fields, so that
every answer stored before a change to how keys are computed is still found."""

from __future__ import annotations

import hashlib

from medrcube.run.store import make_key


def test_a_known_key_is_unchanged() -> None:
    assert make_key("openai:gpt@http://x", "Q?\nA. a\nB. b", ["ab" * 32], {"temperature": 0}, "shuffled:1", 2) == \
        hashlib.sha256(b'{"images":["' + b"ab" * 32 + b'"],"model":"openai:gpt@http://x","params":{"temperature":0},'
                       b'"prompt":"Q?\\nA. a\\nB. b","rotation":2,"variant":"shuffled:1"}').hexdigest()
    assert make_key("fp", "\u00e9", (), None, "blind", 0, item_id="i1") == hashlib.sha256(
        '{"images":[],"item":"i1","model":"fp","params":{},"prompt":"\u00e9","rotation":0,"variant":"blind"}'
        .encode("utf-8")).hexdigest()
