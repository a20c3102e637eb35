"""The response store's file: opened, checked, recovered when damaged, migrated.

See the package docstring (run/store/__init__.py) for the file's layout, the damage it
detects and what happens then. This part owns the connections (one per thread and per
process) and the read and write transactions that responses.py and claims.py use.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from medrcube.run.signing import default_signer

log = logging.getLogger("medrcube.run.store")

DEFAULT_DIRECTORY = ".medrcube"
DB_NAME = "responses.sqlite3"
# 2: responses.served_model and responses.truncated; 3: responses.confidence (per-option
# probabilities); 4: provenance (endpoint, run, digest, signed). Older
# files gain the missing columns in place (_check); their rows have no digest and are asked again.
SCHEMA_VERSION = 4
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
    served_model TEXT,
    truncated  INTEGER NOT NULL DEFAULT 0,
    confidence TEXT,
    endpoint   TEXT,
    run        TEXT,
    digest     TEXT,
    signed     INTEGER NOT NULL DEFAULT 0
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
# Columns added after version 1, by name. An older file gains whichever it lacks: this
# covers a version-1 file, a version-2 one (served_model, truncated) and a pre-release
# version-2 one that had only `confidence`.
_ADDED_COLUMNS = (
    ("served_model", "served_model TEXT"),
    ("truncated", "truncated INTEGER NOT NULL DEFAULT 0"),
    ("confidence", "confidence TEXT"),
    ("endpoint", "endpoint TEXT"),
    ("run", "run TEXT"),
    ("digest", "digest TEXT"),
    ("signed", "signed INTEGER NOT NULL DEFAULT 0"),
)


class StoreError(RuntimeError):
    """The response store cannot be used (unwritable directory, newer schema, corruption)."""


class StoreTamperedError(StoreError):
    """Stored answers whose digest does not verify although their checksum does: edited
    by someone who recomputed the checksum, or signed with another key. Never graded;
    `keys` are the store keys (the runner names their items)."""

    def __init__(self, path: Path, keys: Sequence[str], why: str, items: Sequence[str] = ()) -> None:
        self.path, self.keys, self.why, self.items = path, tuple(keys), why, tuple(items)
        named = f" for item(s) {', '.join(self.items[:5])}" + (" ..." if len(self.items) > 5 else "") if items else ""
        super().__init__(
            f"the response store {path} holds {len(self.keys)} stored answer(s){named} whose digest does not verify "
            f"({why}); they are never graded. Fix: run with --fresh to ask every item live, or move {path} away "
            "(keep it as evidence) and run again"
        )


class StoreCorruptError(StoreError):
    """The database file is damaged. At open it is moved aside automatically; during a run
    this is raised so that nothing is read from, or written to, a damaged file."""


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


class StoreBase:
    """Opening, checking and recovering the database file; connections per thread and
    per process; the read and write transactions the other parts use."""

    def __init__(self, directory: str | os.PathLike[str] = DEFAULT_DIRECTORY, *, busy_timeout_s: float = 60.0):
        self.directory = Path(directory)
        self.path = self.directory / DB_NAME
        self.busy_timeout_s = busy_timeout_s
        self.recovered: Path | None = None
        self.damaged: set[str] = set()  # keys whose stored row failed its checksum
        self.untrusted: set[str] = set()  # keys whose row cannot be checked here (asked again)
        self.unsigned: set[str] = set()  # of them, rows bound by a plain digest only (never graded)
        # The site key (MEDRCUBE_SIGNING_KEY), else this user's secret, read once: answers are
        # signed and checked with it (run/signing.py).
        self.signer = default_signer()
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
        try:
            with self._file_lock():
                self._open_locked()
        except OSError as exc:  # the lock file: a read-only directory, no permission
            raise StoreError(
                f"the response store directory {self.directory} is not usable ({exc.strerror or exc}); pass a "
                "writable directory with --response-store"
            ) from exc

    def _open_locked(self) -> None:
        if self.path.exists() and not self.path.is_file():
            raise StoreError(
                f"the response store {self.path} is not a file (a directory or a special file is in its place); "
                "move it away or pass another directory with --response-store"
            )
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the response store {self.path}: {exc}; pass a writable directory "
                             "with --response-store") from exc
        try:
            self._check(conn)
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                conn.close()
                hint = ("the file or its directory is read-only: make them writable or pass another directory "
                        "with --response-store") if "readonly" in str(exc) else "pass another --response-store"
                raise StoreError(f"cannot open the response store {self.path}: {exc}; {hint}") from exc
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
                # An older file: its rows stay valid (their checksums do not change).
                columns = {row[1] for row in conn.execute("PRAGMA table_info(responses)")}
                for name, column in _ADDED_COLUMNS:
                    if name not in columns:
                        conn.execute(f"ALTER TABLE responses ADD COLUMN {column}")
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

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResponseStore({str(self.directory)!r})"


