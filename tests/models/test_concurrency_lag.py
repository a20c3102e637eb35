"""The adaptive limit tells a slow server from a busy client (models/concurrency.py).

A client whose event loop cannot run (a busy CPU, another thread holding the interpreter)
sees every answer late; that is not the server slowing, and must not shrink the requests
in flight. `LoopLag` notes how late the loop runs; the limit takes it off the latency.
"""

from __future__ import annotations

import asyncio

import pytest

from medrcube.models.concurrency import PROBE_S, AdaptiveLimit, LoopLag


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_blocked_loop_is_noted_as_the_clients_delay() -> None:
    """The lateness is read on an injected clock, so the machine's load cannot move it: the
    real timer only decides when the probe looks, and the clock says what it sees then."""
    clock = Clock()

    async def main() -> tuple[float, float, float]:
        lag = LoopLag(clock=clock)
        start = clock.t
        lag.start()  # due PROBE_S after `start` on the clock
        clock.t += PROBE_S
        await asyncio.sleep(3 * PROBE_S)  # the timer fires (maybe again): the clock says on time
        quiet = lag.delay_since(start)
        blocked_from = clock.t
        clock.t += 0.8  # the loop kept from running for 0.8 s (what a busy machine does to it)
        during = lag.delay_since(blocked_from)  # the pending timer is overdue now
        await asyncio.sleep(1.5 * PROBE_S)  # it fires, and notes how late it was
        after = lag.delay_since(blocked_from)
        return quiet, during, after

    quiet, during, after = asyncio.run(main())
    assert quiet == 0.0
    assert during == after == pytest.approx(0.8 - PROBE_S), (during, after)


def test_latency_the_client_caused_shrinks_nothing_the_servers_does() -> None:
    clock = Clock()
    busy_client = AdaptiveLimit(16, cooldown_s=0, clock=clock)
    slow_server = AdaptiveLimit(16, cooldown_s=0, clock=clock)
    busy_client.observe(0.1)
    slow_server.observe(0.1)
    for k in range(1, 17):  # answers 1..16 s after their send
        clock.t += 1
        # the client's loop was late by all but 0.1 s of it: the server answered in 0.1 s
        busy_client.observe(0.1 + k, client_delay_s=float(k))
        # the client was on time: the server took that long
        slow_server.observe(0.1 + k, client_delay_s=0.0)
    assert busy_client.limit == 16 and busy_client.lowest == 16
    assert slow_server.limit < 16


def test_a_timeout_cuts_whatever_the_clients_delay() -> None:
    limit = AdaptiveLimit(16, cooldown_s=0, clock=Clock())
    limit.observe(30.0, timed_out=True, client_delay_s=29.0)
    assert limit.limit == 8


def test_the_limit_starts_its_probe_on_the_loop_that_asks() -> None:
    """Taking a slot arms the probe on the running loop; a client busy while it holds the
    slot is read as late (on the limit's injected clock: the machine's load moves nothing)."""
    clock = Clock()
    limit = AdaptiveLimit(4, clock=clock)

    async def ask() -> float:
        t0 = clock.t
        async with limit.slot():
            clock.t += 0.3  # the client busy while holding a slot
        await asyncio.sleep(0)  # no real wait: the probe armed in the slot is overdue on the injected clock
        return limit.lag.delay_since(t0)

    assert asyncio.run(ask()) == pytest.approx(0.3 - PROBE_S)
    assert LoopLag(clock).delay_since(clock.t) == 0.0  # a probe never started notes nothing
