"""A worker of the pump that ends cancelled (nothing in the pump cancels one; a library
under an adapter might) stops the run with an error naming it, instead of returning the
answers got so far as if the run were complete (run/pump.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from medrcube.models.base import Request, Response
from medrcube.models.baselines import RandomAdapter
from medrcube.run.pump import Pump
from medrcube.run.store import AskedBy


class CancelsItsOwnTask(RandomAdapter):
    """The random baseline, whose third call cancels the task that made it."""

    def __init__(self) -> None:
        super().__init__(seed=1, batch_size=1, concurrency=1)
        self.calls = 0

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        self.calls += 1
        if self.calls == 3:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await asyncio.sleep(0)
        return await super().generate(requests)


def _requests(n: int) -> dict[str, Request]:
    return {f"k{i}": Request(key=f"k{i}", item_id=f"i{i}", prompt="?", options=("a", "b", "c")) for i in range(n)}


def _pump(adapter: RandomAdapter, done: list[str]) -> Pump:
    return Pump(adapter, None, owner="test", concurrency=1, newer_than=None, claim_ttl_s=60.0,
                on_done=lambda key, response, cached: done.append(key), asked_by=AskedBy(run="r"))


def test_a_cancelled_worker_is_an_error_with_the_count_left_not_a_short_result() -> None:
    done: list[str] = []
    with pytest.raises(RuntimeError, match=r"medrcube-worker-0 was cancelled before the run ended, with 4 requests"):
        asyncio.run(_pump(CancelsItsOwnTask(), done).run(_requests(6)))
    assert done == ["k0", "k1"]


def test_the_same_run_without_the_cancellation_answers_every_request() -> None:
    done: list[str] = []
    results = asyncio.run(_pump(RandomAdapter(seed=1, batch_size=1, concurrency=1), done).run(_requests(6)))
    assert sorted(results) == sorted(_requests(6)) and len(done) == 6
