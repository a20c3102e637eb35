"""The pump under the runner: a response for every key, through the response store and
the adapter, with no barrier between batches, claims shared with other processes, a
heartbeat, and an early stop when every further request would fail the same way
(run/runner.py's docstring gives the design and its guarantee after a kill).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

from medrcube.models.base import ErrorKind, ModelAdapter, Request, Response
from medrcube.run.signing import NONE
from medrcube.run.store import AskedBy, ResponseStore, owner_is_dead
from medrcube.run.watchdog import STALL_WARN_S, Watchdog

# Errors after which every further request would fail the same way: the run stops.
_STOPS_THE_RUN = (ErrorKind.AUTH, ErrorKind.CIRCUIT_OPEN)
log = logging.getLogger("medrcube.run")
LOOKAHEAD = 32  # requests: about a dozen images of the bundled cube
# Workers started before the others when the adapter can tell that a request is written
# (`request_written`): the first requests are not written a part at a time among 64 others
# (claims, images, connections, ~170 KB bodies), nor read so by the server (Pump._second_wave).
FIRST_WAVE = 4
FIRST_WAVE_WAIT_S = 0.5  # the others start after this at the latest, written or not
T = TypeVar("T")
R = TypeVar("R")


class PerIteration(Generic[T, R]):
    """`fn` called once per event-loop iteration with everything handed in during it.

    The answers that arrive together (one `select` wakes many connections) are claimed and
    committed in one SQLite transaction instead of one each: each caller awaits the call
    that holds its items, so nothing is done with an answer before its commit returns. The
    call runs shielded: a caller cancelled meanwhile does not undo the others' commit.
    """

    def __init__(self, fn: Callable[[list[T]], R]) -> None:
        self.fn = fn
        self._items: list[T] = []
        self._due: asyncio.Future[R] | None = None

    async def __call__(self, items: Iterable[T]) -> R:
        self._items.extend(items)
        if self._due is None:
            loop = asyncio.get_running_loop()
            self._due = loop.create_future()
            loop.call_soon(self._run)  # after the callbacks already ready: the rest of the group
        return await asyncio.shield(self._due)

    def _run(self) -> None:
        items, due = self._items, self._due
        self._items, self._due = [], None
        assert due is not None
        try:
            result = self.fn(items)
        except Exception as exc:  # every caller of this group sees the failure
            due.set_exception(exc)
        else:
            due.set_result(result)


class Lookahead:
    """Hands the adapter's `prefetch` (optional: models/images.py `ImageCache.prefetch`)
    the requests that come next in the queue's order, a window at a time: once fewer than
    `window` handed requests are left untaken, the next ones up to two windows ahead. A
    key put back in the queue later (another process gave it up) is not handed again."""

    def __init__(self, order: Sequence[Request], hook: Callable[[Sequence[Request]], None] | None, window: int) -> None:
        self.order, self.hook, self.window = list(order), hook, max(1, window)
        self.taken = self.handed = 0

    def extend(self, more: Sequence[Request]) -> None:
        """Requests queued after the first (a plan fed in chunks: Pump.run's `more`)."""
        self.order.extend(more)

    def took(self, n: int) -> None:
        self.taken += n
        if self.hook is None or self.handed - self.taken >= self.window or self.handed >= len(self.order):
            return
        upto = min(len(self.order), self.taken + 2 * self.window)
        self.hook(self.order[self.handed:upto])
        self.handed = upto


class Pump:
    """Gets a response for every key, through the store and the adapter (run/runner.py's docstring says how and why)."""

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
        stall_warn_s: float = STALL_WARN_S,
        on_stall: Callable[[str], None] | None = None,
        asked_by: AskedBy,
        only_run: str | None = None,
    ):
        self.adapter = adapter
        self.store = store
        self.owner = owner
        self.concurrency = max(1, int(concurrency))
        self.batch_size = max(1, int(adapter.batch_size or 1))
        self.newer_than = newer_than
        self.claim_ttl_s = claim_ttl_s
        self.on_done = on_done
        self.asked_by = asked_by  # the provenance this run's own answers are stored with
        self.only_run = only_run  # --fresh: only this run's stored answers count
        self.origins: dict[str, tuple[str | None, str]] = {}  # key -> (run that asked it, who signed it)
        self.requests_sent = 0
        self.cache_hits = 0
        self.aborted: str | None = None
        self.aborted_kind = ErrorKind.AUTH
        self.watchdog = Watchdog(getattr(adapter, "spec", "the model"), lambda: self.remaining, stall_s=stall_warn_s,
                                 say=on_stall)

    async def run(self, requests: Mapping[str, Request], more: Iterator[Mapping[str, Request]] | None = None,
                  at_most: int = 0) -> dict[str, tuple[Response, bool]]:
        """A response for every key of `requests`, and of each mapping `more` yields: the
        rest of a plan made while the first requests are out (run/plan.py `plan_in_chunks`).
        `more` is advanced on the event loop, one chunk between two turns of the loop, so a
        chunk is planned while the requests before it are in flight; `at_most`, how many
        requests the chunks can hold in all (the plan's asks), bounds the workers started."""
        if more is not None and at_most < len(requests):
            raise ValueError(f"Pump.run: `at_most` ({at_most}) must count every request of the plan, "
                             f"at least the {len(requests)} given first, when `more` feeds the rest")
        self.requests = dict(requests)
        self.results: dict[str, tuple[Response, bool]] = {}
        if not self.requests and more is None:
            return self.results
        # While `more` can still yield, the run is not done: one hold, released by the feeder.
        self.remaining = len(self.requests) + (more is not None)
        self.feeding = more is not None
        self._ran_low = asyncio.Event()
        self._first_result = asyncio.Event()
        self.all_done = asyncio.Event()
        if self.store is not None:
            self._take_stored(self.requests)
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        pending = [key for key in self.requests if key not in self.results]
        for key in pending:
            self.queue.put_nowait(key)
        # At least LOOKAHEAD requests a window: a burst of a few images is what saves (Lookahead).
        self.lookahead = Lookahead([self.requests[k] for k in pending], getattr(self.adapter, "prefetch", None),
                                   max(min(self.concurrency, len(pending)), LOOKAHEAD))
        self.waiting: set[str] = set()
        self.wake_waiter = asyncio.Event()
        self.in_flight = 0
        if self.remaining == 0:
            return self.results
        if self.store is not None:
            store = self.store
            self._claim: PerIteration[str, set[str]] = PerIteration(lambda keys: store.claim_many(
                keys, self.owner, self.claim_ttl_s, newer_than=self.newer_than, run=self.only_run))
            self._commit: PerIteration[tuple[str, Response | None], set[str]] = PerIteration(self._put_and_claim)
        # No more workers than batches to ask: `concurrency` is a ceiling on the work in
        # flight, not a number of tasks to start (a huge setting costs nothing).
        workers = max(1, min(self.concurrency, -(-(at_most if more is not None else len(pending)) // self.batch_size)))
        first = workers if getattr(self.adapter, "request_written", None) is None else min(workers, FIRST_WAVE)
        tasks = [asyncio.create_task(self._worker(), name=f"medrcube-worker-{i}") for i in range(first)]
        if first < workers:
            tasks.append(asyncio.create_task(self._second_wave(first, workers), name="medrcube-second-wave"))
        if more is not None:
            self._low_water = 2 * workers * self.batch_size
            tasks.append(asyncio.create_task(self._feed(more), name="medrcube-feeder"))
        tasks.append(asyncio.create_task(self.watchdog.watch(), name="medrcube-watchdog"))
        if self.store is not None:
            tasks.append(asyncio.create_task(self._waiter(), name="medrcube-waiter"))
            tasks.append(asyncio.create_task(self._heartbeat(), name="medrcube-heartbeat"))
        done_task = asyncio.create_task(self.all_done.wait())
        # Every task runs until the run is done, but the feeder, which ends once it has queued the plan.
        watched = {done_task, *tasks}
        try:
            while True:
                finished, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
                for t in tasks:
                    if t.done() and t.cancelled():
                        # Nothing here cancels a worker (the breaker withdraws its own cancellation):
                        # one that ended so would leave its requests unasked and uncounted.
                        raise RuntimeError(f"{t.get_name()} was cancelled before the run ended, with "
                                           f"{self.remaining} requests not completed; the answers stored "
                                           "so far are kept and a rerun resumes from them")
                    if t.done() and (exc := t.exception()) is not None:
                        raise exc
                if done_task in finished or self.all_done.is_set():
                    break
                watched -= finished
        finally:
            for task in (*tasks, done_task):
                task.cancel()
            await asyncio.gather(*tasks, done_task, return_exceptions=True)
        return self.results

    async def _feed(self, more: Iterator[Mapping[str, Request]]) -> None:
        """Queue each further chunk as it is made; then release the run's hold.

        A chunk is made once the queue runs low and an answer is in, or at once when the
        queue is empty (a worker would wait for it). A request takes several turns of the
        loop to go out (claim, image, connect, write), and a chunk planned at each of them
        held the first requests back by a third of a second; one planned before any answer
        came back (the queue below the low-water mark as soon as the workers took their
        first batches) was still planned before the first request was out."""
        while True:
            while self.aborted is None and self.queue.qsize() and (
                    self.queue.qsize() >= self._low_water or not self.results):
                self._ran_low.clear()
                await self._ran_low.wait()
            await asyncio.sleep(0)
            chunk = next(more, None)
            if chunk is None:
                break
            new = {k: r for k, r in chunk.items() if k not in self.requests}
            self.requests.update(new)
            self.remaining += len(new)
            if self.store is not None and new:
                self._take_stored(new)
            pending = [k for k in new if k not in self.results]
            for key in pending:
                self.queue.put_nowait(key)
            self.lookahead.extend([new[k] for k in pending])
            self.lookahead.took(0)  # hand the prefetch the new requests if it ran dry
        self.remaining -= 1
        if self.remaining == 0:
            self.all_done.set()

    async def _second_wave(self, start: int, workers: int) -> None:
        """Start workers `start` to `workers` once the adapter has written a request of the
        first wave, a response is in (stored, answered or failed) or FIRST_WAVE_WAIT_S has
        passed; then run them until the run is done (an exception of one is this task's)."""

        async def written() -> None:
            try:
                await self.adapter.request_written()  # type: ignore[attr-defined]  # checked by run
            except Exception:  # noqa: BLE001, S110 - a response or the wait starts the others
                await asyncio.Event().wait()

        waits = [asyncio.create_task(written()), asyncio.create_task(self._first_result.wait())]
        try:
            await asyncio.wait(waits, timeout=FIRST_WAVE_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        rest = [asyncio.create_task(self._worker(), name=f"medrcube-worker-{i}") for i in range(start, workers)]
        try:
            await asyncio.gather(*rest)
        finally:
            for t in rest:
                t.cancel()

    def _take_stored(self, keys: Iterable[str]) -> set[str]:
        """Complete the keys whose answer is stored (and verifies); return them."""
        assert self.store is not None
        found = self.store.get_stored(keys, newer_than=self.newer_than, run=self.only_run)
        for key, stored in found.items():
            self.origins.setdefault(key, (stored.provenance.run, stored.provenance.signer))
            self._complete(key, stored.response, True)
        return set(found)

    def _complete(self, key: str, response: Response, cached: bool) -> None:
        if key in self.results:
            return
        if response.ok:  # an answer's origin: a failed or unasked request came from no run
            self.origins.setdefault(key, (self.asked_by.run, self.store.signer.who if self.store is not None else NONE))
        self.results[key] = (response, cached)
        self._first_result.set()
        if len(self.results) == 1 and self.feeding:
            self._ran_low.set()  # the feeder waits for a first answer (_feed)
        if cached:
            self.cache_hits += 1
        self.remaining -= 1
        self.watchdog.progressed()
        self.on_done(key, response, cached)
        if self.remaining == 0:
            self.all_done.set()

    def _put_and_claim(self, entries: list[tuple[str, Response | None]]) -> set[str]:
        """One transaction for an iteration's answers (key, response) and the keys their
        workers ask next (key, None): the keys won."""
        assert self.store is not None
        answers = [(k, r) for k, r in entries if r is not None]
        keys = [k for k, r in entries if r is None]
        return self.store.put_and_claim_many(
            answers, keys, self.owner, self.claim_ttl_s, model=self.adapter.fingerprint, asked_by=self.asked_by,
            newer_than=self.newer_than, run=self.only_run)

    def _take_next(self) -> list[str]:
        """The next batch if one is queued now, else [] (never waits)."""
        try:
            first = self.queue.get_nowait()
        except asyncio.QueueEmpty:
            return []
        return [k for k in self._take_batch(first) if k not in self.results]

    def _take_batch(self, first: str) -> list[str]:
        batch = [first]
        while len(batch) < self.batch_size:
            try:
                batch.append(self.queue.get_nowait())
            except asyncio.QueueEmpty:
                break
        self.lookahead.took(len(batch))
        if self.feeding and self.queue.qsize() < self._low_water:
            self._ran_low.set()
        return batch

    async def _worker(self) -> None:
        store = self.store
        batch: list[str] = []
        claimed: set[str] | None = None  # won for `batch` with the last commit: asked without a claim of its own
        while True:
            if claimed is None:
                batch = self._take_batch(await self.queue.get())
            batch = [k for k in batch if k not in self.results]
            if self.aborted is not None:
                for key in batch:
                    self._complete(key, self._not_asked(), False)
                claimed = None
                continue
            if store is not None and batch:
                # One transaction for the batches of this iteration (or the one that
                # committed this worker's last answers).
                won = claimed if claimed is not None else await self._claim(batch)
                lost = [k for k in batch if k not in won]
                if lost:
                    # Answered meanwhile (read it), or being asked by another process (wait).
                    found = self._take_stored(lost)
                    self.waiting.update(k for k in lost if k not in found)
                    self.wake_waiter.set()
                batch = [k for k in batch if k in won]
            claimed = None
            if not batch:
                continue
            responses = await self._generate([self.requests[k] for k in batch])
            self.requests_sent += sum(1 for r in responses if not r.not_sent)  # as the usage meter counts
            asked = batch
            if store is not None:
                # Committed before anything else happens to these responses (with the others
                # that came back in the same loop iteration, in one transaction): see the
                # runner's docstring for the guarantee this gives after a SIGKILL. The
                # claim of this worker's next batch, if one is queued, goes in the same
                # transaction: one commit per answer instead of two.
                following = self._take_next()
                won_next = await self._commit([*zip(batch, responses, strict=True), *((k, None) for k in following)])
                if following:
                    batch, claimed = following, won_next & set(following)
            for key, response in zip(asked, responses, strict=True):
                if response.error_kind in _STOPS_THE_RUN and self.aborted is None:
                    self.aborted_kind = response.error_kind
                    self.aborted = (f"authentication failed: {response.error}" if response.error_kind is ErrorKind.AUTH
                                    else (response.error or "").removeprefix("not asked again: ").removeprefix("not asked: "))
                    log.error("the run stops early: %s", self.aborted)
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
        # attempts=0: never sent (graded as not asked, tally.NOT_ASKED; not counted as a request)
        return Response(text=None, error=f"not asked: the run stopped early ({self.aborted})",
                        error_kind=self.aborted_kind, attempts=0)

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


__all__ = ["PerIteration", "Pump"]
