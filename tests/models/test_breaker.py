"""The circuit breaker, the adaptive concurrency limit and the no-progress watchdog, on a
hand-driven clock (no sleeping, no durations asserted)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from medrcube.models.breaker import CircuitBreaker
from medrcube.models.concurrency import AdaptiveLimit
from medrcube.run.watchdog import Watchdog


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_the_breaker_needs_both_the_count_and_the_silence() -> None:
    clock = Clock()
    b = CircuitBreaker("http://h:1/v1", failures=3, seconds=10, clock=clock)
    for _ in range(50):  # a burst of quick failures (a restart in a second) is not enough
        b.failed("connection", "refused")
    assert not b.open
    clock.t += 11
    b.failed("connection", "refused")
    assert b.open and "http://h:1/v1" in (b.message or "") and "connection x51" in (b.message or "")


def test_an_answer_ends_the_streak() -> None:
    clock = Clock()
    b = CircuitBreaker("u", failures=3, seconds=1, clock=clock)
    b.failed("503", "x")
    b.failed("503", "x")
    clock.t += 5
    b.answered()
    b.failed("503", "x")
    b.failed("503", "x")
    assert not b.open  # two in a row since the answer, and the silence restarted with it
    clock.t += 2
    b.failed("timeout", "x")
    assert b.open and "503 x2, timeout" in (b.message or "")


def test_an_open_breaker_wakes_a_backoff_and_cancels_a_hanging_request() -> None:
    b = CircuitBreaker("u", failures=1, seconds=0)

    async def scenario() -> tuple[bool, object]:
        hung = asyncio.get_running_loop().create_future()  # a request the server never answers
        raced = asyncio.ensure_future(b.race(hung))
        sleeping = asyncio.ensure_future(b.sleep(3600))
        await asyncio.sleep(0)
        b.failed("timeout", "no answer")
        woke = await asyncio.wait_for(sleeping, 5)
        result = await asyncio.wait_for(raced, 5)
        assert hung.cancelled()
        return woke, result

    assert asyncio.run(scenario()) == (True, None)


def test_a_race_returns_its_result_and_lets_a_cancellation_not_the_breakers_through() -> None:
    b = CircuitBreaker("u", failures=1, seconds=0)

    async def answer() -> str:
        await asyncio.sleep(0)
        return "A"

    async def scenario() -> tuple[str | None, bool, bool]:
        answered = await b.race(answer())
        hung = asyncio.get_running_loop().create_future()
        raced = asyncio.ensure_future(b.race(hung))
        await asyncio.sleep(0)
        raced.cancel()  # the run's own cancellation (an interrupt), not the breaker's
        with pytest.raises(asyncio.CancelledError):
            await raced
        # Each racing task is cancelled once when the breaker opens, and each is told apart.
        first, second = (asyncio.get_running_loop().create_future() for _ in range(2))
        tasks = [asyncio.ensure_future(b.race(f)) for f in (first, second)]
        await asyncio.sleep(0)
        b.failed("timeout", "no answer")
        results = await asyncio.gather(*tasks)
        return answered, results == [None, None], all(t.cancelling() == 0 for t in tasks)

    assert asyncio.run(scenario()) == ("A", True, True)


def test_an_attempt_that_opens_the_breaker_itself_returns_and_its_task_goes_on() -> None:
    # The vLLM adapter trips the breaker inside the attempt that found its engine dead: that
    # attempt's result stands, and its task (a run's worker) is not cancelled at its next await.
    b = CircuitBreaker("u", failures=100, seconds=100)

    async def dead_engine() -> str:
        await asyncio.sleep(0)
        b.trip("the engine exited with signal 9")
        return "unreachable"

    async def scenario() -> tuple[str | None, str]:
        hung = asyncio.get_running_loop().create_future()  # another request, hanging: cancelled
        other = asyncio.ensure_future(b.race(hung))
        await asyncio.sleep(0)
        result = await b.race(dead_engine())
        await asyncio.sleep(0)  # the worker's next await: no CancelledError
        return result, "other cancelled" if await other is None and hung.cancelled() else "other not cancelled"

    assert asyncio.run(scenario()) == ("unreachable", "other cancelled")


def test_trip_opens_at_once() -> None:
    b = CircuitBreaker("u", failures=100, seconds=100)
    b.trip("asked to wait 100000s")
    assert b.open and "100000s" in (b.message or "")


@pytest.mark.parametrize("bad", [{"failures": 0}, {"seconds": -1}])
def test_breaker_bounds_are_checked(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="breaker_"):
        CircuitBreaker("u", **bad)  # type: ignore[arg-type]


def test_the_limit_halves_on_a_timeout_and_recovers_one_slot_at_a_time() -> None:
    clock = Clock()
    limit = AdaptiveLimit(16, cooldown_s=2, clock=clock)
    limit.observe(0.0, timed_out=True)
    assert limit.limit == 8
    limit.observe(0.0, timed_out=True)  # the other requests in flight time out too: one cut
    assert limit.limit == 8
    clock.t += 3
    limit.observe(0.0, timed_out=True)
    assert limit.limit == 4
    for _ in range(4):
        limit.observe(0.1)
    assert limit.limit == 5


def test_the_limit_shrinks_when_latency_grows_and_ignores_fast_jitter() -> None:
    clock = Clock()
    limit = AdaptiveLimit(16, cooldown_s=0, clock=clock)
    for latency in (0.001, 0.03, 0.001, 0.05) * 10:  # milliseconds: never slow
        limit.observe(latency)
    assert limit.limit == 16
    slow = AdaptiveLimit(16, cooldown_s=0, clock=clock)
    for k in range(1, 17):  # one inference thread: the k-th answer waited for k-1 others
        clock.t += 1
        slow.observe(1.0 * k)
    assert slow.limit < 16 and slow.lowest == slow.limit


def test_the_limit_bounds_requests_in_flight() -> None:
    limit = AdaptiveLimit(4)
    limit.limit = 2
    peak = 0
    running = 0

    async def one() -> None:
        nonlocal peak, running
        async with limit.slot():
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.001)
            running -= 1

    async def many() -> None:
        await asyncio.gather(*(one() for _ in range(20)))

    asyncio.run(many())
    assert peak == 2


def test_the_watchdog_warns_once_per_silent_period(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    dog = Watchdog("openai:m@http://h/v1", lambda: 7, stall_s=30, clock=clock)
    assert dog.check() is None
    clock.t += 31
    message = dog.check()
    assert message is not None and "no progress for 31s" in message and "7 asks are open" in message
    assert "openai:m@http://h/v1" in message
    clock.t += 5
    assert dog.check() is None  # not again until another 30 s have passed
    clock.t += 30
    assert dog.check() is not None
    dog.progressed()
    assert dog.check() is None


def test_a_stalled_run_says_so_in_the_log(scripted_server, caplog: pytest.LogCaptureFixture, tmp_path) -> None:
    from medrcube.cube import load_cube
    from medrcube.models.openai_adapter import OpenAIAdapter
    from medrcube.run.progress import Progress
    from medrcube.run.runner import run_cube
    from medrcube.testing.gencube import generate_release_cube

    generate_release_cube(tmp_path, n_items=2, n_datasets=1, n_images=2, image_size=16, n_base_images=2, seed=3)
    # The hang outlasts the timeout by far, and the timeout the 1 s stall warning: on a
    # loaded machine the warning comes later, never after the request has ended.
    scripted_server.set_script({"faults": [{"fault": "hang", "seconds": 60}]})
    adapter = OpenAIAdapter("m", base_url=scripted_server.base_url, timeout=8.0, max_retries=0)
    class Noted(Progress):
        def __init__(self) -> None:
            super().__init__(total=0, enabled=False)
            self.notes: list[str] = []

        def note(self, message: str) -> None:
            self.notes.append(message)

    bar = Noted()
    with caplog.at_level(logging.WARNING, logger="medrcube.run"):
        result = run_cube(load_cube(tmp_path), adapter, stall_warn_s=1.0, progress=bar)
    assert result.errors  # the hang timed out: an error, never an answer
    assert any("no progress for" in r.getMessage() and "asks are open" in r.getMessage() for r in caplog.records)
    assert bar.notes and "no progress for" in bar.notes[0]  # the gate's live line shows it too
