"""The response store: every model response a run received, kept in SQLite so that a rerun
asks the model nothing and a killed run resumes.

One file, `<directory>/responses.sqlite3`, in WAL mode. Three tables:

- `responses`: the final response per key (text, refused and truncated flags, usage,
  latency, the model the endpoint says served it, per-option confidence). Only
  successful responses are final; an error is never stored here, so a rerun retries it.
- `errors`: every failed attempt (kind, message), for reports.
- `claims`: who is asking a key right now, with an expiry. Two processes that want the
  same key at once send one request: the loser waits for the winner's response and
  takes the claim over only once the winner's expiry has passed (a killed process).

Durability guarantee: `put` commits before it returns (WAL, synchronous=NORMAL: a
committed transaction survives the death of the process; only a power loss can undo the
last few). A SIGKILL therefore loses exactly the responses that were in flight (sent,
not yet committed); every stored response is kept and never requested again.

Damage, two kinds:
- the file's structure (pages, b-trees, the key index): a database file SQLite cannot
  read, or whose `integrity_check` fails at open, is moved aside to
  `responses.sqlite3.corrupt-<UTC time>` (with its WAL) and a fresh store is started,
  with a warning. `integrity_check` rather than `quick_check`: only it compares each
  index with its table, and a damaged key index otherwise goes unnoticed (the lookup
  misses the row, which is asked again silently while the damaged file stays in use).
  Its cost is small: ~6 ms for a store of 10,000 responses (5 MB), against ~3 ms for
  quick_check (~115 ms against ~30 ms at 100,000), once per store opened.
- a value inside a sound file: each response row carries a CRC-32 of what grading reads
  (key, text, refused flag, usage; the truncated flag and confidence when set). A row whose bytes no longer match it, including
  text damaged into invalid UTF-8, reads as missing and is asked again (the new
  response overwrites it), never graded; the file stays in use, since every other row
  is still good and moving it aside would re-ask them all.

Concurrency: one SQLite connection per thread (and per process), write transactions
taken with BEGIN IMMEDIATE so that a writer waits (busy_timeout) instead of failing
on a lock upgrade, and kept short.

Provenance: each answer also records the endpoint that answered, the model it
said served it, the time and the run that asked, bound by a digest (HMAC-SHA256 under
MEDRCUBE_SIGNING_KEY, else a plain SHA-256 marked unsigned; responses.py). An answer
whose checksum holds but whose digest does not was edited: StoreTamperedError, never
graded. `get_many(..., run=TOKEN)` keeps only one run's answers (`--fresh`).

Secrets: the store is given keys, texts and numbers, never a request's headers; nothing
here can hold an API key.
"""

from __future__ import annotations

from medrcube.run.store.claims import StoreClaims, new_owner, owner_is_dead
from medrcube.run.store.opening import (
    DB_NAME,
    DEFAULT_DIRECTORY,
    SCHEMA_VERSION,
    StoreCorruptError,
    StoreError,
    StoreTamperedError,
)
from medrcube.run.store.responses import AskedBy, Provenance, Stored, StoredError, make_key

__all__ = [
    "DB_NAME", "DEFAULT_DIRECTORY", "SCHEMA_VERSION", "AskedBy", "Provenance", "ResponseStore", "Stored",
    "StoreCorruptError", "StoreError", "StoreTamperedError", "StoredError", "make_key", "new_owner", "owner_is_dead",
]


class ResponseStore(StoreClaims):
    """Persistent responses keyed by `make_key(...)`. Safe to share between threads and
    between processes pointing at the same directory.

    `recovered` is the path a corrupted database file was moved to when this store
    opened (None normally): callers print it so that the user knows.
    """

    def __enter__(self) -> ResponseStore:
        return self
