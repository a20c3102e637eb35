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
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from medrcube.run import shard_exchange

FILE = "verdicts.json"
NONE = "verdicts.none"  # the deciding worker will not write FILE: the others decide at once
FORMAT = 1
DECIDER = 0  # the shard whose worker decides
PASS = "candidate-0"  # its pass, whose pid file says whether it is alive (run/shard_exchange.announce)
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
    directory, (index, count) = session.exchange_dir, session.worker
    if directory is None or count <= cores() or session.options.sequential or session.has_baseline:
        return {}
    if index == DECIDER:
        try:
            digest = session.lines_sha256()
            payloads = {c.id: payload_of(c, session.verdict(c)) for c in session.checks}
            publish(directory, digest, payloads)
        except BaseException:  # a failed inference (GateError) included: its cases say so, the others decide
            withdraw(directory)
            raise
        return payloads
    session.records()  # this worker's own pass first (its errors are its cases' as before)
    return wait_for(directory, session.lines_sha256()) or {}


def cores() -> int:
    """The cores this process may run on. With a core for each worker the workers decide side by
    side at no cost to one another, and a worker that waited for another's verdicts would only
    wait longer: the verdicts are shared only when the workers outnumber the cores."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def publish(directory: Path, digest: str, payloads: dict[str, Any]) -> None:
    """Write the payloads decided on records whose lines have SHA-256 `digest` (whole: renamed into place)."""
    path = directory / FILE
    tmp = path.with_name(f".{FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"format": FORMAT, "lines_sha256": digest, "payloads": payloads}, ensure_ascii=False),
                   encoding="utf-8")
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
        if (directory / NONE).exists() or shard_exchange.writer_gone(directory, PASS, DECIDER) or clock() > deadline:
            return None
        time.sleep(POLL_S)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("lines_sha256") != digest:
        return None
    payloads = doc.get("payloads")
    return payloads if isinstance(payloads, dict) else None
