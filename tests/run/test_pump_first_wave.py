"""The pump's first wave (run/pump.py): when the adapter can tell that a request is written
(`request_written`), FIRST_WAVE workers start first and the others once a request of theirs
is written, a response is in, or FIRST_WAVE_WAIT_S has passed; an adapter that cannot tell
gets every worker at once, as before. Every request is answered either way."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from medrcube.models.base import Request, Response
from medrcube.models.baselines import RandomAdapter
from medrcube.run import pump as pump_module
from medrcube.run.pump import FIRST_WAVE, Pump
from medrcube.run.store import AskedBy

CONCURRENCY = 16


class Held(RandomAdapter):
    """The random baseline, each request held until `release` is set; counts the requests entered."""

    def __init__(self) -> None:
        super().__init__(seed=1, batch_size=1, concurrency=CONCURRENCY)
        self.entered = 0
        self.release = asyncio.Event()

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        self.entered += len(requests)
        await self.release.wait()
        return await super().generate(requests)


class Telling(Held):
    """As Held, with `request_written`: it returns once the test sets `written`."""

    def __init__(self) -> None:
        super().__init__()
        self.written = asyncio.Event()

    async def request_written(self) -> None:
        await self.written.wait()


def _requests(n: int) -> dict[str, Request]:
    return {f"k{i}": Request(key=f"k{i}", item_id=f"i{i}", prompt="?", options=("a", "b", "c")) for i in range(n)}


def _pump(adapter: RandomAdapter, done: list[str]) -> Pump:
    return Pump(adapter, None, owner="test", concurrency=CONCURRENCY, newer_than=None, claim_ttl_s=60.0,
                on_done=lambda key, response, cached: done.append(key), asked_by=AskedBy(run="r"))


async def _turns(n: int = 50) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_the_others_start_once_a_request_of_the_first_wave_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pump_module, "FIRST_WAVE_WAIT_S", 600.0)  # only the signal starts them here
    done: list[str] = []

    async def go() -> None:
        adapter = Telling()
        run = asyncio.create_task(_pump(adapter, done).run(_requests(40)))
        await _turns()
        assert adapter.entered == FIRST_WAVE < CONCURRENCY
        adapter.written.set()
        await _turns()
        assert adapter.entered == CONCURRENCY
        adapter.release.set()
        results = await run
        assert sorted(results) == sorted(_requests(40))

    asyncio.run(go())
    assert len(done) == 40


def test_a_first_response_starts_them_when_nothing_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pump_module, "FIRST_WAVE_WAIT_S", 600.0)
    done: list[str] = []

    async def go() -> None:
        adapter = Telling()  # never says written: its requests fail before the wire, say
        run = asyncio.create_task(_pump(adapter, done).run(_requests(40)))
        await _turns()
        assert adapter.entered == FIRST_WAVE
        adapter.release.set()  # the first wave's responses come back
        results = await run
        assert sorted(results) == sorted(_requests(40))

    asyncio.run(go())
    assert len(done) == 40


def test_the_others_start_after_the_wait_at_the_latest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pump_module, "FIRST_WAVE_WAIT_S", 0.01)
    done: list[str] = []

    async def go() -> None:
        adapter = Telling()  # never written, nothing answered until every worker is in
        run = asyncio.create_task(_pump(adapter, done).run(_requests(40)))
        while adapter.entered < CONCURRENCY:
            await asyncio.sleep(0.005)
        adapter.release.set()
        await run

    asyncio.run(asyncio.wait_for(go(), 60))
    assert len(done) == 40


def test_an_adapter_that_cannot_tell_gets_every_worker_at_once() -> None:
    done: list[str] = []

    async def go() -> None:
        adapter = Held()
        run = asyncio.create_task(_pump(adapter, done).run(_requests(40)))
        await _turns()
        assert adapter.entered == CONCURRENCY
        adapter.release.set()
        await run

    asyncio.run(go())
    assert len(done) == 40


class Broken(BaseException):
    """Not an Exception: the pump does not turn it into a response."""


def test_a_worker_of_the_second_wave_that_raises_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    class Breaks(Telling):
        async def generate(self, requests: Sequence[Request]) -> list[Response]:
            if self.entered >= FIRST_WAVE:
                raise Broken
            return await super().generate(requests)

    monkeypatch.setattr(pump_module, "FIRST_WAVE_WAIT_S", 600.0)

    async def go() -> None:
        adapter = Breaks()
        adapter.written.set()
        await _pump(adapter, []).run(_requests(40))

    with pytest.raises(Broken):
        asyncio.run(go())
