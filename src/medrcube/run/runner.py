"""The runner: plan -> (store, model) -> graded records, with no barrier between batches.

Design, and why:

- A pool of `concurrency` workers pulls from one queue, each taking up to
  `adapter.batch_size` asks at a time; a worker that finishes takes the next batch at
  once, so a slow request holds up only its own worker (no barrier between batches).
- Stored responses are looked up in bulk before anything is asked; only misses queue.
- Before asking, a worker claims its keys in the store (one transaction per batch). A
  key claimed by another live process is not asked here: a waiter polls (with backoff)
  for that process's response and takes the key back only if that process gives it up
  (an error), dies, or lets the claim expire. A heartbeat renews this process's claims
  while its requests are slow.
- Every response is committed to the store as soon as its batch returns, before
  anything else is done with it (one short transaction: tens of microseconds in WAL;
  the runner's whole CPU cost, plan to grade, measured ~0.15 ms per request).

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

An authentication error stops the run early (every further request would fail the same
way): the remaining asks end as errors saying they were not asked.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from medrcube.cube.item import Cube
from medrcube.models.base import ErrorKind, ModelAdapter, Request, Response
from medrcube.records import GradedRecord, Outcome
from medrcube.run.grade import apply_judge, grade, unavailable
from medrcube.run.plan import PlannedAsk, as_variants, plan_asks, variant_specs
from medrcube.run.progress import Progress
from medrcube.run.provenance import new_run_token, provenance_counts, served_mismatches
from medrcube.run.store import (
    AskedBy,
    ResponseStore,
    StoreError,
    StoreTamperedError,
    make_key,
    new_owner,
    owner_is_dead,
)

DEFAULT_CLAIM_TTL_S = 60.0
log = logging.getLogger("medrcube.run")


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

    @property
    def asked(self) -> int:
        """Asks that needed a response (everything but unavailable)."""
        return len(self.records) - self.unavailable


class _Pump:
    """Gets a response for every key, through the store and the adapter (module docstring)."""

    def __init__(
        self,
        adapter: ModelAdapter,
        store: ResponseStore | None,
        *,
        owner: str,
        concurrency: int,
        newer_than: float | None,
        claim_ttl_s: float,
        on_done: Callable[[str, Response, bool], None],
        asked_by: AskedBy,
        only_run: str | None = None,
    ):
        self.adapter = adapter
        self.store = store
        self.owner = owner
        self.concurrency = max(1, int(concurrency))
        self.batch_size = max(1, int(getattr(adapter, "batch_size", 1) or 1))
        self.newer_than = newer_than
        self.claim_ttl_s = claim_ttl_s
        self.on_done = on_done
        self.asked_by = asked_by  # the provenance this run's own answers are stored with
        self.only_run = only_run  # --fresh: only this run's stored answers count
        self.origins: dict[str, tuple[str | None, bool]] = {}  # key -> (run that asked it, signed)
        self.requests_sent = 0
        self.cache_hits = 0
        self.aborted: str | None = None

    async def run(self, requests: Mapping[str, Request]) -> dict[str, tuple[Response, bool]]:
        self.requests = dict(requests)
        self.results: dict[str, tuple[Response, bool]] = {}
        if not self.requests:
            return self.results
        self.remaining = len(self.requests)
        self.all_done = asyncio.Event()
        if self.store is not None:
            self._take_stored(self.requests)
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        for key in self.requests:
            if key not in self.results:
                self.queue.put_nowait(key)
        self.waiting: set[str] = set()
        self.wake_waiter = asyncio.Event()
        self.in_flight = 0
        if self.remaining == 0:
            return self.results
        tasks = [asyncio.create_task(self._worker(), name=f"medrcube-worker-{i}") for i in range(self.concurrency)]
        if self.store is not None:
            tasks.append(asyncio.create_task(self._waiter(), name="medrcube-waiter"))
            tasks.append(asyncio.create_task(self._heartbeat(), name="medrcube-heartbeat"))
        done_task = asyncio.create_task(self.all_done.wait())
        try:
            await asyncio.wait([done_task, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for t in tasks:
                if t.done() and not t.cancelled() and (exc := t.exception()) is not None:
                    raise exc
        finally:
            for task in (*tasks, done_task):
                task.cancel()
            await asyncio.gather(*tasks, done_task, return_exceptions=True)
        return self.results

    def _take_stored(self, keys: Iterable[str]) -> set[str]:
        """Complete the keys whose answer is stored (and verifies); return them."""
        assert self.store is not None
        found = self.store.get_stored(keys, newer_than=self.newer_than, run=self.only_run)
        for key, stored in found.items():
            self.origins.setdefault(key, (stored.provenance.run, stored.provenance.signed))
            self._complete(key, stored.response, True)
        return set(found)

    def _complete(self, key: str, response: Response, cached: bool) -> None:
        if key in self.results:
            return
        self.origins.setdefault(key, (self.asked_by.run, self.store is not None and self.store.signing_key is not None))
        self.results[key] = (response, cached)
        if cached:
            self.cache_hits += 1
        self.remaining -= 1
        self.on_done(key, response, cached)
        if self.remaining == 0:
            self.all_done.set()

    def _take_batch(self, first: str) -> list[str]:
        batch = [first]
        while len(batch) < self.batch_size:
            try:
                batch.append(self.queue.get_nowait())
            except asyncio.QueueEmpty:
                break
        return batch

    async def _worker(self) -> None:
        store = self.store
        while True:
            batch = self._take_batch(await self.queue.get())
            batch = [k for k in batch if k not in self.results]
            if self.aborted is not None:
                for key in batch:
                    self._complete(key, self._not_asked(), False)
                continue
            if store is not None and batch:
                won = store.claim_many(batch, self.owner, self.claim_ttl_s, newer_than=self.newer_than,
                                       run=self.only_run)
                lost = [k for k in batch if k not in won]
                if lost:
                    # Answered meanwhile (read it), or being asked by another process (wait).
                    found = self._take_stored(lost)
                    self.waiting.update(k for k in lost if k not in found)
                    self.wake_waiter.set()
                batch = [k for k in batch if k in won]
            if not batch:
                continue
            responses = await self._generate([self.requests[k] for k in batch])
            self.requests_sent += len(batch)
            if store is not None:
                # Committed before anything else happens to these responses: see the
                # module docstring for the guarantee this gives after a SIGKILL.
                store.put_many(list(zip(batch, responses, strict=True)), model=self.adapter.fingerprint, owner=self.owner,
                               asked_by=self.asked_by)
            for key, response in zip(batch, responses, strict=True):
                if response.error_kind is ErrorKind.AUTH and self.aborted is None:
                    self.aborted = f"authentication failed: {response.error}"
                self._complete(key, response, False)

    async def _generate(self, requests: Sequence[Request]) -> list[Response]:
        self.in_flight += len(requests)
        try:
            responses = await self.adapter.generate(requests)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an adapter bug must not lose the whole run
            message = f"the model adapter raised {type(exc).__name__}: {exc}"
            return [Response(text=None, error=message, error_kind=ErrorKind.INTERNAL) for _ in requests]
        finally:
            self.in_flight -= len(requests)
        if not isinstance(responses, list) or len(responses) != len(requests):
            got = len(responses) if isinstance(responses, list) else type(responses).__name__
            message = f"the model adapter returned {got} responses for {len(requests)} requests"
            return [Response(text=None, error=message, error_kind=ErrorKind.INTERNAL) for _ in requests]
        return responses

    def _not_asked(self) -> Response:
        return Response(text=None, error=f"not asked: the run stopped early ({self.aborted})", error_kind=ErrorKind.AUTH)

    async def _waiter(self) -> None:
        """Wait for keys another process is asking; take back those whose claim expired."""
        assert self.store is not None
        delay = 0.02
        while True:
            if not self.waiting:
                self.wake_waiter.clear()
                await self.wake_waiter.wait()
                delay = 0.02
            await asyncio.sleep(delay)
            keys = [k for k in self.waiting if k not in self.results]
            found = self._take_stored(keys)
            self.waiting.difference_update(found)
            rest = [k for k in keys if k not in found]
            if rest:
                for other in set(self.store.claim_owners(rest).values()):
                    if other != self.owner and owner_is_dead(other):
                        self.store.release_all(other)
            for key in self.store.unclaimed(rest) if rest else ():
                # The other process gave up (an error) or died: ask it ourselves.
                self.waiting.discard(key)
                self.queue.put_nowait(key)
            self.waiting.difference_update(k for k in keys if k in self.results)
            delay = 0.02 if found else min(delay * 1.5, 1.0)

    async def _heartbeat(self) -> None:
        assert self.store is not None
        while True:
            await asyncio.sleep(self.claim_ttl_s / 4)
            if self.in_flight:
                self.store.renew(self.owner, self.claim_ttl_s)


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
    run's event loop (the CLI does; a caller that reuses an adapter does not)."""

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
    run_token: str | None = None  # None: a new one (run/provenance.py)
    endpoint: str | None = None
    fresh: bool = False

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
    plan = plan_asks(
        cube,
        variant_objs,
        fingerprint=adapter.fingerprint,
        params=params,
        template=template,
        keyed_by_item=getattr(adapter, "keyed_by_item", False),
        # Perturbed images are made no larger than the model is sent (hf: image_max_side).
        image_max_side=getattr(adapter, "image_max_side", None) or None,
    )
    owner = new_owner()
    newer_than = started if refresh else None
    token = opts.run_token or new_run_token()
    asked_by, only_run = AskedBy(token, opts.endpoint), token if opts.fresh else None
    bar = progress if isinstance(progress, Progress) else Progress(total=len(plan), enabled=progress, desc=adapter.spec)
    bar.begin(len(plan))  # a caller's Progress (the gate's live line) learns this pass's size

    by_key: dict[str, list[int]] = {}
    records: list[GradedRecord | None] = [None] * len(plan)
    for i, ask in enumerate(plan):
        if ask.available:
            by_key.setdefault(ask.key, []).append(i)
        else:
            records[i] = unavailable(ask)
    n_unavailable = len(plan) - sum(len(v) for v in by_key.values())
    bar.advance(n_unavailable)

    served: Counter[str] = Counter()  # the model each answer names, as its endpoint said

    def done(key: str, response: Response, cached: bool) -> None:
        n = len(by_key[key])
        if response.served_model:
            served[response.served_model] += n
        bar.advance(n, error=not response.ok, cached=cached)

    pump = _Pump(
        adapter,
        store,
        owner=owner,
        concurrency=concurrency or adapter.concurrency,
        newer_than=newer_than,
        claim_ttl_s=claim_ttl_s,
        on_done=done,
        asked_by=asked_by,
        only_run=only_run,
    )
    judge_pump: _Pump | None = None
    requests = {key: plan[idx[0]].request() for key, idx in by_key.items()}
    try:
        try:
            results = await pump.run(requests)
        except StoreTamperedError as e:  # name the items: the store knows only its keys
            raise StoreTamperedError(e.path, e.keys, e.why, [requests[k].item_id for k in e.keys if k in requests]) from e
        for key, idx in by_key.items():
            response, cached = results[key]
            for i in idx:
                records[i] = grade(plan[i], response, cached=cached)
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
    return RunResult(
        records=final,
        requests_sent=pump.requests_sent,
        cache_hits=sum(1 for r in final if r.cached),
        errors=sum(1 for r in final if r.outcome is Outcome.ERROR),
        unavailable=n_unavailable,
        wall_s=time.perf_counter() - t0,
        judge_requests=judge_pump.requests_sent if judge_pump else 0,
        judge_cache_hits=judge_pump.cache_hits if judge_pump else 0,
        started=started,
        finished=finished,
        aborted=pump.aborted,
        info={
            "model_spec": adapter.spec,
            "model_fingerprint": adapter.fingerprint,
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
            "provenance": provenance_counts(token, (pump.origins[k] for k, idx in by_key.items() for _ in idx),
                                            signing=store is not None and store.signing_key is not None),
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
) -> _Pump:
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
    pump = _Pump(
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
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


__all__ = ["RunOptions", "RunResult", "run_cube", "run_cube_async", "new_owner", "owner_is_dead", "DEFAULT_CLAIM_TTL_S"]
