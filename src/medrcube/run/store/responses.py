"""The response store's answers: keys, rows with their checksums, lookups and writes.

A row carries a CRC-32 of what grading reads (key, text, refused flag, usage, and the
truncated flag and the confidence when set): a row whose bytes no longer match it reads as missing and is
asked again, never graded (package docstring).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from medrcube.models.base import Response
from medrcube.models.confidence import OptionConfidence
from medrcube.run.store.opening import StoreBase, _chunks, _Undecodable

log = logging.getLogger("medrcube.run.store")


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


def _checksum(
    key: str, text: str | None, refused: int, usage: str | None, truncated: int = 0, confidence: str | None = None
) -> int:
    """CRC-32 over what grading reads from a row. SQLite's own checks (quick_check) see
    the file's structure, not the bytes of a value: a flipped byte inside a stored answer
    ("B" -> "C") would pass them and be graded. This catches it."""
    fields: list[Any] = [key, text, int(refused), usage]
    # Each only when set: rows written before the flag or the column existed keep their checksum.
    if truncated:
        fields.append(1)
    if confidence is not None:
        fields.append(confidence)
    payload = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return zlib.crc32(payload.encode("utf-8"))


_RESPONSE_COLS = "key, text, refused, usage, latency_s, attempts, checksum, truncated, served_model, confidence"


def _row_to_response(row: Sequence[Any]) -> Response | None:
    """The Response of a row of _RESPONSE_COLS, or None if it is damaged: its checksum
    does not match, or one of its texts was not valid UTF-8 on disk."""
    key, text, refused, usage, latency_s, attempts, checksum, truncated, served_model, confidence = row
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
        and type(truncated) is int
        and isinstance(served_model, str | None)
    ):
        return None
    # Replacement characters change the text, so the checksum alone nearly always
    # refuses an undecodable row; the marker makes it certain.
    if any(isinstance(v, _Undecodable) for v in (key, text, usage, confidence)):
        return None
    if _checksum(key, text, refused, usage, truncated, confidence) != checksum:
        return None
    return Response(
        text=text,
        refused=bool(refused),
        truncated=bool(truncated),
        served_model=served_model if served_model and not isinstance(served_model, _Undecodable) else None,
        usage=json.loads(usage) if usage else None,
        latency_s=float(latency_s),
        attempts=int(attempts),
        confidence=OptionConfidence.from_json(json.loads(confidence)) if confidence else None,
    )


class StoreResponses(StoreBase):
    """Stored answers and recorded errors (see the module docstring)."""

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
                    "attempts, created, checksum, truncated, served_model, confidence) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            _checksum(key, r.text, refused, usage, int(r.truncated), confidence),
            int(r.truncated),
            r.served_model,
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

    @staticmethod
    def _release_in(conn: sqlite3.Connection, keys: Sequence[str], owner: str | None) -> None:
        if owner is None:
            return
        conn.executemany("DELETE FROM claims WHERE key = ? AND owner = ?", [(k, owner) for k in keys])
