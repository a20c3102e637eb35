"""A circuit breaker per endpoint: stop asking a server that no longer answers.

A server that dies, stalls or sheds every request makes each later request fail the same
way; without a breaker, every unasked item still goes through all its retries (a killed
server kept one run going for 35 minutes). The breaker counts failed attempts in a row
(connection failures, timeouts, 5xx, throttling past its budget); once there are at
least `failures` of them AND the endpoint has not answered for `seconds`, it opens: the
adapter sends nothing more, every request waiting or backing off ends at once with the
breaker's message, and the runner stops the run with the items left unasked (a rerun on
the same store asks exactly those).

Both conditions are needed, and why: a count alone trips on a brief blip (a server
restarted in a second fails dozens of quick retries); a time alone trips on one slow
item. Any answer (a completion, or an HTTP 4xx that proves the server is up) closes the
streak. Pure asyncio; one breaker per adapter, and an adapter talks to one endpoint.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from typing import TypeVar

__all__ = ["BREAKER_FAILURES", "BREAKER_SECONDS", "CircuitBreaker"]

# Defaults: with 16 requests in flight and the default backoff, a dead server is
# recognised about `BREAKER_SECONDS` after its last answer.
BREAKER_FAILURES = 10
BREAKER_SECONDS = 10.0
T = TypeVar("T")


class CircuitBreaker:
    """Consecutive failures of one endpoint; `open` once both bounds are passed."""

    def __init__(self, where: str, *, failures: int = BREAKER_FAILURES, seconds: float = BREAKER_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if failures < 1:
            raise ValueError(f"breaker_failures must be >= 1, not {failures}")
        if seconds < 0:
            raise ValueError(f"breaker_seconds must be >= 0, not {seconds}")
        self.where = where
        self.failures = int(failures)
        self.seconds = float(seconds)
        self._clock = clock
        self._last_answer = clock()  # creation counts as an answer: the pre-flight just reached it
        self.streak = 0
        self.causes: Counter[str] = Counter()  # the streak's failures by label ("connection", "503")
        self.message: str | None = None  # set when the breaker opens
        self._opened: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._racing: dict[asyncio.Task[object], bool] = {}  # tasks in `race` -> cancelled by the breaker

    @property
    def open(self) -> bool:
        return self.message is not None

    def answered(self) -> None:
        """The endpoint answered (anything but a failure counted below): the streak ends."""
        self._last_answer = self._clock()
        self.streak = 0
        self.causes.clear()

    def failed(self, label: str, detail: str) -> None:
        """One failed attempt (`label`: its short cause; `detail`: the adapter's message)."""
        if self.open:
            return
        self.streak += 1
        self.causes[label] += 1
        silent = self._clock() - self._last_answer
        if self.streak >= self.failures and silent >= self.seconds:
            tally = ", ".join(f"{k} x{n}" for k, n in self.causes.most_common())
            self.message = (
                f"circuit open for {self.where}: {self.streak} failed attempts in a row ({tally}) and no answer "
                f"for {silent:.0f}s; stopped asking it (last failure: {detail}). Unasked items stay unasked: "
                f"fix the server and rerun on the same store to ask only those (breaker_failures and "
                f"breaker_seconds in models.yaml set the bounds)")
            if self._opened is not None:
                self._opened.set()
            self._cancel_racing()

    def trip(self, why: str) -> None:
        """Open now: the server said it will not serve us in time (a Retry-After past its cap)."""
        if not self.open:
            self.message = (f"circuit open for {self.where}: {why}; stopped asking it. Unasked items stay "
                            f"unasked: rerun on the same store later to ask only those")
            if self._opened is not None:
                self._opened.set()
            self._cancel_racing()

    def _event(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._opened is None or self._loop is not loop:
            self._opened, self._loop = asyncio.Event(), loop
            if self.open:
                self._opened.set()
        return self._opened

    async def sleep(self, seconds: float) -> bool:
        """Wait `seconds` (a backoff), or less if the breaker opens meanwhile; True when open."""
        event = self._event()
        if not event.is_set():
            try:
                await asyncio.wait_for(event.wait(), timeout=max(0.0, seconds))
            except TimeoutError:
                pass
        return self.open

    async def race(self, work: Awaitable[T]) -> T | None:
        """`work`'s result, or None (and `work` cancelled) if the breaker opens first: a
        request hanging on a stalled server must not hold the run after it is given up.

        `work` runs in the calling task, which the breaker cancels when it opens (as
        `asyncio.timeout` does): no task and no `asyncio.wait` per attempt, which cost more
        CPU than the rest of the attempt's bookkeeping (docs/speed.md). A cancellation that
        is not the breaker's propagates."""
        if self.open:
            if isinstance(work, Coroutine):
                work.close()
            return None
        task = asyncio.current_task()
        if task is None:  # not in a task (a bare coroutine driven by hand): nothing to cancel
            return await work
        self._racing[task] = False
        try:
            result = await work
        except asyncio.CancelledError:
            if self._racing.get(task) and task.uncancel() == 0:
                return None  # the breaker's cancellation, and no one else's
            raise
        finally:
            cancelled_by_us = self._racing.pop(task, False)
        if cancelled_by_us:  # `work` finished despite the cancellation: its result stands
            task.uncancel()
        return result

    def _cancel_racing(self) -> None:
        # The attempt that opens the breaker from inside its own race (vllm_adapter: the
        # engine found dead) is not hanging: it returns its own result. Cancelling it would
        # leave a cancellation pending that `uncancel` does not withdraw before Python 3.13,
        # delivered at the task's next await: the run's worker would end mid-run.
        try:
            current = asyncio.current_task()
        except RuntimeError:  # no running loop
            current = None
        for task, cancelled in list(self._racing.items()):
            if not cancelled and not task.done() and task is not current:
                self._racing[task] = True
                task.cancel()
