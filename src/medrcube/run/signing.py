"""The site's signing key and the two digests the evidence is bound by.

A key held by the hospital, in the environment variable `MEDRCUBE_SIGNING_KEY` (never
written anywhere, never logged), turns every digest into an HMAC-SHA256: nobody without
the key can produce one that verifies, so an edited stored answer or run directory is
found even when the editor recomputed every plain checksum. Without a key the digest is
a plain SHA-256 of the same bytes and is marked "unsigned": it finds accidental damage
and naive edits only, since anyone can recompute it (docs/guarantees.md, the seal).

Both the response store (run/store) and the run directory's seal (rundir/seal.py) sign
through here, so that the two cannot disagree on what "signed" means.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any

KEY_ENV = "MEDRCUBE_SIGNING_KEY"
HMAC = "hmac-sha256"  # signed with the site key
PLAIN = "sha256"  # unsigned: a plain digest anyone can recompute


def signing_key() -> bytes | None:
    """The site key from the environment, or None when it is unset or empty."""
    value = os.environ.get(KEY_ENV, "")
    return value.encode("utf-8") if value else None


def canonical(value: Any) -> bytes:
    """The bytes a digest is taken over: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def digest(payload: bytes, key: bytes | None) -> str:
    """HMAC-SHA256 of `payload` under `key`, or its plain SHA-256 without one (hex)."""
    if key is None:
        return hashlib.sha256(payload).hexdigest()
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def method(key: bytes | None) -> str:
    return PLAIN if key is None else HMAC


def matches(payload: bytes, expected: str, key: bytes | None) -> bool:
    """Whether `expected` is the digest of `payload` under `key` (constant-time compare)."""
    return hmac.compare_digest(digest(payload, key), expected)
