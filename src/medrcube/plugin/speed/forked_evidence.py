"""The family's evidence collected by this process and a forked copy of it side by side, once
the last answer is in (docs/speed.md, "Fourteenth pass").

After the last answer of a single-process run the model's server is idle, and so is a core:
the family's evidence (gate/evaluate.family_evidence: about fifty computations of 2-60 ms
each, 0.24-0.25 s of CPU at paper scale) was computed on one of them while the other waited.
Here the process forks once the records are final. The copy shares every record as it is
(copy-on-write: nothing is sent to it), and the two take the checks one at a time from one
queue, heaviest first (the checks' records read: `weight`), until none is left; the copy
sends back the evidence it collected, pickled through a pipe, and exits. The decision is the
family's own, made here on the evidence of both (gate/evaluate.evaluate_gate), so a verdict
is the one a single process decides: each check's evidence is computed by the same code on the
same records in one process or the other, and floats pickle exactly.

The copy only saves time. Anything amiss with it (it could not be started, it died, sent
nothing readable, or did not answer within `WAIT_S` of this process running out of checks:
a lock another thread held when it forked) and this process collects what the copy took
itself. It is used where it can help: on Linux (fork is how the copy gets the records for
nothing; macOS forks badly with threads), with another core, and with enough records that the
copy's own cost (fork, the pages it touches, the pickle: a few milliseconds) is small beside
its share.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from medrcube.gate.checks import Check
    from medrcube.gate.criteria import Evidence
    from medrcube.gate.evidence import ByScope
    from medrcube.records import GradedRecord

MIN_RECORDS = 5000  # below this the family takes a few milliseconds: not worth a fork
WAIT_S = 5.0  # for the copy's evidence once this process has taken the last check
TOKEN = 2  # bytes per check index in the queue: a pipe, read whole by one reader at a time (Linux)


def usable(records: int, checks: int) -> bool:
    """Whether a forked copy can help: Linux, another core for it, enough records and checks."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork") or checks < 2 or records < MIN_RECORDS:
        return False
    return checks < 256 ** TOKEN and len(os.sched_getaffinity(0)) > 1


def weight(check: Check, scoped: ByScope) -> int:
    """How much a check's evidence costs, roughly: the records it reads (an accuracy check of the
    family reads its cells' counts, gate/evidence.ByScope.standard_counts: next to nothing)."""
    return 0 if scoped.counts_accuracy(check) else scoped.selected(check)


def collect_in_two(checks: Sequence[Check], scoped: ByScope, baseline: list[GradedRecord] | None = None,
                   baseline_error: str | None = None, *, shares: dict[str, int] | None = None) -> list[Evidence]:
    """gate/evaluate.family_evidence, with a forked copy of this process taking checks too (`usable`).
    `shares`, when given, is told how many checks each collected ("here", "copy")."""
    from medrcube.gate.evaluate import family_evidence

    if not usable(len(scoped.records), len(checks)):
        return family_evidence(checks, scoped, baseline, baseline_error)
    order = sorted(range(len(checks)), key=lambda i: -weight(checks[i], scoped))  # heaviest first; stable
    queue_r, queue_w = os.pipe()
    os.write(queue_w, b"".join(i.to_bytes(TOKEN, "big") for i in order))  # 2 bytes a check: far below a pipe's 64 KiB
    os.close(queue_w)  # the queue's end: a read of nothing
    found_r, found_w = os.pipe()
    try:
        with warnings.catch_warnings():  # Python 3.12+ warns of fork with threads: the copy runs none, imports nothing
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(found_r)
        os.close(found_w)
        os.close(queue_r)
        return family_evidence(checks, scoped, baseline, baseline_error)
    if pid == 0:  # the copy: take checks, send their evidence, exit without running anything of the parent's
        status = 1
        try:
            os.close(found_r)
            mine = _take(queue_r, checks, scoped, baseline, baseline_error)
            _send(found_w, pickle.dumps(mine, protocol=pickle.HIGHEST_PROTOCOL))
            status = 0
        finally:
            os._exit(status)
    os.close(found_w)
    try:
        evidences = _take(queue_r, checks, scoped, baseline, baseline_error)
        os.close(queue_r)
        theirs = _received(found_r, pid)
    finally:
        with contextlib.suppress(OSError):
            os.close(found_r)
    here = len(evidences)
    for i, evidence in theirs.items():
        if 0 <= i < len(checks) and i not in evidences and evidence.check.id == checks[i].id:
            evidences[i] = replace(evidence, check=checks[i])  # the check itself, not its copy
    if shares is not None:
        shares.update(here=here, copy=len(evidences) - here)
    missing = [i for i in range(len(checks)) if i not in evidences]  # the copy's, had it failed
    for i, evidence in zip(missing, family_evidence([checks[i] for i in missing], scoped, baseline, baseline_error),
                           strict=True):
        evidences[i] = evidence
    return [evidences[i] for i in range(len(checks))]


def _take(queue: int, checks: Sequence[Check], scoped: ByScope, baseline: list[GradedRecord] | None,
          baseline_error: str | None) -> dict[int, Evidence]:
    """Collect checks from the queue until it is empty: {check index: evidence}."""
    from medrcube.gate.evaluate import family_evidence

    out: dict[int, Evidence] = {}
    while len(token := os.read(queue, TOKEN)) == TOKEN:
        i = int.from_bytes(token, "big")
        out[i] = family_evidence([checks[i]], scoped, baseline, baseline_error)[0]
    return out


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _received(fd: int, pid: int) -> dict[int, Evidence]:
    """The copy's evidence, read until it closes its end, within WAIT_S; {} when it failed (it is then ended)."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        else:  # the wait ran out: a copy that hangs is ended
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
            return {}
    finally:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    try:
        found = pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001 - a copy that died part-way sent a cut pickle: collect its share here
        return {}
    return found if isinstance(found, dict) else {}
