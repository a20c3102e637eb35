"""How many requests an endpoint gets at once: a limit that adapts to a server that slows.

A local server with one inference thread (`transformers serve`, a small vLLM) answers
the requests in flight one after another: 16 at once only make each wait 16 times as
long, and past the client's timeout every one of them fails and is asked again, so the
server never catches up. `AdaptiveLimit` keeps the configured `concurrency` as a ceiling
and moves the limit the way TCP moves its window (additive increase, multiplicative
decrease):

- a timeout halves the limit (at least 1);
- a latency grown past `SLOW_FACTOR` times the fastest seen (and above `SLOW_FLOOR_S`,
  so that millisecond jitter of a fast server never counts) takes a quarter off. The
  latency judged is the server's share: what the client itself was late by while the
  request was out (its event loop kept from running by a busy CPU, another thread holding
  the interpreter, its own work on other answers) is taken off first, as `LoopLag`
  measures it, so that a busy machine never passes for a slow server;
- `limit` answers in a row at normal latency give one slot back, up to the ceiling.

A decrease happens at most once per `cooldown_s`, since the requests already in flight
report the same slowness. Pure asyncio, one per event loop (the adapter's `_LoopState`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

__all__ = ["AdaptiveLimit", "LoopLag"]

log = logging.getLogger("medrcube.models.concurrency")

SLOW_FACTOR = 4.0
SLOW_FLOOR_S = 1.0
EWMA_WEIGHT = 0.2
PROBE_S = 0.1  # how often LoopLag's timer is due
LAG_KEPT = 256  # the lateness samples kept (25 s at PROBE_S when the loop is on time)


class LoopLag:
    """How late this event loop runs: a timer due every `PROBE_S` notes by how much it fired
    late. A request sent at `t` and answered now was delayed on the client's side by at most
    the largest lateness noted since `t` (an answer that arrived while the loop could not run
    waited as long as the timer did). Started by the first `AdaptiveLimit.slot`; one timer
    wake-up per `PROBE_S` while the loop runs, none after it closes."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._samples: list[tuple[float, float]] = []  # (when it fired, how late), oldest first
        self._due: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        self._loop = loop
        self._arm()

    def _arm(self) -> None:
        assert self._loop is not None
        self._due = self._clock() + PROBE_S
        self._loop.call_later(PROBE_S, self._fired)

    def _fired(self) -> None:
        now = self._clock()
        late = max(0.0, now - self._due) if self._due is not None else 0.0
        self._samples.append((now, late))
        if len(self._samples) > LAG_KEPT:
            del self._samples[: len(self._samples) - LAG_KEPT]
        if self._loop is not None and not self._loop.is_closed():
            self._arm()

    def delay_since(self, t: float) -> float:
        """The client's own delay since `t`: the largest lateness noted since, or by which
        the pending timer is overdue now."""
        worst = max(0.0, self._clock() - self._due) if self._due is not None else 0.0
        for when, late in reversed(self._samples):
            if when < t:
                break
            worst = max(worst, late)
        return worst


class AdaptiveLimit:
    """A semaphore whose size moves between 1 and `ceiling` (see the module docstring)."""

    def __init__(self, ceiling: int, *, where: str = "", cooldown_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if ceiling < 1:
            raise ValueError(f"concurrency must be >= 1, not {ceiling}")
        self.ceiling = int(ceiling)
        self.limit = int(ceiling)
        self.where = where
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._in_use = 0
        self._cond = asyncio.Condition()
        self._fastest: float | None = None
        self._ewma: float | None = None
        self._good = 0
        self._last_cut = -math.inf
        self.lowest = self.limit  # for logs and benchmarks
        self.lag = LoopLag(clock)  # one clock for the latency and the client's own delay

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        self.lag.start()
        async with self._cond:
            await self._cond.wait_for(lambda: self._in_use < self.limit)
            self._in_use += 1
        try:
            yield
        finally:
            async with self._cond:
                self._in_use -= 1
                self._cond.notify(max(1, self.limit - self._in_use))

    def observe(self, latency_s: float, *, timed_out: bool = False, client_delay_s: float = 0.0) -> None:
        """One attempt's outcome: its latency, or that it timed out. `client_delay_s` is what
        the client itself was late by meanwhile (`LoopLag.delay_since` the send): it is not
        the server's, and is taken off the latency judged."""
        if timed_out:
            self._cut(self.limit // 2, "a request timed out")
            return
        latency_s = max(0.0, latency_s - client_delay_s)
        self._fastest = latency_s if self._fastest is None else min(self._fastest, latency_s)
        self._ewma = latency_s if self._ewma is None else (1 - EWMA_WEIGHT) * self._ewma + EWMA_WEIGHT * latency_s
        if self._ewma > SLOW_FLOOR_S and self._ewma > SLOW_FACTOR * self._fastest:
            self._cut(self.limit - max(1, self.limit // 4), f"latency grew to {self._ewma:.1f}s "
                      f"(fastest {self._fastest:.1f}s)")
            return
        self._good += 1
        if self._good >= self.limit and self.limit < self.ceiling:
            self._good = 0
            self.limit += 1  # the next release wakes the extra waiter

    def observe_sent(self, sent: float, *, timed_out: bool = False) -> None:
        """`observe` of an attempt sent at `sent` (on the limit's clock: time.monotonic unless
        one is given) and ended now, the client's own delay since then (`LoopLag`) taken off."""
        self.observe(self._clock() - sent, timed_out=timed_out, client_delay_s=self.lag.delay_since(sent))

    def _cut(self, to: int, why: str) -> None:
        now = self._clock()
        if now - self._last_cut < self.cooldown_s or self.limit == 1:
            return
        self._last_cut, self._good = now, 0
        self.limit = max(1, to)
        self.lowest = min(self.lowest, self.limit)
        log.warning("%s: %s; %d requests in flight at most from now on (of %d)", self.where or "endpoint", why,
                    self.limit, self.ceiling)
