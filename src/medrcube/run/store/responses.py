"""The response store's answers: keys, rows with their checksums, lookups and writes.

A row carries a CRC-32 of what grading reads (key, text, refused flag, usage, and the
truncated flag and the confidence when set): a row whose bytes no longer match it reads as missing and is
asked again, never graded (package docstring).

And its provenance: the endpoint that answered, the model it said served it,
when, and the run that asked, bound with the answer by a digest (run/signing.py):
HMAC-SHA256 under the site key when MEDRCUBE_SIGNING_KEY is set, else a plain SHA-256
marked unsigned. A CRC-32 is damage detection, not a seal: anyone who edits an answer can
recompute it. The CRC of such a row covers its provenance and digest too, so accidental
damage anywhere in it is damage (asked again); a row whose checksum holds but whose
digest does not is an edit (or another key), and is never graded: `StoreTamperedError`. A row that cannot be checked
here is not trusted either: it reads as missing and is asked again (no digest: written
before provenance; signed with the site key, with no key set now; signed with this user's
secret while the site key is set; bound by a plain digest only, which anyone can recompute:
written before answers were authenticated by default, or forged).

Authenticated by default (run/signing.default_signer): answers are signed under the site
key when MEDRCUBE_SIGNING_KEY is set, else under this user's secret; the `signed` column
holds who signed (0 plain digest, 1 site key, 2 user secret). A row counts only when it is
signed by the signer of this run and its digest verifies under that key.
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
from medrcube.run import signing
from medrcube.run.store.opening import StoreBase, StoreTamperedError, _chunks, _Undecodable

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
    key: str, text: str | None, refused: int, usage: str | None, truncated: int = 0, confidence: str | None = None,
    provenance: Sequence[Any] | None = None,
) -> int:
    """CRC-32 over what grading reads from a row. SQLite's own checks (quick_check) see
    the file's structure, not the bytes of a value: a flipped byte inside a stored answer
    ("B" -> "C") would pass them and be graded. This catches it. `provenance` (model,
    created, endpoint, run, digest, signed) is covered too, so that accidental damage
    anywhere in a row is damage (asked again), and a row whose CRC holds but whose digest
    does not was edited on purpose (responses.py docstring)."""
    fields: list[Any] = [key, text, int(refused), usage]
    # Each only when set: rows written before the flag or the column existed keep their checksum.
    if truncated:
        fields.append(1)
    if confidence is not None:
        fields.append(confidence)
    if provenance is not None:
        fields.append(list(provenance))
    payload = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return zlib.crc32(payload.encode("utf-8"))


_RESPONSE_COLS = (
    "key, text, refused, usage, latency_s, attempts, checksum, truncated, served_model, confidence, "
    "model, created, endpoint, run, digest, signed"
)


@dataclass(frozen=True, slots=True)
class AskedBy:
    """Who asks, for the provenance of the answers a run stores: its run token and the
    endpoint (a URL without credentials, or None for an in-process model)."""

    run: str
    endpoint: str | None = None


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a stored answer came from, as its row says and its digest binds."""

    run: str | None
    endpoint: str | None
    served_model: str | None
    created: float
    signer: str  # run/signing.SITE or USER: who signed the answer (plain ones are never read)

    @property
    def signed(self) -> bool:
        """Signed with the site key (MEDRCUBE_SIGNING_KEY)."""
        return self.signer == signing.SITE


@dataclass(frozen=True, slots=True)
class Stored:
    """A stored answer that verified, with its provenance."""

    response: Response
    provenance: Provenance


def _digest_payload(row: Sequence[Any]) -> bytes:
    """What a row's digest covers: the answer as grading reads it and its provenance."""
    key, text, refused, usage, _lat, _att, _crc, truncated, served_model, confidence, model, created, endpoint, run = (
        row[:14]
    )
    return signing.canonical([key, model, text, int(refused), usage, int(truncated), confidence, served_model,
                              endpoint, run, float(created)])


def _row_to_response(row: Sequence[Any]) -> Response | None:
    """The Response of a row of _RESPONSE_COLS, or None if it is damaged: its checksum
    does not match, or one of its texts was not valid UTF-8 on disk."""
    key, text, refused, usage, latency_s, attempts, checksum, truncated, served_model, confidence = row[:10]
    provenance = tuple(row[10:16]) if row[14] is not None else None  # rows with a digest (schema 4)
    if provenance is not None and any(isinstance(v, bytes | _Undecodable) for v in provenance):
        return None  # a damaged record header (a text read back as a blob) or damaged text
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
    if _checksum(key, text, refused, usage, truncated, confidence, provenance) != checksum:
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

    def get(self, key: str, *, newer_than: float | None = None, run: str | None = None) -> Response | None:
        """The stored response for `key`, or None. `newer_than` (a UNIX time) ignores
        responses stored before it: how `--refresh` re-asks while still sharing the
        responses that concurrent processes store during the same run. `run` keeps only
        the answers that run asked (`--fresh`)."""
        return self.get_many([key], newer_than=newer_than, run=run).get(key)

    def get_many(
        self, keys: Iterable[str], *, newer_than: float | None = None, run: str | None = None
    ) -> dict[str, Response]:
        """Bulk lookup: {key: response} for the keys that have a stored response."""
        return {k: s.response for k, s in self.get_stored(keys, newer_than=newer_than, run=run).items()}

    def get_stored(
        self, keys: Iterable[str], *, newer_than: float | None = None, run: str | None = None
    ) -> dict[str, Stored]:
        """`get_many` with each answer's provenance. Raises StoreTamperedError when an
        answer's digest does not verify (module docstring): it is never graded."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, Stored] = {}
        tampered: list[str] = []
        with self._read() as conn:
            for chunk in _chunks(keys):
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT {_RESPONSE_COLS} FROM responses WHERE key IN ({marks}) AND created >= ? "
                    "AND (? IS NULL OR run = ?)",
                    (*chunk, -1.0 if newer_than is None else newer_than, run, run),
                )
                for row in rows:
                    stored = self._verified(row, tampered)
                    if stored is not None:
                        found[row[0]] = stored
        if tampered:
            raise StoreTamperedError(self.path, tampered, self._tamper_reason())
        return found

    def _tamper_reason(self) -> str:
        if self.signer.who == signing.USER:
            return ("edited after it was stored, or signed with another user's secret: a store brought from another "
                    "account or machine")
        if self.signer.who == signing.SITE:
            return "edited after it was stored, or signed with another MEDRCUBE_SIGNING_KEY than the one set now"
        return "the answer or its provenance was edited after it was stored"

    def _verified(self, row: Sequence[Any], tampered: list[str]) -> Stored | None:
        """The answer of a row with its provenance, None when it is not to be trusted here
        (asked again), or the key appended to `tampered` (module docstring)."""
        response = _row_to_response(row)
        key = row[0]
        if response is None:
            self._report_damaged(key)
            return None
        model, created, endpoint, run, digest, signed = row[10:16]
        if not isinstance(digest, str) or type(signed) is not int or not isinstance(created, int | float):
            self._untrusted(key, "it has no provenance (stored before medrcube recorded it)")
            return None
        who = signing.BY_CODE.get(signed)
        if who is None or who == signing.NONE:
            self.unsigned.add(key)
            self._untrusted(key, "it is bound by a plain digest only, which anyone can recompute (stored before "
                            "medrcube authenticated stored answers by default, or edited by hand)")
            return None
        if who != self.signer.who:
            self._untrusted(key, f"it is signed with the {who}, and this run signs with the {self.signer.who}"
                            + (" (MEDRCUBE_SIGNING_KEY is not set)" if who == signing.SITE else ""))
            return None
        if not signing.matches(_digest_payload(row), digest, self.signer.key):
            tampered.append(key)
            return None
        return Stored(response, Provenance(run, endpoint, response.served_model, float(created), who))

    def _untrusted(self, key: str, why: str) -> None:
        if key not in self.untrusted:
            self.untrusted.add(key)
            log.warning("the response store %s holds an answer (key %s...) that cannot be checked here: %s; "
                        "it is asked again", self.path, key[:16], why)

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

    def put(
        self, key: str, response: Response, *, model: str = "", owner: str | None = None, asked_by: AskedBy | None = None
    ) -> None:
        """Store a response (overwriting any earlier one) or, if it is an error, record the
        failed attempt. Either way the claim on `key` is released. Committed on return.
        `asked_by` is the run and endpoint recorded as the answer's provenance."""
        self.put_many([(key, response)], model=model, owner=owner, asked_by=asked_by)

    def put_many(
        self, items: Sequence[tuple[str, Response]], *, model: str = "", owner: str | None = None,
        asked_by: AskedBy | None = None,
    ) -> None:
        """`put` for several responses in one transaction (a batch from one `generate`)."""
        if not items:
            return
        with self._write() as conn:
            self._put_in(conn, items, model, owner, asked_by)

    def _put_in(self, conn: sqlite3.Connection, items: Sequence[tuple[str, Response]], model: str,
                owner: str | None, asked_by: AskedBy | None) -> None:
        """`put_many`'s writes, inside the caller's transaction."""
        now = time.time()
        ok = [(k, r) for k, r in items if r.ok]
        failed = [(k, r) for k, r in items if not r.ok]
        if ok:
            conn.executemany(
                "INSERT OR REPLACE INTO responses (key, model, text, refused, usage, latency_s, "
                "attempts, created, checksum, truncated, served_model, confidence, endpoint, run, digest, "
                "signed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [self._response_row(k, r, model, now, asked_by) for k, r in ok],
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

    def _response_row(self, key: str, r: Response, model: str, now: float, asked_by: AskedBy | None) -> tuple[Any, ...]:
        usage = json.dumps(dict(r.usage), sort_keys=True) if r.usage else None
        refused = int(r.refused)
        confidence = json.dumps(r.confidence.to_json(), sort_keys=True) if r.confidence is not None else None
        endpoint = asked_by.endpoint if asked_by else None
        run = asked_by.run if asked_by else None
        # In _RESPONSE_COLS order, so that the digest is taken over what a read sees (the
        # CRC is not part of it: it is computed last, over the digest too).
        cols = (key, r.text, refused, usage, float(r.latency_s), int(r.attempts), None, int(r.truncated),
                r.served_model, confidence, model, now, endpoint, run)
        digest = signing.digest(_digest_payload(cols), self.signer.key)
        signed = self.signer.code
        crc = _checksum(key, r.text, refused, usage, int(r.truncated), confidence, (model, now, endpoint, run, digest,
                                                                                    signed))
        return (
            key, model, r.text, refused, usage, float(r.latency_s), int(r.attempts), now, crc, int(r.truncated),
            r.served_model, confidence, endpoint, run, digest, signed,
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
