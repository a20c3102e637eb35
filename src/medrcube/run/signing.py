"""The site's signing key, this user's secret, and the digests the evidence is bound by.

A key held by the hospital, in the environment variable `MEDRCUBE_SIGNING_KEY` (never
written anywhere, never logged), turns every digest into an HMAC-SHA256: nobody without
the key can produce one that verifies, so an edited stored answer or run directory is
found even when the editor recomputed every plain checksum. Without a key the digest is
a plain SHA-256 of the same bytes and is marked "unsigned": it finds accidental damage
and naive edits only, since anyone can recompute it (docs/guarantees.md, the seal).

Stored answers and the ledger of attempts are authenticated by default (`default_signer`):
under the site key when it is set, else under this user's secret (32 random bytes in the
user's cache directory, created 0600 on first use: the start-up cache's, cube/derived_cache.py),
so that a store edited by hand or brought from another account or machine never verifies.
Only where no secret can be kept (an unwritable home) is the digest plain.

Both the response store (run/store) and the run directory's seal (rundir/seal.py) sign
through here, so that the two cannot disagree on what "signed" means.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
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


# Who signed an answer or a ledger entry (the store's `signed` column holds their codes).
SITE = "site key"  # MEDRCUBE_SIGNING_KEY
USER = "user secret"  # this user's secret in the medrcube cache directory
NONE = "plain digest"  # no key: anyone can recompute it
CODES = {NONE: 0, SITE: 1, USER: 2}
BY_CODE = {code: who for who, code in CODES.items()}


@dataclass(frozen=True)
class Signer:
    """A key and whose it is; `key` None for a plain digest."""

    who: str  # SITE, USER or NONE
    key: bytes | None

    @property
    def code(self) -> int:
        return CODES[self.who]

    @property
    def method(self) -> str:
        return method(self.key)

    @property
    def key_id(self) -> str | None:
        """A short public name of the key (never the key): the first 12 hex digits of an HMAC
        of a fixed text under it, so that two records can say they were signed by one key."""
        return None if self.key is None else digest(b"medrcube key id", self.key)[:12]

    def describe(self) -> str:
        return self.who if self.key_id is None else f"{self.who} {self.key_id}"


def user_secret() -> bytes | None:
    """This user's secret (cube/derived_cache.py's secret.key), or None where none can be kept."""
    from medrcube.cube.derived_cache import user_secret as secret

    return secret()


def default_signer() -> Signer:
    """The site key when MEDRCUBE_SIGNING_KEY is set, else this user's secret, else a plain digest."""
    site = signing_key()
    if site is not None:
        return Signer(SITE, site)
    user = user_secret()
    return Signer(USER, user) if user is not None else Signer(NONE, None)


def checker_for(who: str) -> Signer | None:
    """The key that checks a record signed by `who` here, or None when this machine does
    not hold it (a site key not set here; no user secret)."""
    if who == NONE:
        return Signer(NONE, None)
    key = signing_key() if who == SITE else user_secret() if who == USER else None
    return Signer(who, key) if key is not None else None
