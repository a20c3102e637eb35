"""The pump's per-iteration grouping of store writes (run/pump.py `PerIteration`): the
answers that come back together are committed in one transaction, and no caller goes on
before the call holding its items has returned."""

from __future__ import annotations

import asyncio

import pytest

from medrcube.run.pump import PerIteration


def test_items_handed_in_during_one_iteration_go_in_one_call_and_each_caller_waits_for_it() -> None:
    calls: list[list[int]] = []

    async def go() -> list[tuple[int, int]]:
        group = PerIteration(lambda items: (calls.append(list(items)), len(calls))[1])
        seen: list[tuple[int, int]] = []

        async def caller(i: int) -> None:
            done_in = await group([i, 10 + i])
            assert [i, 10 + i] == [x for x in calls[done_in - 1] if x in (i, 10 + i)]  # its items are in that call
            seen.append((i, done_in))

        await asyncio.gather(*(caller(i) for i in range(5)))
        await caller(7)  # a later iteration: a call of its own
        return seen

    seen = asyncio.run(go())
    assert calls == [[0, 10, 1, 11, 2, 12, 3, 13, 4, 14], [7, 17]]
    assert sorted(seen) == [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1), (7, 2)]


def test_a_failure_reaches_every_caller_and_a_cancelled_caller_leaves_the_call_standing() -> None:
    committed: list[list[str]] = []

    def commit(items: list[str]) -> None:
        if "bad" in items:
            raise OSError("disk full")
        committed.append(items)

    async def go() -> list[BaseException | None]:
        group: PerIteration[str, None] = PerIteration(commit)
        results = await asyncio.gather(group(["a"]), group(["bad"]), return_exceptions=True)
        victim = asyncio.ensure_future(group(["x"]))
        other = asyncio.ensure_future(group(["y"]))
        await asyncio.sleep(0)  # both handed in, the call not yet run
        victim.cancel()
        await asyncio.gather(victim, other, return_exceptions=True)
        return [*results, other.exception()]

    a, bad, other = asyncio.run(go())
    assert isinstance(a, OSError) and isinstance(bad, OSError)  # one transaction: both callers see it
    assert other is None and committed == [["x", "y"]]  # the cancelled caller's items were committed too


@pytest.mark.parametrize("n", [1, 3])
def test_a_single_caller_is_not_held_past_its_iteration(n: int) -> None:
    async def go() -> int:
        group = PerIteration(len)
        return await group(range(n))

    assert asyncio.run(go()) == n
