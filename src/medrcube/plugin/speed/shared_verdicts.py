"""Under pytest-xdist one worker decides the family of checks; the others take its verdicts
(docs/speed.md, "Eleventh pass").

In a run that is not sequential, every xdist worker ends its pass with the records of the
whole cube (its own shard's, and the others' read from their files: run/shard_exchange.py),
and each decided every check of the family itself: 0.25-0.3 s of CPU at paper scale, the same
work n times with n workers (with `-n 8` on two cores, about 1 s more on the end of the run).

Now, when the workers outnumber the machine's cores (`cores`), the worker of shard 0 decides
and writes every check's payload (the gate.json entry its case reports:
plugin/summary.verdict_payload) beside the shard files, with the SHA-256 of results.jsonl's
lines of the records it decided on. Another worker takes a check's payload
from there only when the lines of its own records have that very digest: the same records,
so the same verdicts. Otherwise it decides itself, as before: the deciding worker could not
decide (inference failed), withdrew or died, its file is not there after WAIT_S, its records
are not these (it read the store itself), or the run is one this does not cover (sequential
looks, a baseline, which the digest does not cover). A site's own checks (plugin/site.py)
join the family's evidence, which a worker that took the payloads has not collected: it
decides the family itself for them.

The deciding worker also writes the SHA-256 of each shard file it read its records from. A
worker whose own shard file has the digest written for it takes the payloads as soon as its
own pass ends, before it reads the other shards (`taker`; docs/speed.md, "Fourteenth pass"):
it then reads them only if something asks for the whole run's records (a site's check).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from medrcube.cube.decode_workers import cores
from medrcube.run import shard_exchange
from medrcube.service import WHOLE_TAG

FILE = "verdicts.json"
NONE = "verdicts.none"  # the deciding worker will not write FILE: the others decide at once
FORMAT = 1
DECIDER = 0  # the shard whose worker decides
PASS = WHOLE_TAG  # its pass, whose pid file says whether it is alive (run/shard_exchange.announce)
WAIT_S = 10.0
POLL_S = 0.02


def shared_payload(session: Any, check: Any, payload_of: Callable[[Any, Any], dict[str, Any]]) -> dict[str, Any] | None:
    """The check's payload as the deciding worker decided it, or None: decide it here.
    `payload_of(check, verdict)`: a check's payload (plugin/summary.verdict_payload)."""
    if session.shared_payloads is None:
        session.shared_payloads = {}  # once: looked at, shared or not
        with contextlib.suppress(Exception):  # an optimisation: anything amiss, this worker decides
            session.shared_payloads = _payloads(session, payload_of)
    found = session.shared_payloads.get(check.id)
    return dict(found) if found is not None else None


def _payloads(session: Any, payload_of: Callable[[Any, Any], dict[str, Any]]) -> dict[str, Any]:
    directory, index = session.exchange_dir, session.worker[0]
    if not shares_verdicts(session):
        return {}
    if index == DECIDER:
        try:
            digest = session.lines_sha256()
            payloads = {c.id: payload_of(c, session.verdict(c)) for c in session.checks}
            publish(directory, digest, payloads, session.shard_files())
        except BaseException:  # a failed inference (GateError) included: its cases say so, the others decide
            withdraw(directory)
            raise
        return payloads
    session.inferred()  # this worker's own pass first (its errors are its cases' as before)
    if session.decider_payloads is not None:  # taken as its pass ended, or none to wait for (`taker`)
        return dict(session.decider_payloads)
    return wait_for(directory, session.lines_sha256()) or {}


def shares_verdicts(session: Any) -> bool:
    """Whether this run's workers share one worker's verdicts: an xdist run of more workers than
    cores, not sequential, with no baseline (which the records' digest does not cover)."""
    # With a core for each worker the workers decide side by side at no cost to one another, and a worker
    # that waited for another's verdicts would only wait longer: shared only when the workers outnumber
    # the cores this process may run on (its affinity, as the image decoders count them).
    return (session.exchange_dir is not None and session.worker[1] > cores() and not session.options.sequential
            and not session.has_baseline)


def taker(session: Any) -> Callable[[str], Awaitable[bool]] | None:
    """For a worker that will take the deciding worker's verdicts, what service.infer asks once this
    worker's shard file is written (`take_whole`, given the file's SHA-256), or None for any other.

    It waits for the deciding worker's payloads (as `wait_for`, without holding the event loop) and
    takes them, with the SHA-256 of that worker's records' lines, when it decided on the shard files
    and this worker's among them has that very digest: the deciding worker read these records as this
    worker graded them, and the other shards from the files this worker would read, written once
    each, so its records are the ones this worker would have put together. This worker then does
    not read, parse and order the other shards' 30,000-odd records at paper scale (about 0.6 s of CPU
    a worker, with `-n 8` on two cores most of the run's end; docs/speed.md, "Fourteenth pass").
    False: anything else (no such file, another digest, a withdrawn or dead decider, the wait run
    out); the worker then reads the other shards and compares its lines' digest as before."""
    directory, (index, count) = session.exchange_dir, session.worker
    if index == DECIDER or not shares_verdicts(session):
        return None

    async def take(own_file: str) -> bool:
        doc = await decided(directory)
        if doc is None:  # it withdrew, died or took too long: this worker decides itself, without waiting again
            session.decider_payloads = {}
            return False
        if not read_from(doc, index, count, own_file):
            return False
        session.take_decided(doc["payloads"], doc["lines_sha256"])
        return True

    return take


def read_from(doc: dict[str, Any], index: int, count: int, own_file: str) -> bool:
    """Whether the deciding worker's document says it read its records from the `count` shard files,
    shard `index`'s the very file whose SHA-256 is `own_file`."""
    shards = doc.get("shards")
    return isinstance(shards, dict) and len(shards) == count and shards.get(str(index)) == own_file


async def decided(directory: Path, wait_s: float = WAIT_S, clock: Callable[[], float] = time.monotonic) -> dict[str, Any] | None:
    """The deciding worker's file once written (None: it withdrew, died, or the wait ran out), polled on the event loop."""
    deadline = clock() + wait_s
    while not (directory / FILE).exists():
        if _gone(directory) or clock() > deadline:
            return None
        await asyncio.sleep(POLL_S)
    return _document(directory)


def publish(directory: Path, digest: str, payloads: dict[str, Any], shards: dict[int, str] | None = None) -> None:
    """Write the payloads decided on records whose lines have SHA-256 `digest` (whole: renamed into place);
    `shards`: the SHA-256 of each shard file those records were read from, by shard index, when they were."""
    path = directory / FILE
    tmp = path.with_name(f".{FILE}.{os.getpid()}.tmp")
    doc: dict[str, Any] = {"format": FORMAT, "lines_sha256": digest, "payloads": payloads}
    if shards:
        doc["shards"] = {str(j): sha for j, sha in sorted(shards.items())}
    tmp.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def withdraw(directory: Path) -> None:
    """Say that the deciding worker will not write its payloads: the others decide at once."""
    with contextlib.suppress(OSError):
        (directory / NONE).touch()


def wait_for(directory: Path, digest: str, wait_s: float = WAIT_S,
             clock: Callable[[], float] = time.monotonic) -> dict[str, Any] | None:
    """The deciding worker's payloads when decided on lines with SHA-256 `digest`, waiting up to
    `wait_s` for them; None at once when it withdrew or died, or they are of other lines."""
    path, deadline = directory / FILE, clock() + wait_s
    while not path.exists():
        if _gone(directory) or clock() > deadline:
            return None
        time.sleep(POLL_S)
    doc = _document(directory)
    return doc["payloads"] if doc is not None and doc["lines_sha256"] == digest else None


def _gone(directory: Path) -> bool:
    """Whether the deciding worker will write no payloads: it withdrew, or its pass's process died."""
    return (directory / NONE).exists() or shard_exchange.writer_gone(directory, PASS, DECIDER)


def _document(directory: Path) -> dict[str, Any] | None:
    """The deciding worker's file, if whole and of this format (its payloads a dict, its digest a string), else None."""
    try:
        doc = json.loads((directory / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("payloads"), dict)
            or not isinstance(doc.get("lines_sha256"), str)):
        return None
    return doc
