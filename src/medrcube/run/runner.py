"""The runner: plan -> (store, model) -> graded records, with no barrier between batches.

Design, and why:

- A pool of `concurrency` workers pulls from one queue, each taking up to
  `adapter.batch_size` asks at a time; a worker that finishes takes the next batch at
  once, so a slow request holds up only its own worker (no barrier between batches).
- Stored responses are looked up in bulk before anything is asked; only misses queue.
- Before asking, a worker claims its keys in the store (one transaction for the batches
  claimed in the same event-loop iteration: run/pump.py's `PerIteration`). A
  key claimed by another live process is not asked here: a waiter polls (with backoff)
  for that process's response and takes the key back only if that process gives it up
  (an error), dies, or lets the claim expire. A heartbeat renews this process's claims
  while its requests are slow.
- Every response is committed to the store as soon as its batch returns, before
  anything else is done with it (one short transaction for the responses that came back
  in the same event-loop iteration: tens of microseconds in WAL; docs/speed.md gives the
  CPU per request). The worker's next batch, when one is queued, is claimed in that same
  transaction (`ResponseStore.put_and_claim_many`): one commit per answer, not two.

Guarantee after a SIGKILL: every response committed before the kill is kept and never
requested again; the requests that were in flight (sent, response not yet committed)
are asked again on resume. That window is the network round trip of the in-flight
requests plus the few microseconds between a response's arrival and its commit; a
response the server has answered but whose commit had not finished is the only kind
that can be requested twice (tests/run/test_runner.py kills a run after K commits while
the next requests hang, and counts exactly one answer per item at the server). Claims
left by the killed process do not hold up the resumed run: a claim whose owner is a dead
process of this host (gone, or a zombie not yet reaped) is freed at once (`owner_is_dead`);
any other is taken over when its expiry (`claim_ttl_s`, renewed by the heartbeat while
the owner lives) passes.

An authentication error, or an endpoint whose circuit breaker opened (models/breaker.py:
a server that died, stalls or throttles past its budget), stops the run early (every
further request would fail the same way): the remaining asks end as errors saying they
were not asked (errors are never stored as answers), so a rerun on the same store asks
exactly the items left unanswered. A run
with no answer for `STALL_WARN_S` says so in the log (run/watchdog.py).
"""

from __future__ import annotations

import array
import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, TypeVar

from medrcube.cube.item import Cube
from medrcube.models.base import ModelAdapter, Request, Response
from medrcube.records import GradedRecord, Outcome, outcome_pairs
from medrcube.run.order import image_runs
from medrcube.run.plan import PlannedAsk, Position, as_variants, plan_asks, plan_in_chunks, planned_count, variant_specs
from medrcube.run.progress import Progress
from medrcube.run.provenance import Origin, new_run_token, provenance_counts, served_mismatches
from medrcube.run.pump import Pump
from medrcube.run.store import (
    AskedBy,
    ResponseStore,
    StoreError,
    StoreTamperedError,
    make_key,
    new_owner,
    owner_is_dead,
)
from medrcube.run.watchdog import STALL_WARN_S

DEFAULT_CLAIM_TTL_S = 60.0
log = logging.getLogger("medrcube.run")


@dataclass(frozen=True)
class Delivery:
    """Where a run's records are among the records handed to `RunOptions.on_graded` (RunResult.delivery):
    the place of the record of the ask of each index (`place_by_ask`), those indices in the records'
    order (`order`: None when they are in it), and the ids of the records handed on, in the order handed."""

    place_by_ask: Sequence[int]
    order: Sequence[int] | None
    ids: array.array[int]

    def places(self) -> Iterator[int]:
        """Each record's place, in the records' order."""
        return iter(self.place_by_ask) if self.order is None else map(self.place_by_ask.__getitem__, self.order)

    @property
    def size(self) -> int:
        """The number of records."""
        return len(self.place_by_ask)


@dataclass
class RunResult:
    """What a run produced: the graded records in plan order and how they were obtained."""

    records: list[GradedRecord]
    requests_sent: int = 0  # requests handed to the model adapter (main asks)
    cache_hits: int = 0  # asks answered from the store (this or another process's)
    errors: int = 0  # records with outcome ERROR
    unavailable: int = 0  # records with outcome UNAVAILABLE
    wall_s: float = 0.0
    judge_requests: int = 0
    judge_cache_hits: int = 0
    started: float = 0.0  # UNIX times
    finished: float = 0.0
    aborted: str | None = None  # why the run stopped early (an authentication error)
    info: dict[str, Any] = field(default_factory=dict)  # spec, fingerprints, variants, template
    # A list of records and how many of them have each (outcome, cached), counted as they were
    # graded, while each record was fresh in the cache (`outcome_pairs`).
    counted: tuple[list[GradedRecord], Mapping[tuple[Outcome, bool], int]] | None = field(
        default=None, repr=False, compare=False)
    # A list of records, each one's place among the records handed to RunOptions.on_graded (by its
    # ask's index, and those asks' indices in the list's order), and the ids of the records so
    # handed, in that order (`delivery`).
    delivered: tuple[list[GradedRecord], list[int], Sequence[int] | None, array.array[int]] | None = field(
        default=None, repr=False, compare=False)

    @property
    def outcome_pairs(self) -> Mapping[tuple[Outcome, bool], int] | None:
        """How many of `records` have each (outcome, cached), as counted when they were graded: the
        counts above, the merged run's and the run's tally (tally.py) read them instead of passing
        over tens of thousands of records again after the last answer (about 10 ms a pass at the
        paper's scale: docs/speed.md). None (count `records`) unless `records` is the very list they
        were counted on: a result given other records, assigned or by dataclasses.replace, has none."""
        counted = self.counted
        return counted[1] if counted is not None and counted[0] is self.records else None

    @property
    def delivery(self) -> Delivery | None:
        """Where each of `records` is among the records handed to `RunOptions.on_graded` (in the order
        they were handed: as they were graded), and the ids of the records so handed, in that order
        (`Delivery`). A reader of the batches that kept what it made of each in that order (results.jsonl's
        lines: rundir/files.GradedAhead) finds the records' own in the run's order by place, after
        checking that it was handed these very records (their ids, in the same order), instead of
        looking each record up by its identity after the last answer (36,478 lookups, 26-29 ms at the
        paper's scale: docs/speed.md). None unless `records` is the very list the places are of (as
        `outcome_pairs`): a judge's reading (records replaced after they were handed on) has none."""
        delivered = self.delivered
        if delivered is None or delivered[0] is not self.records:
            return None
        return Delivery(*delivered[1:])

    @property
    def asked(self) -> int:
        """Asks that needed a response (everything but unavailable)."""
        return len(self.records) - self.unavailable


class RecordCounts(TypedDict):
    cache_hits: int
    errors: int
    unavailable: int


def record_counts(records: Sequence[GradedRecord],
                  pairs: Mapping[tuple[Outcome, bool], int] | None = None) -> RecordCounts:
    """RunResult's counts that its records decide: answered from the store, errors, unavailable;
    from `pairs` (RunResult.outcome_pairs) when they count these records (records.outcome_pairs)."""
    counted = outcome_pairs(records, pairs)
    return {"cache_hits": sum(n for (_, cached), n in counted.items() if cached),
            "errors": sum(n for (outcome, _), n in counted.items() if outcome is Outcome.ERROR),
            "unavailable": sum(n for (outcome, _), n in counted.items() if outcome is Outcome.UNAVAILABLE)}


GRADE_BATCH = 64  # answers graded together while the requests are out (run_cube_async's `done`)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How a run asks, one value for `run_cube` and `run_cube_async`.

    `variants`: specs such as ("standard", "blind", "shuffled:3") or "standard,blind";
    `store`: a ResponseStore (None: nothing is cached); `judge`: an adapter that resolves
    unparsed responses; `concurrency`: workers in flight (default adapter.concurrency);
    `refresh`: ignore (and overwrite) stored responses; `fresh`: take only the answers this
    run (`run_token`, shared by the xdist workers of one gate run) asked, never another
    run's, and record `run_token` and `endpoint` as the provenance of what it stores;
    `params`: generation parameters
    sent with every request (part of the store key); `progress`: a progress bar (True) or
    a Progress to advance; `close_adapters`: aclose the adapters at the end, inside the
    run's event loop (the CLI does; a caller that reuses an adapter does not);
    `stall_warn_s`: seconds without an answer before the log says the run is stuck;
    `order`: the order requests are sent in, "image" (the questions of one image back to
    back across the variants, so that it is prepared once: run/order.py `image_runs`) or
    "plan" (the plan's order: variant by variant). `on_graded`: called with each batch of
    records as it is graded, on the run's event loop (rundir/files.GradedAhead.add).
    Records come back in plan order either way."""

    variants: str | Iterable[Any] = ("standard",)
    store: ResponseStore | None = None
    judge: ModelAdapter | None = None
    concurrency: int | None = None
    refresh: bool = False
    template: str = "default"
    progress: bool | Progress = False
    params: Mapping[str, Any] | None = None
    claim_ttl_s: float = DEFAULT_CLAIM_TTL_S
    close_adapters: bool = False
    stall_warn_s: float = STALL_WARN_S
    run_token: str | None = None  # None: a new one (run/provenance.py)
    endpoint: str | None = None
    fresh: bool = False
    order: str = "image"
    on_graded: Callable[[Sequence[GradedRecord]], None] | None = None

    @classmethod
    def of(cls, options: RunOptions | None, fields: Mapping[str, Any]) -> RunOptions:
        """`options` with keyword `fields` laid over it (an unknown field is a TypeError)."""
        if options is None:
            return cls(**fields)
        return replace(options, **fields) if fields else options


async def run_cube_async(
    cube: Cube, adapter: ModelAdapter, options: RunOptions | None = None, /, **fields: Any
) -> RunResult:
    """The async core of `run_cube` (same arguments); for callers with an event loop."""
    opts = RunOptions.of(options, fields)
    variants, store, judge, concurrency = opts.variants, opts.store, opts.judge, opts.concurrency
    refresh, template, progress, params = opts.refresh, opts.template, opts.progress, opts.params
    claim_ttl_s, close_adapters = opts.claim_ttl_s, opts.close_adapters
    started, t0 = time.time(), time.perf_counter()
    variant_objs = as_variants(variants)
    # Planned a chunk at a time while the first requests are out, unless the order is the
    # plan's own or a perturbed image must first be made for the whole plan.
    chunked = opts.order == "image" and not any(v.perturbation is not None for v in variant_objs)
    if opts.order not in ("image", "plan"):
        raise ValueError(f"RunOptions.order is {opts.order!r}; choices: image, plan")
    chunks: Iterator[list[tuple[Position, PlannedAsk]]]
    if chunked:
        # The first chunk fills the workers twice over (in asks: the variants multiply an item's
        # asks); the next ones are small (a few ms each), made once the first answers are in.
        total = planned_count(cube, variant_objs)
        asks = 2 * min(concurrency or adapter.concurrency or 1, total)
        first_items = max(32, -(-asks * len(cube.items) // max(total, 1)))
        chunks = plan_in_chunks(cube, variant_objs, fingerprint=adapter.fingerprint, params=params, template=template,
                                keyed_by_item=adapter.keyed_by_item, first=first_items, size=64)
    else:
        whole = plan_asks(
            cube,
            variant_objs,
            fingerprint=adapter.fingerprint,
            params=params,
            template=template,
            keyed_by_item=adapter.keyed_by_item,
            # Perturbed images are made no larger than the model is sent (hf: image_max_side).
            image_max_side=adapter.image_max_side or None,
        )
        chunks = iter([[((0, i, 0), ask) for i, ask in enumerate(whole)]])
        total = len(whole)
    owner = new_owner()
    newer_than = started if refresh else None
    token = opts.run_token or new_run_token()
    asked_by, only_run = AskedBy(token, opts.endpoint), token if opts.fresh else None
    bar = progress if isinstance(progress, Progress) else Progress(total=total, enabled=progress, desc=adapter.spec)
    bar.begin(total)  # a caller's Progress (the gate's live line) learns this pass's size

    # The asks in the order they were planned (chunks); `positions` sorts them into plan order at the end.
    plan: list[PlannedAsk] = []
    positions: list[Position] = []
    by_key: dict[str, list[int]] = {}
    records: list[GradedRecord | None] = []
    # Each ask's record's place among the records handed to on_graded, and those records' ids in that
    # order (RunResult.delivery): noted as each batch is handed on.
    handed_at: list[int] = []
    handed_ids: array.array[int] = array.array("q")

    def take(chunk: list[tuple[Position, PlannedAsk]]) -> dict[str, Request]:
        """A chunk's asks recorded; its new requests, in the order they are sent."""
        new: dict[str, Request] = {}
        n_unavailable = 0
        for position, ask in chunk:
            i = len(plan)
            plan.append(ask)
            positions.append(position)
            records.append(None)
            handed_at.append(-1)
            if not ask.available:  # its record is made with the next batch graded (grade_ungraded)
                unasked.append(i)
                n_unavailable += 1
            elif ask.key in by_key:
                by_key[ask.key].append(i)
                if ask.key in answered:  # the same request for an earlier item, already answered
                    count_origin(ask.key, 1)
                    answer((i,), *answered[ask.key])
            else:
                by_key[ask.key] = [i]
                new[ask.key] = ask.request()
        bar.advance(n_unavailable, unavailable=True)
        if opts.order == "image":
            keys = list(new)
            sent = [(plan[by_key[k][0]].variant, new[k].images[0].digest if new[k].images else None) for k in keys]
            new = {keys[i]: new[keys[i]] for i in image_runs(sent)}
        return new

    served: Counter[str] = Counter()  # the model each answer names, as its endpoint said

    # Answers are graded while the other requests are out, not all after the last (a tail
    # of ~1 s of CPU on 32,606 records), GRADE_BATCH at a time: one answer graded after
    # each idle wait cost five times the CPU of the same grading done in a row (caches gone
    # cold between answers; docs/speed.md). Grading (its answer extraction: a few dozen ms
    # of imports and regexes) is imported at the first batch, not before the first
    # request; run/metering.warm_after_answers loads it meanwhile.
    ungraded: list[tuple[int, Response, bool]] = []  # (the ask's index, its answer, from the store)
    # Asks without their image (never sent): their records too are made with the next batch,
    # so that neither grading's import nor the results' lines come before the first request.
    unasked: list[int] = []
    # Each record's (outcome, cached) counted as it is made (RunResult.outcome_pairs).
    graded_pairs: Counter[tuple[Outcome, bool]] = Counter()

    def grade_ungraded() -> None:
        from medrcube.run.grade import grade, unavailable

        graded: list[GradedRecord] = []
        for i in unasked:
            records[i] = record = unavailable(plan[i])
            handed_at[i] = len(handed_ids) + len(graded)
            graded.append(record)
        unasked.clear()
        for i, response, cached in ungraded:
            records[i] = record = grade(plan[i], response, cached=cached)
            handed_at[i] = len(handed_ids) + len(graded)
            graded.append(record)
        ungraded.clear()
        graded_pairs.update(outcome_pairs(graded))  # the batch, still in the cache
        if opts.on_graded is not None and graded:
            handed_ids.extend(map(id, graded))
            opts.on_graded(graded)

    answered: dict[str, tuple[Response, bool]] = {}
    # The provenance block's counts, per graded ask of an answer with an origin (the pump notes
    # an answer's origin before it hands the answer over), counted as they come in: walking
    # every key after the last answer took 36 ms at paper scale (docs/speed.md, "Seventh pass").
    origin_counts: Counter[Origin] = Counter()

    def count_origin(key: str, asks: int) -> None:
        origin = pump.origins.get(key)
        if origin is not None:
            origin_counts[origin] += asks

    def answer(indices: Sequence[int], response: Response, cached: bool) -> None:
        """Asks answered (their key's answer came in, or it had when they were planned): graded in the next batch."""
        if response.served_model:
            served[response.served_model] += len(indices)
        ungraded.extend((i, response, cached) for i in indices)
        if len(ungraded) >= GRADE_BATCH:
            grade_ungraded()
        bar.advance(len(indices), error=not response.ok, cached=cached, stopped=response.not_sent)

    def done(key: str, response: Response, cached: bool) -> None:
        answered[key] = (response, cached)
        count_origin(key, len(by_key[key]))
        answer(by_key[key], response, cached)

    pump = Pump(
        adapter,
        store,
        owner=owner,
        concurrency=concurrency or adapter.concurrency,
        newer_than=newer_than,
        claim_ttl_s=claim_ttl_s,
        on_done=done,
        stall_warn_s=opts.stall_warn_s,
        on_stall=bar.note,
        asked_by=asked_by,
        only_run=only_run,
    )
    # Once every chunk is planned (the pump asks for one more while the last requests are out), the
    # permutation into plan order is worked out then rather than after the last answer (a sort of 36,478
    # asks at the paper's scale, about 9 ms).
    into_plan_order: list[int] = []

    def fed() -> Iterator[dict[str, Request]]:
        for chunk in chunks:
            yield take(chunk)
        into_plan_order[:] = sorted(range(len(plan)), key=positions.__getitem__)

    judge_pump: Pump | None = None
    try:
        try:
            first = take(next(chunks, []))
            results = await pump.run(first, fed() if chunked else None, at_most=total)
        except StoreTamperedError as e:  # name the items: the store knows only its keys
            asked = pump.requests  # every request handed to the pump, by key
            raise StoreTamperedError(e.path, e.keys, e.why, [asked[k].item_id for k in e.keys if k in asked]) from e
        # The last batch; then, by the same step, any ask whose answer reached neither `done`
        # nor `take` (none is expected: a safety net, as every record must be graded).
        grade_ungraded()
        for i, r in enumerate(records):
            if r is None:
                count_origin(plan[i].key, 1)
                ungraded.append((i, *results[plan[i].key]))
        grade_ungraded()
        order: list[int] | None = None  # the asks' indices in plan order (None: they are in it)
        if chunked:  # into plan order: variant by variant, items in cube order
            order = into_plan_order if len(into_plan_order) == len(plan) else sorted(
                range(len(plan)), key=positions.__getitem__)  # a run stopped before its last chunk
            plan[:] = [plan[i] for i in order]
            records[:] = [records[i] for i in order]
        if judge is not None:
            judge_pump = await _judge_unparsed(
                plan, records, judge, store, owner, newer_than, claim_ttl_s, concurrency, bar, asked_by, only_run
            )
    finally:
        bar.close()
        if store is not None:
            # Best effort: a store that just failed (disk full) must not mask the original
            # error; claims left behind expire, or are freed at once as a dead owner's.
            with contextlib.suppress(StoreError):
                store.release_all(owner)
        if close_adapters:
            await adapter.aclose()
            if judge is not None:
                await judge.aclose()

    final = [r for r in records if r is not None]
    assert len(final) == len(plan)
    finished = time.time()
    # A judge's reading replaces records after they were counted: then they are counted again.
    pairs = dict(graded_pairs) if judge_pump is None else None
    return RunResult(
        records=final,
        requests_sent=pump.requests_sent,
        **record_counts(final, pairs),
        counted=(final, pairs) if pairs is not None else None,
        # The places are of the records handed on: none once a judge replaced some, or when none was handed on.
        delivered=(final, handed_at, order, handed_ids)
        if judge_pump is None and opts.on_graded is not None and len(handed_ids) == len(final) else None,
        wall_s=time.perf_counter() - t0,
        judge_requests=judge_pump.requests_sent if judge_pump else 0,
        judge_cache_hits=judge_pump.cache_hits if judge_pump else 0,
        started=started,
        finished=finished,
        aborted=pump.aborted,
        info={
            "model_spec": adapter.spec,
            "model_fingerprint": adapter.fingerprint,
            "model_engine": dict(adapter.engine) if adapter.engine else None,
            "judge_spec": judge.spec if judge is not None else None,
            "judge_fingerprint": judge.fingerprint if judge is not None else None,
            "cube_source": cube.source,
            "cube_fingerprint": cube.fingerprint,
            "variants": variant_specs(variant_objs),
            "template": template,
            "params": dict(params or {}),
            "refresh": refresh,
            "concurrency": pump.concurrency,
            "batch_size": pump.batch_size,
            "store": str(store.path) if store is not None else None,
            "store_recovered": str(store.recovered) if store is not None and store.recovered else None,
            "served_models": dict(served.most_common()),
            "served_model_mismatches": served_mismatches(adapter, served),
            "fresh": opts.fresh,
            "provenance": provenance_counts(token, origin_counts,
                                            signer=store.signer if store is not None else None,
                                            unsigned_asked_again=len(store.unsigned) if store is not None else 0),
        },
    )


async def _judge_unparsed(
    plan: Sequence[PlannedAsk],
    records: list[GradedRecord | None],
    judge: ModelAdapter,
    store: ResponseStore | None,
    owner: str,
    newer_than: float | None,
    claim_ttl_s: float,
    concurrency: int | None,
    bar: Progress,
    asked_by: AskedBy,
    only_run: str | None,
) -> Pump:
    """Ask the judge about every unparsed record; its responses go through the store too."""
    from medrcube.run.judge import judge_prompt

    todo: dict[str, list[int]] = {}
    requests: dict[str, Request] = {}
    for i, rec in enumerate(records):
        if rec is None or rec.outcome is not Outcome.UNPARSED:
            continue
        ask = plan[i]
        prompt = judge_prompt(ask.item.question, ask.options, rec.response or "")
        key = make_key(judge.fingerprint, prompt, (), {}, "judge", 0)
        todo.setdefault(key, []).append(i)
        requests[key] = Request(
            key=key, item_id=ask.item.id, prompt=prompt, variant="judge", task=ask.item.task, options=ask.options
        )
    pump = Pump(
        judge,
        store,
        owner=owner,
        concurrency=concurrency or judge.concurrency,
        newer_than=newer_than,
        claim_ttl_s=claim_ttl_s,
        on_done=lambda key, response, cached: None,
        asked_by=asked_by,
        only_run=only_run,
    )
    if not requests:
        return pump
    bar.set_description(f"judge {judge.spec}")
    results = await pump.run(requests)
    from medrcube.run.grade import apply_judge

    for key, idx in todo.items():
        response, _ = results[key]
        for i in idx:
            rec = records[i]
            assert rec is not None
            records[i] = apply_judge(rec, response)
    return pump


def run_cube(cube: Cube, adapter: ModelAdapter, options: RunOptions | None = None, /, **fields: Any) -> RunResult:
    """Ask `adapter` every item of `cube` in every variant and grade the answers.

    The options are a `RunOptions`, or its fields as keywords (laid over `options` when
    both are given). Synchronous: it runs its own event loop (on a helper thread when
    called from inside a running loop).
    """
    coro = run_cube_async(cube, adapter, RunOptions.of(options, fields))
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_to_result(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(run_to_result, coro).result()


T = TypeVar("T")


def run_to_result(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)`, its result handed back beside the loop's main task rather than
    as that task's result. On the main thread asyncio.run installs a SIGINT handler that
    holds the main task, and at its end `signal.getsignal` looks that handler up among
    the `Handlers` enum, whose refusal formats the handler, and so the finished task with
    its result, into a message nobody reads: a full repr of a run's result (every record;
    0.3 s of CPU on the 32,606 records of the generated cube, docs/speed.md)."""
    box: list[T] = []

    async def main() -> None:
        box.append(await coro)

    asyncio.run(main())
    return box[0]


__all__ = ["RunOptions", "RunResult", "run_cube", "run_cube_async", "run_to_result", "new_owner", "owner_is_dead", "DEFAULT_CLAIM_TTL_S"]
