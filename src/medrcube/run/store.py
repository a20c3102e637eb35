"""The response store: every model response a run received, kept in SQLite so that a rerun
asks the model nothing and a killed run resumes.

One file, `<directory>/responses.sqlite3`, in WAL mode. Three tables:

- `responses`: the final response per key (text, refused flag, usage, latency). Only
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
  (key, text, refused flag, usage). A row whose bytes no longer match it, including
  text damaged into invalid UTF-8, reads as missing and is asked again (the new
  response overwrites it), never graded; the file stays in use, since every other row
  is still good and moving it aside would re-ask them all.

Concurrency: one SQLite connection per thread (and per process), write transactions
taken with BEGIN IMMEDIATE so that a writer waits (busy_timeout) instead of failing
on a lock upgrade, and kept short.

Secrets: the store is given keys, texts and numbers, never a request's headers; nothing
here can hold an API key.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from medrcube.models.base import ErrorKind, Response
from medrcube.models.confidence import OptionConfidence

log = logging.getLogger(__name__)

DEFAULT_DIRECTORY = ".medrcube"
DB_NAME = "responses.sqlite3"
# 2: responses.confidence (per-option probabilities, issue 16), added in place to a v1 file.
SCHEMA_VERSION = 2
# Keys per SQL statement in bulk lookups: well under SQLite's bound-parameter limit.
_CHUNK = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key        TEXT PRIMARY KEY,
    model      TEXT NOT NULL DEFAULT '',
    text       TEXT,
    refused    INTEGER NOT NULL DEFAULT 0,
    usage      TEXT,
    latency_s  REAL NOT NULL DEFAULT 0,
    attempts   INTEGER NOT NULL DEFAULT 1,
    created    REAL NOT NULL,
    checksum   INTEGER NOT NULL,
    confidence TEXT
);
CREATE TABLE IF NOT EXISTS errors (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    key        TEXT NOT NULL,
    model      TEXT NOT NULL DEFAULT '',
    kind       TEXT,
    message    TEXT,
    latency_s  REAL NOT NULL DEFAULT 0,
    attempts   INTEGER NOT NULL DEFAULT 1,
    created    REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS errors_key ON errors(key);
CREATE TABLE IF NOT EXISTS claims (
    key        TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    expires    REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS claims_owner ON claims(owner);
"""


class StoreError(RuntimeError):
    """The response store cannot be used (unwritable directory, newer schema, corruption)."""


class StoreCorruptError(StoreError):
    """The database file is damaged. At open it is moved aside automatically; during a run
    this is raised so that nothing is read from, or written to, a damaged file."""


def make_key(
    fingerprint: str,
    prompt: str,
    image_digests: Sequence[str] = (),
    params: Mapping[str, Any] | None = None,
    variant: str = "standard",
    rotation: int = 0,
    item_id: str | None = None,
) -> str:
    """The store key of one request: sha256 over the canonical JSON of everything that
    changes the answer (model fingerprint, prompt, images, generation parameters) plus
    the variant instance, so that two variants never share a response by accident.
    `item_id` is part of the key only for adapters that answer per item (`keyed_by_item`)."""
    payload: dict[str, Any] = {
        "model": fingerprint,
        "prompt": prompt,
        "images": list(image_digests),
        "params": dict(params or {}),
        "variant": variant,
        "rotation": int(rotation),
    }
    if item_id is not None:
        payload["item"] = item_id
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredError:
    """One failed attempt, as recorded for reports."""

    key: str
    model: str
    kind: str | None
    message: str | None
    latency_s: float
    attempts: int
    created: float


class _Undecodable(str):
    """A stored text that was not valid UTF-8, decoded with replacement characters.

    Text on disk is always written as valid UTF-8, so invalid bytes are damage. SQLite's
    default decoding raises on them for the whole query, which would stop every run at
    the same row; this marker lets the row be read and refused as damaged instead."""


def _decode_text(raw: bytes) -> str:
    """The text_factory of every connection: strict UTF-8, or an `_Undecodable` marker."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return _Undecodable(raw.decode("utf-8", "replace"))


def _is_corruption(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and (
        "file is not a database" in msg or "malformed" in msg or "disk image" in msg
    )


def _chunks(seq: Sequence[str], n: int = _CHUNK) -> Iterator[Sequence[str]]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def _checksum(key: str, text: str | None, refused: int, usage: str | None, confidence: str | None = None) -> int:
    """CRC-32 over what grading reads from a row. SQLite's own checks (quick_check) see
    the file's structure, not the bytes of a value: a flipped byte inside a stored answer
    ("B" -> "C") would pass them and be graded. This catches it. The confidence is part
    of it only when set, so that rows written before it existed keep their checksums."""
    fields: list[Any] = [key, text, int(refused), usage] + ([confidence] if confidence is not None else [])
    payload = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return zlib.crc32(payload.encode("utf-8"))


_RESPONSE_COLS = "key, text, refused, usage, latency_s, attempts, checksum, confidence"


def _row_to_response(row: Sequence[Any]) -> Response | None:
    """The Response of a row of _RESPONSE_COLS, or None if it is damaged: its checksum
    does not match, or one of its texts was not valid UTF-8 on disk."""
    key, text, refused, usage, latency_s, attempts, checksum, confidence = row
    # A damaged record header can change a value's type (a text read back as a blob or a
    # number): a damaged row, not a crash in the checksum or the conversions below.
    if not (
        isinstance(key, str)
        and isinstance(text, str | None)
        and isinstance(usage, str | None)
        and isinstance(confidence, str | None)
        and type(refused) is int
        and type(attempts) is int
        and type(checksum) is int
        and isinstance(latency_s, int | float)
    ):
        return None
    # Replacement characters change the text, so the checksum alone nearly always
    # refuses an undecodable row; the marker makes it certain.
    if any(isinstance(v, _Undecodable) for v in (key, text, usage, confidence)):
        return None
    if _checksum(key, text, refused, usage, confidence) != checksum:
        return None
    return Response(
        text=text,
        refused=bool(refused),
        usage=json.loads(usage) if usage else None,
        latency_s=float(latency_s),
        attempts=int(attempts),
        confidence=OptionConfidence.from_json(json.loads(confidence)) if confidence else None,
    )


class ResponseStore:
    """Persistent responses keyed by `make_key(...)`. Safe to share between threads and
    between processes pointing at the same directory.

    `recovered` is the path a corrupted database file was moved to when this store
    opened (None normally): callers print it so that the user knows.
    """

    def __init__(self, directory: str | os.PathLike[str] = DEFAULT_DIRECTORY, *, busy_timeout_s: float = 60.0):
        self.directory = Path(directory)
        self.path = self.directory / DB_NAME
        self.busy_timeout_s = busy_timeout_s
        self.recovered: Path | None = None
        self.damaged: set[str] = set()  # keys whose stored row failed its checksum
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the response store directory {self.directory}: {exc}; "
                "pass a writable directory with --response-store"
            ) from exc
        self._open_checked()

    # -- opening, checking, recovering ------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: we issue BEGIN IMMEDIATE / COMMIT ourselves, so that every
        # write transaction takes the write lock up front and waits for it (busy_timeout)
        # rather than failing on a read-to-write upgrade.
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        # Invalid UTF-8 in a stored text is damage to one row, not a reason to fail
        # every query that touches it (_decode_text, _row_to_response).
        conn.text_factory = _decode_text
        return conn

    def _open_checked(self) -> None:
        """Open the database, verify it, and move it aside if it is damaged.

        Done under an exclusive file lock so that two processes opening a damaged store
        at once do not both move files (the second would move the first's fresh file)."""
        with self._file_lock():
            conn = self._connect()
            try:
                self._check(conn)
            except sqlite3.DatabaseError as exc:
                if not _is_corruption(exc):
                    conn.close()
                    raise StoreError(f"cannot open the response store {self.path}: {exc}") from exc
                # Move the files while the connection is still open: closing it first
                # would let SQLite checkpoint or delete the WAL we keep as evidence.
                self.recovered = self._move_aside(str(exc))
                conn.close()
                conn = self._connect()
                self._check(conn)
            self._register(conn)

    def _check(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode: a commit survives a process crash (SIGKILL); only a power
        # cut may lose the last transactions. FULL would fsync every response.
        conn.execute("PRAGMA synchronous = NORMAL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the response store {self.path} has schema version {version}, newer than this "
                f"medrcube understands ({SCHEMA_VERSION}); upgrade medrcube or use another --response-store"
            )
        # integrity_check, not quick_check: it also verifies every index against its
        # table, so damage inside the key index is found here (module docstring).
        result = conn.execute("PRAGMA integrity_check").fetchall()
        if result != [("ok",)]:
            detail = "; ".join(str(r[0]) for r in result[:3])
            raise sqlite3.DatabaseError(f"database disk image is malformed (integrity_check: {detail})")
        if version < SCHEMA_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                columns = {row[1] for row in conn.execute("PRAGMA table_info(responses)")}
                if "confidence" not in columns:  # a version 1 file: its rows stay valid
                    conn.execute("ALTER TABLE responses ADD COLUMN confidence TEXT")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _move_aside(self, reason: str) -> Path:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        target = self.path.with_name(f"{DB_NAME}.corrupt-{stamp}")
        os.replace(self.path, target)
        # The WAL and shared-memory files belong to the damaged database: a WAL left next
        # to a fresh file would be replayed into it.
        for suffix in ("-wal", "-shm"):
            side = Path(str(self.path) + suffix)
            if side.exists():
                os.replace(side, Path(str(target) + suffix))
        log.warning(
            "the response store %s was damaged (%s); it was moved aside to %s and a fresh store "
            "was started: responses stored there will be requested again",
            self.path,
            reason,
            target,
        )
        return target

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        try:
            import fcntl
        except ImportError:  # not POSIX: no cross-process guard for the rare recovery race
            yield
            return
        with open(self.directory / "responses.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _register(self, conn: sqlite3.Connection) -> None:
        self._local.conn = conn
        self._local.pid = os.getpid()
        with self._conns_lock:
            self._conns.append(conn)

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"the response store {self.path} is closed")
        pid = os.getpid()
        if pid != self._pid:
            # A forked child must not use its parent's connections (SQLite forbids it).
            self._pid = pid
            self._local = threading.local()
            with self._conns_lock:
                self._conns = []
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA synchronous = NORMAL")
            self._register(conn)
        return conn

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc) from exc

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        try:
            yield self._conn()
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: sqlite3.DatabaseError) -> StoreError:
        if _is_corruption(exc):
            return StoreCorruptError(
                f"the response store {self.path} is damaged ({exc}); stop this run and start it "
                "again: the damaged file is then moved aside and a fresh store is started"
            )
        return StoreError(f"response store {self.path}: {exc}")

    # -- responses --------------------------------------------------------------------

    def get(self, key: str, *, newer_than: float | None = None) -> Response | None:
        """The stored response for `key`, or None. `newer_than` (a UNIX time) ignores
        responses stored before it: how `--refresh` re-asks while still sharing the
        responses that concurrent processes store during the same run."""
        return self.get_many([key], newer_than=newer_than).get(key)

    def get_many(self, keys: Iterable[str], *, newer_than: float | None = None) -> dict[str, Response]:
        """Bulk lookup: {key: response} for the keys that have a stored response."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, Response] = {}
        cutoff = -1.0 if newer_than is None else newer_than
        with self._read() as conn:
            for chunk in _chunks(keys):
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT {_RESPONSE_COLS} FROM responses WHERE key IN ({marks}) AND created >= ?",
                    (*chunk, cutoff),
                )
                for row in rows:
                    response = _row_to_response(row)
                    if response is None:
                        self._report_damaged(row[0])
                    else:
                        found[row[0]] = response
        return found

    def _report_damaged(self, key: str) -> None:
        # A damaged row is never trusted: it reads as missing, so the key is asked again
        # and the new response overwrites it.
        if key not in self.damaged:
            self.damaged.add(key)
            log.warning(
                "the response store %s holds a damaged response (key %s...: checksum mismatch or "
                "invalid UTF-8); "
                "it is ignored and will be requested again",
                self.path,
                key[:16],
            )

    def put(self, key: str, response: Response, *, model: str = "", owner: str | None = None) -> None:
        """Store a response (overwriting any earlier one) or, if it is an error, record the
        failed attempt. Either way the claim on `key` is released. Committed on return."""
        self.put_many([(key, response)], model=model, owner=owner)

    def put_many(
        self, items: Sequence[tuple[str, Response]], *, model: str = "", owner: str | None = None
    ) -> None:
        """`put` for several responses in one transaction (a batch from one `generate`)."""
        if not items:
            return
        now = time.time()
        ok = [(k, r) for k, r in items if r.ok]
        failed = [(k, r) for k, r in items if not r.ok]
        with self._write() as conn:
            if ok:
                conn.executemany(
                    "INSERT OR REPLACE INTO responses (key, model, text, refused, usage, latency_s, "
                    "attempts, created, checksum, confidence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [self._response_row(k, r, model, now) for k, r in ok],
                )
            if failed:
                conn.executemany(
                    "INSERT INTO errors (key, model, kind, message, latency_s, attempts, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            k,
                            model,
                            str(r.error_kind) if r.error_kind is not None else None,
                            r.error,
                            float(r.latency_s),
                            int(r.attempts),
                            now,
                        )
                        for k, r in failed
                    ],
                )
            self._release_in(conn, [k for k, _ in items], owner)

    @staticmethod
    def _response_row(key: str, r: Response, model: str, now: float) -> tuple[Any, ...]:
        usage = json.dumps(dict(r.usage), sort_keys=True) if r.usage else None
        refused = int(r.refused)
        confidence = json.dumps(r.confidence.to_json(), sort_keys=True) if r.confidence is not None else None
        return (
            key,
            model,
            r.text,
            refused,
            usage,
            float(r.latency_s),
            int(r.attempts),
            now,
            _checksum(key, r.text, refused, usage, confidence),
            confidence,
        )

    def record_error(self, key: str, response: Response, *, model: str = "", owner: str | None = None) -> None:
        """Record a failed attempt (never a final response). Same as `put` of an error."""
        if response.ok:
            raise ValueError("record_error needs a Response with `error` set")
        self.put_many([(key, response)], model=model, owner=owner)

    def errors(self, keys: Iterable[str] | None = None, *, limit: int = 1000) -> list[StoredError]:
        """Recorded failed attempts, newest first (for the given keys, or all)."""
        cols = "key, model, kind, message, latency_s, attempts, created"
        out: list[StoredError] = []
        with self._read() as conn:
            if keys is None:
                rows = conn.execute(f"SELECT {cols} FROM errors ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
            else:
                rows = []
                for chunk in _chunks(list(dict.fromkeys(keys))):
                    marks = ",".join("?" * len(chunk))
                    rows += conn.execute(
                        f"SELECT {cols} FROM errors WHERE key IN ({marks}) ORDER BY id DESC", tuple(chunk)
                    ).fetchall()
                rows = sorted(rows, key=lambda r: -r[6])[:limit]
            for r in rows:
                out.append(StoredError(*r))
        return out

    def stats(self) -> dict[str, int]:
        """Row counts: responses, errors, live claims."""
        now = time.time()
        with self._read() as conn:
            return {
                "responses": conn.execute("SELECT count(*) FROM responses").fetchone()[0],
                "errors": conn.execute("SELECT count(*) FROM errors").fetchone()[0],
                "claims": conn.execute("SELECT count(*) FROM claims WHERE expires >= ?", (now,)).fetchone()[0],
            }

    # -- claims -----------------------------------------------------------------------

    def claim(self, key: str, owner: str, ttl_s: float, *, newer_than: float | None = None) -> bool:
        """Try to become the one process that asks `key`. True if `owner` now holds the
        claim (it had none, held it already, or the previous owner's expiry passed).
        False if someone else holds a live claim, or a response is already stored (read
        it with `get`): checked in the same transaction, so a response stored between
        the caller's lookup and this claim is never requested twice."""
        return key in self.claim_many([key], owner, ttl_s, newer_than=newer_than)

    def claim_many(
        self, keys: Sequence[str], owner: str, ttl_s: float, *, newer_than: float | None = None
    ) -> set[str]:
        """`claim` for several keys in one transaction; returns the keys won."""
        now = time.time()
        cutoff = -1.0 if newer_than is None else newer_than
        won: set[str] = set()
        with self._write() as conn:
            for key in dict.fromkeys(keys):
                row = conn.execute(
                    f"SELECT {_RESPONSE_COLS} FROM responses WHERE key = ? AND created >= ?", (key, cutoff)
                ).fetchone()
                if row is not None:
                    if _row_to_response(row) is not None:
                        continue  # answered: the caller reads it with get
                    self._report_damaged(key)  # damaged: claim it, so that it is asked again
                cur = conn.execute(
                    "INSERT INTO claims (key, owner, expires) VALUES (?, ?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET owner = excluded.owner, expires = excluded.expires "
                    "WHERE claims.owner = excluded.owner OR claims.expires < ?",
                    (key, owner, now + ttl_s, now),
                )
                if cur.rowcount == 1:
                    won.add(key)
        return won

    def unclaimed(self, keys: Sequence[str]) -> list[str]:
        """The keys that nobody holds a live claim on (free, or the owner's expiry passed)."""
        now = time.time()
        live: set[str] = set()
        with self._read() as conn:
            for chunk in _chunks(list(keys)):
                marks = ",".join("?" * len(chunk))
                live.update(
                    k
                    for (k,) in conn.execute(
                        f"SELECT key FROM claims WHERE key IN ({marks}) AND expires >= ?", (*chunk, now)
                    )
                )
        return [k for k in keys if k not in live]

    def claim_owners(self, keys: Sequence[str]) -> dict[str, str]:
        """{key: owner} of the live claims on `keys`."""
        now = time.time()
        out: dict[str, str] = {}
        with self._read() as conn:
            for chunk in _chunks(list(keys)):
                marks = ",".join("?" * len(chunk))
                out.update(
                    conn.execute(
                        f"SELECT key, owner FROM claims WHERE key IN ({marks}) AND expires >= ?", (*chunk, now)
                    ).fetchall()
                )
        return out

    def renew(self, owner: str, ttl_s: float) -> int:
        """Extend every claim `owner` holds (a heartbeat for slow requests); returns how many."""
        with self._write() as conn:
            return conn.execute(
                "UPDATE claims SET expires = ? WHERE owner = ?", (time.time() + ttl_s, owner)
            ).rowcount

    def release(self, key: str, owner: str) -> None:
        """Give up a claim without storing anything (the next process may ask)."""
        self.release_many([key], owner)

    def release_many(self, keys: Sequence[str], owner: str) -> None:
        with self._write() as conn:
            self._release_in(conn, keys, owner)

    def release_all(self, owner: str) -> None:
        """Give up every claim `owner` holds (end of a run, or after an interruption)."""
        with self._write() as conn:
            conn.execute("DELETE FROM claims WHERE owner = ?", (owner,))

    @staticmethod
    def _release_in(conn: sqlite3.Connection, keys: Sequence[str], owner: str | None) -> None:
        if owner is None:
            return
        conn.executemany("DELETE FROM claims WHERE key = ? AND owner = ?", [(k, owner) for k in keys])

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection this store opened (in this process)."""
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()
        self._closed = True

    def __enter__(self) -> ResponseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResponseStore({str(self.directory)!r})"


def error_kind_of(value: str | None) -> ErrorKind | None:
    """The ErrorKind recorded in the errors table, back as an enum (None if unknown)."""
    if value is None:
        return None
    try:
        return ErrorKind(value)
    except ValueError:
        return None
