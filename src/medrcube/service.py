"""The one run service: run the cube -> write the run directory -> write the report.

`medrcube run` (commands/run.py) and the pytest gate (plugin/) both go through here, so
that the two cannot drift: the same inference driver (`infer`), the same pre-flight
(`preflight`, the adapter's own), the same run-directory names (`new_run_dir`, the only function that names
one) and the same writer (`write_run`: results.jsonl, metrics_summary.json, run.json,
gate.json when there is a gate, report.html). What each model was asked is counted around
its adapter by run/metering.py's `Metered`.

Layering: this room sits just below the `medrcube` command and the pytest room; it may
use the runner, the store, the run directory and the report, and none of them imports it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import itertools
import threading
import time
import warnings
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medrcube.models.base import ModelAdapter, Preflight
from medrcube.run import shard_exchange
from medrcube.run.metering import Metered, Usage

if TYPE_CHECKING:
    from medrcube.cube.item import Cube
    from medrcube.gate.checks import Check
    from medrcube.records import GradedRecord
    from medrcube.run.progress import Progress
    from medrcube.run.runner import RunResult
    from medrcube.rundir.documents import GateDocument
    from medrcube.rundir.files import GradedAhead, ResultRows
    from medrcube.sequential import Decider

# The pre-flight (the endpoint's model list): one attempt (the adapter's client never
# retries), at most this long.
PREFLIGHT_TIMEOUT_S = 20.0


# -- pre-flight ------------------------------------------------------------------------------


class EndpointError(Exception):
    """The model endpoint cannot answer at all (nothing listens, or the key is refused)."""


def endpoint_of(adapter: ModelAdapter) -> str | None:
    """Where an adapter sends its requests (credentials cut; several servers joined by
    " | "), or None for an in-process model: the contract's `endpoints`, as one text."""
    return " | ".join(adapter.endpoints) or None


async def _preflight_one(adapter: ModelAdapter) -> Preflight:
    """The adapter's own pre-flight (models/base.py `Preflight`), bounded in time: a slow
    endpoint is not a dead one, and the run proceeds with its retries."""
    try:
        return await asyncio.wait_for(adapter.preflight(), PREFLIGHT_TIMEOUT_S)
    except TimeoutError:
        return Preflight()
    finally:
        await adapter.aclose()


def preflight(adapters: Sequence[ModelAdapter | None]) -> dict[str, str | None]:
    """One short request to each HTTP endpoint before the run; raises EndpointError with
    one message naming the URL, the HTTP status and the provider's words when an
    endpoint cannot answer at all (nothing listens, the key is refused, its model list
    does not hold the model). Returns, per
    spec, the model as its endpoint listed it (for the run's summary: per-run state the
    caller keeps)."""
    todo = [a for a in adapters if a is not None and endpoint_of(a) is not None]
    if not todo:
        return {}

    async def all_of() -> list[Preflight]:
        return [await _preflight_one(a) for a in todo]

    said = asyncio.run(all_of())
    problems = [p.problem for p in said if p.problem]
    if problems:
        raise EndpointError("\n".join(problems))
    return {a.spec: p.served for a, p in zip(todo, said, strict=True) if p.served is not None}


# -- inference -------------------------------------------------------------------------------


@dataclass
class Inference:
    """What `infer` produced: the candidate's records (and the baseline model's), with the
    usage of every model this process asked."""

    result: RunResult
    baseline: RunResult | None = None
    usage: dict[str, Usage] = field(default_factory=dict)  # candidate / judge / baseline
    ahead: GradedAhead | None = None  # the run directory's lines and sums of the candidate's records, made as graded
    # A sharded worker's: results.jsonl's lines of the candidate's records it exchanged (its own
    # made once, the others' as they wrote them), for its hand-over (plugin/handover.records_out).
    lines: ResultRows | None = None
    # A sharded worker's candidate pass taken from the shard files: each file's SHA-256 by shard index.
    shard_files: dict[int, str] | None = None
    # Set when `take_whole` spared this worker the other shards (`result` holds its own shard's
    # records only): reads them from their files (None: they cannot be had).
    whole: Callable[[], RunResult | None] | None = None

    @property
    def complete(self) -> bool:
        """Whether `result` holds the whole cube's records (False: its own shard's only, `completed` reads the rest)."""
        return self.whole is None

    def completed(self) -> bool:
        """Whether `result` holds the whole cube's records, reading the other shards' files first when
        `take_whole` spared them (False: they cannot be had; the store is closed by now)."""
        if self.whole is not None:
            whole = self.whole()
            if whole is None:
                return False
            # The counts of this process's asking stay its own (infer sums its passes' usage).
            self.result = dataclasses.replace(whole, requests_sent=self.result.requests_sent,
                                              judge_requests=self.result.judge_requests)
            self.whole = None
        return True


def stable_shard(item_id: str, count: int) -> int:
    # sha256, not hash(): Python salts str hashes per process, and workers must agree.
    return int.from_bytes(hashlib.sha256(item_id.encode("utf-8")).digest()[:8], "big") % count


class _AheadAtFirstBatch:
    """The run's GradedAhead, made (and the run directory's writer imported) at the first
    graded batch rather than before the first request."""

    def __init__(self, planned: int = 0) -> None:
        self.made: GradedAhead | None = None
        self.planned = planned  # the asks the run plans at most: a large run's files are made by a child too

    def add(self, records: Sequence[GradedRecord]) -> None:
        if self.made is None:
            from medrcube.rundir import mirror
            from medrcube.rundir.files import GradedAhead

            self.made = GradedAhead()
            if self.planned >= mirror.MIN_RECORDS:
                self.made.mirror_to(mirror.Mirror.start(self.made.rows.spool_fileno()))
        self.made.add(records)


def infer(
    cube: Cube,
    adapter: ModelAdapter,
    *,
    variants: Sequence[Any] = ("standard",),
    store_dir: Path | None = None,
    judge: ModelAdapter | None = None,
    baseline: ModelAdapter | None = None,
    concurrency: int | None = None,
    refresh: bool = False,
    template: str = "default",
    progress: bool | Progress = False,
    shard: tuple[int, int] = (0, 1),
    stop_when_orphaned: bool = False,
    decider: Decider | None = None,
    checks: Sequence[Check] = (),
    baseline_records: Sequence[GradedRecord] | None = None,
    prices: Mapping[str, Mapping[str, Any]] | None = None,
    run_token: str | None = None,
    fresh: bool = False,
    stop: threading.Event | None = None,
    exchange_dir: Path | None = None,
    settle: Callable[[], None] | None = None,
    mirror: bool = False,
    take_whole: Callable[[str], Awaitable[bool]] | None = None,
    shard_digests: bool = False,
    on_result: Callable[[Inference], None] | None = None,
) -> Inference:
    """Ask the candidate (then a baseline model) in one event loop, as `decider` asks (the
    whole cube when None), through the response store at `store_dir` (None: no store),
    and close every adapter at the end. `prices` (per role, models.yaml's `price`) price
    the metered usage for a budget on cost.

    `shard=(index, count)`: a pytest-xdist worker asks its own shard of the cube first
    (a stable hash of the item id), then takes the other shards' records from the other
    workers (`exchange_dir`, below), or else runs the whole cube, which reads the other
    shards from the store (or waits on their claims): each request reaches the model once
    per run however many workers need every record.

    `run_token` names this run in the provenance of the answers it stores (one for all
    the workers of a gate run; None: a new one); `exchange_dir`, a directory the workers of a
    sharded run share: each hands the records of its own shard to the others there
    (run/shard_exchange.py) instead of each reading and grading every other shard's answers
    again from the store (their pass over the store stays the fallback); `settle`, called
    between graded batches of the candidate's own asks at most every SETTLE_EVERY_S (the gate
    collects and freezes the heap there, plugin/speed/frozen_heap.py, where no other thread
    waits to do it); `fresh` takes no answer another run
    stored (`--fresh`): every item is asked live. `stop`, set from another thread, cancels
    the run (its requests in flight with it) and raises run.orphan.StoppedError. `mirror`: a
    large run's results.jsonl and metrics_summary.json may be asked of a child that reads the
    lines as they are graded (rundir/mirror.py; the gate asks while it decides).

    `take_whole(sha256)`: asked by a sharded worker once its own shard's file is written (its
    bytes' SHA-256), before it reads the others': True when what it would make of the whole
    cube is had already (another worker decided on the very files: plugin/speed/shared_verdicts.py).
    Its Inference then holds its own shard's records only (`complete` False) and reads the
    others from their files only when `completed()` is called. `shard_digests`: a sharded worker
    names the shard files its candidate's records were read from by their SHA-256
    (`Inference.shard_files`, for the workers `take_whole` asks about). `on_result`: given the
    Inference as soon as it is whole (its usage counted), before the adapters are closed, the event
    loop ends and the store is closed (plugin/speed/early_inference.py: the verdicts need not wait
    for that); it is also what `infer` returns."""
    from medrcube.run.provenance import new_run_token
    from medrcube.run.runner import run_cube_async
    from medrcube.run.store import ResponseStore

    run_token = run_token or new_run_token()

    store = ResponseStore(store_dir) if store_dir is not None else None
    metered = {"candidate": Metered(adapter)}
    if judge is not None:
        metered["judge"] = Metered(judge)
    if baseline is not None:
        metered["baseline"] = Metered(baseline)
    index, count = shard
    passes = {role: itertools.count() for role in metered}  # each role's sharded passes, numbered

    def role_of(model: Metered) -> str:
        return next(role for role, m in metered.items() if m is model)

    handed: list[ResultRows] = []
    later: list[Callable[[], RunResult | None]] = []  # the candidate's other shards, when take_whole spared them
    shard_files: dict[int, str] = {}

    def handed_lines() -> ResultRows:
        if not handed:
            from medrcube.rundir.files import ResultRows

            handed.append(ResultRows())
        return handed[0]

    # Not in a sharded worker: its records reach the controller as JSON, written from themselves.
    ahead = _AheadAtFirstBatch(planned_asks(cube, variants) if mirror else 0) if count == 1 else None

    async def run(model: Metered, names: Sequence[Any], part: Cube = cube) -> RunResult:
        kwargs: dict[str, Any] = dict(
            on_graded=ahead.add if ahead is not None and model is metered["candidate"] else None,
            variants=tuple(names),
            store=store,
            judge=metered.get("judge"),
            concurrency=concurrency,
            refresh=refresh,
            template=template,
            progress=progress,
            run_token=run_token,
            endpoint=endpoint_of(model),
            fresh=fresh,
        )
        if count > 1:
            shards = _shard_ids(part, count)  # each shard's item ids, in the part's order
            own_ids = set(shards[index])
            mine = tuple(it for it in part.items if it.id in own_ids)
            tag = f"{role_of(model)}-{next(passes[role_of(model)])}"  # the same in every worker: they ask alike
            rows = handed_lines() if exchange_dir is not None and model is metered["candidate"] else None
            if exchange_dir is not None:
                shard_exchange.announce(exchange_dir, tag, index)
            # The candidate's lines made as its own shard is graded, not after its last answer.
            graded = _graded_hook(rows.add if rows is not None else None,
                                  settle if model is metered["candidate"] else None)
            own = await run_cube_async(dataclasses.replace(part, items=mine), model,
                                       **{**kwargs, "on_graded": graded} if graded is not None else kwargs)
            if exchange_dir is not None:
                if own.aborted is None:
                    own_file = _published(exchange_dir, tag, shard, shards, own, rows,
                                          digest=tag == WHOLE_TAG and (shard_digests or take_whole is not None))
                    if own_file and take_whole is not None and tag == WHOLE_TAG and await take_whole(own_file):
                        # What the other passes counted is in their files' first lines; their records are read
                        # only if asked for (Inference.completed).
                        infos = shard_exchange.read_infos(exchange_dir, tag, index, count, shards)
                        if infos is not None:
                            later.append(functools.partial(_read_whole, exchange_dir, tag, shard, shards, part, own,
                                                           names, model, rows))
                            return dataclasses.replace(own, info=_merged_info(own, infos, model))
                    named = shard_digests and bool(own_file) and tag == WHOLE_TAG
                    exchanged = await _exchanged(exchange_dir, tag, shard, shards, part, own, names, model, rows, named)
                    if exchanged is not None:
                        if named and own_file:
                            shard_files.update({index: own_file, **exchanged[1]})
                        return exchanged[0]
                shard_exchange.withdraw(exchange_dir, tag, index)  # read from the store: the others need not wait
            whole = await run_cube_async(part, model, **kwargs)
            # What this process asked in its own pass is not `cached` (a store written before the run).
            asked = {(r.item_id, r.variant, r.rotation) for r in own.records if not r.cached}
            whole.records = [dataclasses.replace(r, cached=False)
                             if r.cached and (r.item_id, r.variant, r.rotation) in asked else r for r in whole.records]
            whole.cache_hits = sum(r.cached for r in whole.records)
            return whole
        return await run_cube_async(part, model, **kwargs)

    async def everything() -> Inference:
        from medrcube.models.models_file import usage_cost
        from medrcube.sequential import FixedDecider

        batches: list[RunResult] = []
        base_batches: list[RunResult] = []

        async def ask(part: Cube) -> list[GradedRecord]:
            batches.append(await run(metered["candidate"], variants, part))
            return batches[-1].records

        async def ask_baseline(part: Cube) -> list[GradedRecord]:
            base_batches.append(await run(metered["baseline"], ("standard",), part))
            return base_batches[-1].records

        def spend() -> tuple[float, int]:
            """The metered cost so far (every priced role) and the candidate's requests sent."""
            total = sum(usage_cost(price, metered[role].usage.prompt_tokens, metered[role].usage.completion_tokens)
                        for role, price in (prices or {}).items() if role in metered)
            return total, metered["candidate"].usage.requests

        try:
            await (decider or FixedDecider()).ask(
                cube, checks, ask, ask_baseline=ask_baseline if baseline is not None else None,
                baseline_records=baseline_records, spend=spend)
            made = Inference(_merged(batches), _merged(base_batches) if baseline is not None else None,
                             ahead=ahead.made if ahead is not None else None, lines=handed[0] if handed else None,
                             shard_files=dict(shard_files) or None,
                             whole=later[0] if later else None)
            if on_result is not None:  # every request answered: its usage is final
                _count_usage(made, metered)
                on_result(made)
            return made
        finally:
            for m in metered.values():
                await m.aclose()

    async def guarded() -> Inference:
        from medrcube.run.orphan import until_orphaned, until_stopped

        work = everything() if stop is None else until_stopped(everything(), stop)
        # An xdist worker whose controller died stops too.
        return await (until_orphaned(work) if stop_when_orphaned else work)

    from medrcube.run.runner import run_to_result

    try:
        out = run_to_result(guarded())  # not asyncio.run: its end would format the result (run_to_result)
    finally:
        if store is not None:
            store.close()
    _count_usage(out, metered)
    return out


def _count_usage(out: Inference, metered: Mapping[str, Metered]) -> None:
    """Every model's usage into `out`, and its requests into the candidate's result (the two passes of a
    sharded worker are one run for its counts)."""
    out.usage = {name: m.usage for name, m in metered.items()}
    out.result.requests_sent = out.usage["candidate"].requests
    if "judge" in out.usage:
        out.result.judge_requests = out.usage["judge"].requests


def planned_asks(cube: Cube, variants: Sequence[Any]) -> int:
    """The asks of a pass over the whole cube, at most (rotations not capped by the options)."""
    from medrcube.run.plan import as_variants

    return len(cube.items) * sum(len(v.instances()) for v in as_variants(variants))


# How often a sharded worker's heap is settled while its answers come in (`infer`'s `settle`):
# as often as the single process's waiting thread does (plugin/speed/early_inference.SETTLE_EVERY_S).
# Left for after the last answer, it was one collection of the whole run: 0.4 s at paper scale.
SETTLE_EVERY_S = 2.0


def _graded_hook(add: Callable[[Sequence[GradedRecord]], None] | None,
                 settle: Callable[[], None] | None) -> Callable[[Sequence[GradedRecord]], None] | None:
    """The runner's on_graded for a worker's own pass: `add` each batch; `settle` at most every SETTLE_EVERY_S."""
    if settle is None:
        return add
    last = [time.monotonic()]

    def graded(records: Sequence[GradedRecord]) -> None:
        if add is not None:
            add(records)
        now = time.monotonic()
        if now - last[0] >= SETTLE_EVERY_S:
            settle()
            last[0] = time.monotonic()

    return graded


# How long a worker that ended its own shard waits for the others' records before it reads
# their answers from the store itself: its shard is about the size of theirs, so they end
# about when it did; the wait grows with the pass (a pass that took a minute allows 15 s more).
EXCHANGE_WAIT_S = 10.0
EXCHANGE_WAIT_SHARE = 0.25


# The candidate's pass whose shard files another worker may have decided on (`take_whole`): the
# first, the only one of a full run (a sequential run's looks are passes of their own).
WHOLE_TAG = "candidate-0"


def _shard_ids(part: Cube, count: int) -> list[list[str]]:
    """Each shard's item ids, in the part's order."""
    shards: list[list[str]] = [[] for _ in range(count)]
    for it in part.items:
        shards[stable_shard(it.id, count)].append(it.id)
    return shards


def _counted(own: RunResult) -> dict[str, Any]:
    """What a shard's pass counted that the whole part's sums: its served models and provenance."""
    return {"served_models": own.info.get("served_models") or {}, "provenance": own.info.get("provenance")}


def _published(directory: Path, tag: str, shard: tuple[int, int], shards: Sequence[Sequence[str]], own: RunResult,
               rows: ResultRows | None = None, digest: bool = False) -> str | None:
    """This shard's records written for the other workers (run/shard_exchange.publish): its file's SHA-256
    when `digest` (else ""), or None when it could not be written. `shards[j]`: shard j's item ids."""
    from medrcube.rundir.files import result_line

    index, count = shard
    own_lines = [rows.line(r) if rows is not None else result_line(r) for r in own.records]
    return shard_exchange.publish(directory, tag, index, count, shards[index], own.records, _counted(own), own_lines,
                                  digest)


async def _exchanged(directory: Path, tag: str, shard: tuple[int, int], shards: Sequence[Sequence[str]], part: Cube,
                     own: RunResult, names: Sequence[Any], model: Metered, rows: ResultRows | None = None,
                     digests: bool = False) -> tuple[RunResult, dict[int, str]] | None:
    """The pass over the whole `part` from this shard's records and the other workers' (run/shard_exchange.py),
    in plan order, with the SHA-256 of each file read when `digests` (else empty); None when any of theirs
    cannot be had (the caller then runs its pass over the store). The records travel as results.jsonl's
    lines; `rows`, where this shard's were made as it was graded, keeps the others' too."""
    index, count = shard
    others = await shard_exchange.gather(directory, tag, index, count, shards,
                                         wait_s=EXCHANGE_WAIT_S + EXCHANGE_WAIT_SHARE * own.wall_s, digest=digests)
    whole = _assembled(others, part, own, names, model, rows) if others is not None else None
    return (whole, {j: s.sha256 for j, s in others.items()}) if whole is not None and others is not None else None


def _read_whole(directory: Path, tag: str, shard: tuple[int, int], shards: Sequence[Sequence[str]], part: Cube,
                own: RunResult, names: Sequence[Any], model: Metered, rows: ResultRows | None = None) -> RunResult | None:
    """The pass over the whole `part` from the shard files as they are now (`Inference.completed`), or None."""
    index, count = shard
    others = shard_exchange.read_others(directory, tag, index, count, shards)
    return _assembled(others, part, own, names, model, rows) if others is not None else None


def _assembled(others: Mapping[int, shard_exchange.Shard], part: Cube, own: RunResult,
               names: Sequence[Any], model: Metered, rows: ResultRows | None = None) -> RunResult | None:
    """This shard's records and the others' in plan order, their counts summed; None if they do not make the part."""
    from medrcube.run.plan import as_variants
    from medrcube.run.runner import record_counts

    ids = [it.id for it in part.items]
    records = shard_exchange.in_plan_order([*own.records, *(r for j in sorted(others) for r in others[j].records)],
                                           ids, shard_exchange.variant_positions(as_variants(names)))
    if records is None:
        return None
    if rows is not None:
        for j in sorted(others):
            rows.add(others[j].records, lines=others[j].lines)
    # The own pass's request counts and times (the other shards' were theirs), the whole part's records.
    return dataclasses.replace(own, records=records, info=_merged_info(own, [others[j].info for j in sorted(others)], model),
                               **record_counts(records))


def _merged_info(own: RunResult, others: Sequence[Mapping[str, Any]], model: Metered) -> dict[str, Any]:
    """This pass's info with the served models and provenance of every shard's pass summed (`others`: theirs)."""
    from medrcube.run.provenance import merged_counts, served_mismatches

    counted = _counted(own)
    served: Counter[str] = Counter()
    for info in [counted, *others]:
        served.update({str(k): int(v) for k, v in dict(info.get("served_models") or {}).items()})
    info = dict(own.info)
    info.update(served_models=dict(served.most_common()), served_model_mismatches=served_mismatches(model, served),
                provenance=merged_counts([counted["provenance"], *(i.get("provenance") for i in others)]))
    return info


def _merged(batches: Sequence[RunResult]) -> RunResult:
    """One RunResult for the batches of a run (records in the order asked)."""
    from medrcube.run.provenance import merged_counts
    from medrcube.run.runner import RunResult

    if len(batches) == 1:
        return batches[0]
    if not batches:
        return RunResult(records=[])
    first, last = batches[0], batches[-1]
    info = dict(first.info)
    info["provenance"] = merged_counts(b.info.get("provenance") for b in batches)
    return RunResult(
        records=[r for b in batches for r in b.records],
        requests_sent=sum(b.requests_sent for b in batches),
        cache_hits=sum(b.cache_hits for b in batches),
        errors=sum(b.errors for b in batches),
        unavailable=sum(b.unavailable for b in batches),
        wall_s=last.finished - first.started if last.finished else sum(b.wall_s for b in batches),
        judge_requests=sum(b.judge_requests for b in batches),
        judge_cache_hits=sum(b.judge_cache_hits for b in batches),
        started=first.started,
        finished=last.finished,
        aborted=next((b.aborted for b in batches if b.aborted), None),
        info=info,
    )


# -- the run directory -----------------------------------------------------------------------


def new_run_dir(out: Path, model_spec: str, run_id: str | None = None) -> Path:
    """The only function that names a run directory: out/<UTC timestamp>-<model slug>,
    with -2, -3, ... when two runs start within the same second (created here, so that
    two processes cannot pick the same name). An explicit `run_id` is the user's to
    reuse (its files are replaced atomically)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if run_id is not None:
        path = out / run_id
        path.mkdir(parents=True, exist_ok=True)
        return path
    from medrcube.rundir.files import default_run_id

    base = default_run_id(model_spec, datetime.now(UTC))
    path, i = out / base, 2
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            path, i = out / f"{base}-{i}", i + 1


def write_run(
    run_dir: Path,
    result: RunResult | None,
    meta: Mapping[str, Any],
    *,
    cube: Cube | None = None,
    gate: GateDocument | None = None,
    policy_file: Path | None = None,
    ahead: GradedAhead | None = None,
) -> tuple[list[Path], str | None]:
    """Write the run directory and its report, then seal it (rundir/seal.py: manifest.json,
    signed with MEDRCUBE_SIGNING_KEY when set); return (paths written, a warning or None).
    A report that cannot be drawn is a warning: the run's data files are what matter.
    `policy_file` (the gate's thresholds) is copied in, so that the policy is on record;
    `ahead`, results.jsonl's lines and the summary's sums made as the records were graded (Inference.ahead)."""
    import shutil

    from medrcube.report.after_exit import start as start_report
    from medrcube.rundir.files import Landing, atomic_write, write_run_dir
    from medrcube.rundir.jsontext import indented
    from medrcube.rundir.seal import seal_run_dir

    written: list[Path] = []
    # Each file's fsync and rename on the landing's thread while the next is encoded; every
    # one is in place when the block ends, before the seal reads them (rundir/files.Landing).
    with Landing() as landing:
        if result is not None:
            write_run_dir(run_dir, result, meta, landing=landing, ahead=ahead)
            if ahead is not None:
                landing.call(ahead.close)  # its lines are in results.jsonl now; its file freed beside the next files
            written += [run_dir / "results.jsonl", run_dir / "metrics_summary.json", run_dir / "run.json"]
        if gate is not None:
            doc = gate.to_json(where=str(run_dir / "gate.json"))  # checked against its schema
            atomic_write(run_dir / "gate.json", lambda fh: fh.write(indented(doc)),
                         landing=landing)
            written.append(run_dir / "gate.json")
        if policy_file is not None:
            shutil.copyfile(policy_file, run_dir / POLICY_COPY)
            written.append(run_dir / POLICY_COPY)
    # Sealed before the report is drawn: report.html is a view of the sealed files (not
    # sealed itself, rundir/seal.py), drawn after the exit status (report/after_exit.py).
    written.append(seal_run_dir(run_dir, seal_identity(result, meta), landed=landing.landed))
    path, warning = start_report(run_dir, cube=cube)
    if path is not None:
        written.insert(-1, path)
    exit_without_final_collection()
    keep_until_exit(cube, result)
    return written, warning


# The run's data still alive at the process's exit (run/runner.RunResult, cube/item.Cube), held
# weakly until then: a long-lived process that wrote runs keeps none of them (`keep_until_exit`).
# (A list of references: a RunResult is a mutable dataclass, not hashable, so not in a WeakSet.)
_KEPT_AT_EXIT: list[weakref.ref[Any]] = []


def keep_until_exit(*data: Any) -> None:
    """Objects of plain data (a run's records, its cube) that the interpreter's shutdown should not
    free one by one: at the exit, if they are still alive, they join a frozen cycle that nothing
    frees (`exit_without_final_collection`), and the OS takes their memory back at once. At the
    paper's scale the shutdown freed them in about 25 ms of the time after the last answer
    (docs/speed.md). Only data: no file, process or connection, whose freeing would do something."""
    _KEPT_AT_EXIT[:] = [ref for ref in _KEPT_AT_EXIT if ref() is not None]
    _KEPT_AT_EXIT.extend(weakref.ref(obj) for obj in data if obj is not None)


def _freeze_at_exit() -> None:
    import gc

    kept: list[Any] = [obj for ref in _KEPT_AT_EXIT if (obj := ref()) is not None]
    kept.append(kept)  # a cycle: once frozen, the shutdown's collection never looks at it
    gc.freeze()


@functools.cache  # registered once per process
def exit_without_final_collection() -> None:
    """At the process's exit, freeze the garbage collector (gc.freeze) so that the
    interpreter's shutdown does not trace every live object once more: measured at
    0.4-0.5 s of the gate's time from its last answer to its exit status on the bundled
    cube (docs/speed.md). Registered once, with atexit, so it runs only when the
    process really exits (a long-lived process that wrote a run keeps collecting): by then
    every file of the run is written, closed and sealed, and the other atexit handlers
    (logging's flush, pytest's) run as before. Objects still alive are freed by the OS, as
    Python allows for objects alive at exit; nothing of the run depends on them. The data
    given to `keep_until_exit` is not freed one by one either."""
    import atexit

    atexit.register(_freeze_at_exit)


POLICY_COPY = "thresholds.yaml"  # the gate's policy file, as it was, in the run directory


def seal_identity(result: RunResult | None, meta: Mapping[str, Any]) -> dict[str, Any]:
    """What the seal binds besides the files: the policy, the cube, the model, the
    software and the seed (a spec with its credentials cut, never a key)."""
    from medrcube.rundir.files import redact_spec, versions

    info = result.info if result is not None else {}
    policy = meta.get("policy") or {}
    return {
        "run_id": meta.get("run_id"),
        "run_token": (info.get("provenance") or {}).get("run"),
        "policy_digest": policy.get("digest"),
        "policy_profile": policy.get("profile", meta.get("profile")),
        "cube_fingerprint": info.get("cube_fingerprint") or (meta.get("cube") or {}).get("fingerprint"),
        "model": {
            "spec": redact_spec(info.get("model_spec") or meta.get("model")),
            "fingerprint": info.get("model_fingerprint") or meta.get("model_fingerprint"),
            "served": meta.get("served_model") or info.get("served_models"),
            "engine": meta.get("model_engine") or info.get("model_engine"),
            "served_answers": info.get("served_models") or {},  # the model each answer names, per its endpoint
            "served_mismatches": info.get("served_model_mismatches") or {},
        },
        "medrcube_version": versions().get("medrcube"),
        "seed": (meta.get("sampling") or {}).get("seed"),
    }


def warn(message: str | None) -> None:
    if message:
        warnings.warn(f"medrcube: {message}", stacklevel=2)
