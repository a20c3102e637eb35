"""The response store's claims: who is asking a key right now, and whether that owner
is still alive.

Two processes that want the same key at once send one request: the loser waits for the
winner's response and takes the claim over once the winner's expiry has passed, or at
once when the winner is a dead process of this host (`owner_is_dead`: gone, or a zombie
not yet reaped).
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from medrcube.models.base import Response
from medrcube.run.store.opening import StoreTamperedError, _chunks
from medrcube.run.store.responses import _RESPONSE_COLS, AskedBy, StoreResponses


def new_owner() -> str:
    """A claim owner id unique to this run: host, process, random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_is_dead(owner: str) -> bool:
    """True if `owner` (from `new_owner`) is a process of this host that no longer exists,
    or has died and not yet been reaped by its parent (a zombie; read from /proc where
    there is one, else a zombie counts as alive and only the expiry frees its claims).

    Lets a resumed run take over the claims of the run it replaces (killed with SIGKILL)
    at once instead of waiting for their expiry. Owners on other hosts, or whose process
    is alive, are never judged dead here: for them only the expiry counts.
    """
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # exists, owned by another user: alive unless a zombie
        pass
    # kill(pid, 0) succeeds on a zombie: a SIGKILLed xdist worker stays one until execnet
    # reaps it, and its claims would otherwise wait for their expiry.
    return _process_state(pid) == "Z"


def _process_state(pid: int) -> str | None:
    """The one-letter state of process `pid` from /proc/<pid>/stat ("R", "S", "Z"...), or
    None where it cannot be read (no /proc: macOS, Windows; or the process is gone).

    The command name (field 2) is in parentheses and may itself hold spaces and ")", so
    the state is the first field after the *last* ")"."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 1 :].split()
    return fields[0].decode("ascii", "replace") if fields else None


class StoreClaims(StoreResponses):
    """Claims on keys (see the module docstring)."""

    # -- claims -----------------------------------------------------------------------

    def claim(
        self, key: str, owner: str, ttl_s: float, *, newer_than: float | None = None, run: str | None = None
    ) -> bool:
        """Try to become the one process that asks `key`. True if `owner` now holds the
        claim (it had none, held it already, or the previous owner's expiry passed).
        False if someone else holds a live claim, or a response is already stored (read
        it with `get`): checked in the same transaction, so a response stored between
        the caller's lookup and this claim is never requested twice."""
        return key in self.claim_many([key], owner, ttl_s, newer_than=newer_than, run=run)

    def claim_many(
        self, keys: Sequence[str], owner: str, ttl_s: float, *, newer_than: float | None = None,
        run: str | None = None,
    ) -> set[str]:
        """`claim` for several keys in one transaction; returns the keys won. `run` as in
        `get_many`: only that run's answers count as answered. A tampered answer raises
        StoreTamperedError (responses.py)."""
        tampered: list[str] = []
        with self._write() as conn:
            won = self._claim_in(conn, keys, owner, ttl_s, newer_than, run, tampered)
        if tampered:
            raise StoreTamperedError(self.path, tampered, self._tamper_reason())
        return won

    def put_and_claim_many(
        self, items: Sequence[tuple[str, Response]], keys: Sequence[str], owner: str, ttl_s: float, *,
        model: str = "", asked_by: AskedBy | None = None, newer_than: float | None = None, run: str | None = None,
    ) -> set[str]:
        """`put_many(items)` and `claim_many(keys)` in one transaction (the answers that came
        back and the keys their workers ask next: one commit where there were two); returns
        the keys won, and raises as either would, after the commit."""
        tampered: list[str] = []
        with self._write() as conn:
            self._put_in(conn, items, model, owner, asked_by)
            won = self._claim_in(conn, keys, owner, ttl_s, newer_than, run, tampered)
        if tampered:
            raise StoreTamperedError(self.path, tampered, self._tamper_reason())
        return won

    def _claim_in(self, conn: sqlite3.Connection, keys: Sequence[str], owner: str, ttl_s: float,
                  newer_than: float | None, run: str | None, tampered: list[str]) -> set[str]:
        """`claim_many`'s reads and writes, inside the caller's transaction."""
        now = time.time()
        cutoff = -1.0 if newer_than is None else newer_than
        won: set[str] = set()
        for key in dict.fromkeys(keys):
            row = conn.execute(
                f"SELECT {_RESPONSE_COLS} FROM responses WHERE key = ? AND created >= ? AND (? IS NULL OR run = ?)",
                (key, cutoff, run, run),
            ).fetchone()
            if row is not None and self._verified(row, tampered) is not None:
                continue  # answered: the caller reads it with get
            # Missing, damaged or not to be trusted here: claim it, so that it is asked again.
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

