"""The family's evidence collected on two cores after the last answer (docs/speed.md, "Sixteenth pass").

Each check's evidence is a pure function of the run's records (gate/evidence.collect); only
the family's decision (gate/family.decide) reads them all. At the paper's scale collecting is
0.24 s of CPU on the critical path after the last answer, while the machine's other core,
whose server is done, waits. So the process forks: the child inherits the records (no copy:
the pages are shared until written), collects its share of the checks and sends back their
Evidence through a pipe, as JSON of their fields with each tuple, mapping and dataclass tagged
(`_encoded`: only the evidence's own classes are made again from it, no pickle); the parent
collects the rest meanwhile, then decides the family as before. The evidence is the same values from the same function on the same records,
only made elsewhere; its `check` is the parent's own object again.

Anything unexpected (no fork on this platform, the fork refused, the child killed or
raising, its answer unreadable): the parent collects the child's share itself; a child that
is late (another job holds its core) is waited for a while, then its share is collected by
the parent too and whichever is whole first is taken. So this is an optimisation that costs
at most its own time (the fork and the pages both processes write, about 25 ms at the paper's
scale, and the wait), and it is not taken below `MIN_RECORDS`, where that is most of the work.
A Python warning raised while the child collects stays in the child (pytest's summary of
warnings sees those of the parent's share only); the evidence code raises none on purpose.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any

# The evaluation is imported where the verdicts are taken (after the last answer; plugin/speed/tail_ahead.py
# imports it while the answers come in): the session names this collector before the first request.
if TYPE_CHECKING:
    from medrcube.gate.evidence import ByScope

# The accuracy checks share their cells' standard counts (ByScope.standard_counts): one process collects them all.
ACCURACY_KINDS = frozenset({"cell", "slice", "overall"})

# Below this many records the fork (page tables of the whole heap, the pages written after
# it) costs about what the child's share saves.
MIN_RECORDS = 4000

# Relative cost of a check's evidence per record of its scope (process time at the paper's
# scale, in-process, the least of 7 rounds: credibility 55-58 ms for 6 checks over 72,956 records,
# position 50-53 ms over 36,478, image dependence 29-31 ms, calibration 3 ms; each kind reading only
# its variants, docs/speed.md "Twentieth pass"). A kind not named costs 1.0. Only
# the split's balance depends on them, never the evidence.
COST_PER_RECORD = {"credibility": 0.8, "position": 1.4, "image_dependence": 0.85, "calibration": 0.08,
                   "regression": 1.0}
# The accuracy checks together, per record of the run: their standard records' counts by cell
# (ByScope.standard_counts, shared by them all) and the intervals. They stay in the parent, which
# also pays for the pages both processes write after the fork, chosen by measurement on paper-scale
# records (the whole family's wall, medians): under another job's load 2.1 209 ms, 2.6 186 ms, 3.0
# 251 ms, one process 264 ms (docs/speed.md "Sixteenth pass"); on the quiet machine, interleaved,
# medians of 8: 1.4 208 ms, 1.7 200 ms, 2.0 199 ms, 2.6 210 ms, the parent waiting for the child
# 35, 7, 14 and 34 ms ("Seventeenth pass"). The child's share ends last above 2.0.
ACCURACY_COST_PER_RECORD = 2.0
# How long the child is waited for once the process's own share is done, as a share of the time that took.
PATIENCE = 0.5


def collect_forked(checks: Sequence[Any], scoped: ByScope, base: list[Any] | None,
                   baseline_error: str | None, *, min_records: int | None = None,
                   meanwhile: Callable[[], None] | None = None) -> list[Any]:
    """gate.evaluate.CollectFamily: `collect_each`'s evidence, a share of it collected in a forked
    child when there are `min_records` records or more (`MIN_RECORDS` when None). `meanwhile`: other
    work of the process's, done when its own share is collected and the child's answer has not come
    yet (never raises here: it is an optimisation of its own)."""
    from medrcube.cube.decode_workers import cores
    from medrcube.gate.evaluate import collect_each
    from medrcube.gate.evidence import collect

    if min_records is None:
        min_records = MIN_RECORDS
    # The cores this process may run on (its affinity: a CI job pinned to one core of a larger machine forks for nothing).
    if not hasattr(os, "fork") or len(scoped.records) < min_records or cores() < 2:
        return collect_each(checks, scoped, base, baseline_error)
    theirs = child_share(checks, scoped)
    if not theirs:
        return collect_each(checks, scoped, base, baseline_error)

    def one(i: int) -> Any:
        c = checks[i]
        return collect(c, scoped, base if c.needs_baseline else None, baseline_error=baseline_error)

    read_end, write_end = os.pipe()
    try:
        with warnings.catch_warnings():  # Python 3.12's warning on a fork beside threads: the child runs no other thread's code
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except Exception:  # noqa: BLE001  (refused, or a warning turned into an error: collected here instead)
        os.close(read_end)
        os.close(write_end)
        return collect_each(checks, scoped, base, baseline_error)
    if pid == 0:  # the child: its share, encoded into the pipe, and out without any of the parent's exit work
        status = 1
        try:
            os.close(read_end)
            data = json.dumps([_encoded(one(i)) for i in theirs], separators=(",", ":")).encode("utf-8")
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view):]
            # Closed now, not by the exit: the parent reads to the end of the pipe, and an exit closes the
            # process's files only after it has let go of its memory (a copy of the parent's page tables:
            # about 10 ms at the paper's scale, which the parent waited for).
            os.close(write_end)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    taken: list[Any] | None = None
    reaped = False
    try:
        started = time.perf_counter()
        mine = {i: one(i) for i in range(len(checks)) if i not in theirs}
        # A child slower than this process (its core taken by another job) does not hold it for long: given
        # half as long again as this process's own share took, then while no answer has come this process
        # collects the child's share too, lightest check first, and takes whichever is whole first (the
        # same values either way).
        patience = PATIENCE * (time.perf_counter() - started)
        if meanwhile is not None and not _answered(read_end, 0.0):  # the wait for the child put to use
            began = time.perf_counter()
            with contextlib.suppress(Exception):
                meanwhile()
            patience = max(0.0, patience - (time.perf_counter() - began))
        for n, i in enumerate(theirs):
            if _answered(read_end, patience if n == 0 else 0.0):
                taken, reaped = _answer(read_end, pid, [checks[i] for i in theirs])
                break
            mine[i] = one(i)
    finally:
        os.close(read_end)
        if not reaped:  # all collected here, or the parent raised (a site kind's collector)
            _reap(pid)
    for i, evidence in zip(theirs, taken or (), strict=False):
        mine.setdefault(i, evidence)
    return [mine[i] if i in mine else one(i) for i in range(len(checks))]  # one(): the child failed


def child_share(checks: Sequence[Any], scoped: ByScope) -> list[int]:
    """The positions of the checks the child collects, lightest first: the checks other than accuracy,
    heaviest first, each given to the lighter of the two processes (the parent starting with the
    accuracy checks' cost), so that both end about together."""
    groups = scoped.groups()

    def cost(c: Any) -> float:
        n = sum(size for first, size in groups if c.selects(first))
        return COST_PER_RECORD.get(str(c.kind), 1.0) * n

    parent = ACCURACY_COST_PER_RECORD * len(scoped.records) if any(str(c.kind) in ACCURACY_KINDS for c in checks) else 0.0
    child = 0.0
    others = sorted(((cost(c), i) for i, c in enumerate(checks) if str(c.kind) not in ACCURACY_KINDS), reverse=True)
    given: list[tuple[float, int]] = []
    for weight, i in others:
        if child < parent:
            child += weight
            given.append((weight, i))
        else:
            parent += weight
    return [i for _, i in sorted(given)]  # lightest first: the order the parent takes them in if the child is late


def _answered(read_end: int, wait_s: float) -> bool:
    """Whether the child's answer has begun to come within `wait_s` (it writes it whole, once, at its end), or its
    end of the pipe closed."""
    return bool(select.select([read_end], [], [], wait_s)[0])


def _answer(read_end: int, pid: int, checks: Sequence[Any]) -> tuple[list[Any] | None, bool]:
    """The child's evidence of `checks` once it has written it whole, else None; and whether the child was
    reaped (or handed to a thread that reaps it)."""
    chunks = []
    while chunk := os.read(read_end, 1 << 20):  # its end of the pipe closes once it has written (or as it exits)
        chunks.append(chunk)
    done, status = os.waitpid(pid, os.WNOHANG)
    if done and (not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0):
        return None, True
    try:
        sent = json.loads(b"".join(chunks))
        if not isinstance(sent, list) or len(sent) != len(checks):
            sent = None
    except ValueError:  # an unreadable answer: the parent collects instead
        sent = None
    if not done:
        # Still letting go of its memory after closing the pipe: waited for by a thread, not here. An answer
        # is taken only whole (every check's evidence, in JSON that reads): the child closed the pipe after
        # writing it all, and has nothing left to do but exit.
        if sent is None:
            _reap(pid)
        else:
            threading.Thread(target=_reap_exited, args=(pid,), name="medrcube-evidence-reaper", daemon=True).start()
    if sent is None:
        return None, True
    try:
        return [_decoded(doc, check) for doc, check in zip(sent, checks, strict=True)], True
    except (ValueError, TypeError, KeyError):
        return None, True


def _reap_exited(pid: int) -> None:
    """The child waited for as it exits (it has answered: nothing to kill)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)


@functools.cache  # read for every dataclass value sent and made again
def _classes() -> dict[str, type]:
    """What the child's answer may make again: the evidence's own dataclasses, by name."""
    from medrcube.gate.criteria import Criterion, Evidence
    from medrcube.gate.verdict import WorstItem

    return {cls.__name__: cls for cls in (Evidence, Criterion, WorstItem)}


def _encoded(value: Any) -> Any:
    """JSON of an Evidence (its `check` left out: the parent puts its own back) that `_decoded` makes
    again equal: each tuple, mapping and dataclass tagged, floats exact (their repr; NaN and the
    infinities as the json module writes them). Anything else raises (the child then fails and the
    parent collects its share)."""
    kind = type(value)
    if value is None or kind is str or kind is int or kind is float or kind is bool:
        return value
    if kind is list:
        return [_encoded(v) for v in value]
    if kind is tuple:
        return {"tuple": [_encoded(v) for v in value]}
    if kind is dict:
        return {"map": [[_encoded(k), _encoded(v)] for k, v in value.items()]}
    if is_dataclass(value) and _classes().get(kind.__name__) is kind:
        return {"class": kind.__name__,
                "fields": {f.name: _encoded(getattr(value, f.name)) for f in fields(value) if f.name != "check"}}
    raise TypeError(f"the evidence holds a {kind.__name__}, which the child does not send")


def _decoded(doc: Any, check: Any = None) -> Any:
    """`_encoded`'s value made again; an Evidence with `check`."""
    if isinstance(doc, list):
        return [_decoded(v) for v in doc]
    if not isinstance(doc, dict):
        return doc
    if "tuple" in doc:
        return tuple(_decoded(v) for v in doc["tuple"])
    if "map" in doc:
        return {_decoded(k): _decoded(v) for k, v in doc["map"]}  # keys: str, numbers, None, tuples of them
    cls = _classes()[doc["class"]]
    made = {name: _decoded(v) for name, v in doc["fields"].items()}
    return cls(check=check, **made) if cls.__name__ == "Evidence" else cls(**made)


def _reap(pid: int) -> None:
    """The child ended and waited for, whatever state it is in (not yet reaped: its pid is still its own)."""
    with contextlib.suppress(OSError):
        os.kill(pid, 9)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)
