"""The runner on real cubes and real stores: plan order, unavailable images, caching,
errors never graded, no barrier between batches, the judge, the early stop on auth.

Model adapters here are the project's baselines or small scripted models defined in this
file (models are the one thing a test may script; the runner, store and grading are real).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.cube.item import Cube
from medrcube.models.base import ErrorKind, Request, Response
from medrcube.models.baselines import RandomAdapter
from medrcube.run.plan import plan_asks
from medrcube.run.records import GRADED, Outcome
from medrcube.run.runner import owner_is_dead, run_cube
from medrcube.run.store import ResponseStore
from medrcube.testing.gencube import generate_release_cube

LETTERS = "ABCDEFGH"


@pytest.fixture(scope="module")
def small_cube(tmp_path_factory: pytest.TempPathFactory) -> Cube:
    root = generate_release_cube(
        tmp_path_factory.mktemp("cube"), n_items=60, n_datasets=4, n_images=30, image_size=32, n_base_images=8, seed=3
    )
    cube = load_cube(root)
    assert any(it.image is None for it in cube.items), "the fixture needs restricted items"
    return cube


@pytest.fixture(scope="module")
def unique_cube(tmp_path_factory: pytest.TempPathFactory) -> Cube:
    """Like small_cube, but every question is distinct, so that every ask is one request."""
    root = generate_release_cube(
        tmp_path_factory.mktemp("ucube"), n_items=60, n_datasets=4, n_images=30, image_size=32, n_base_images=8, seed=4
    )
    for test_json in root.glob("*/test.json"):
        records = json.loads(test_json.read_text(encoding="utf-8"))
        for rec in records:
            rec["question"] = f"{rec['question']} (case {rec['id']})"
        test_json.write_text(json.dumps(records), encoding="utf-8")
    return load_cube(root)


class Scripted:
    """A model that answers by a function of the request, counting every request."""

    def __init__(self, answer, *, fingerprint: str = "scripted:1", batch_size: int = 1, concurrency: int = 4):
        self.answer = answer
        self.spec = fingerprint
        self.fingerprint = fingerprint
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.seen: Counter[str] = Counter()
        self.batches: list[int] = []

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        self.batches.append(len(requests))
        out = []
        for r in requests:
            self.seen[r.key] += 1
            out.append(await self.answer(r) if asyncio.iscoroutinefunction(self.answer) else self.answer(r))
        return out

    async def aclose(self) -> None:
        return None


def test_random_run_grades_every_ask_in_plan_order(small_cube: Cube, tmp_path: Path) -> None:
    adapter = RandomAdapter(7)
    store = ResponseStore(tmp_path / "store")
    result = run_cube(small_cube, adapter, variants=("standard", "blind", "shuffled:2"), store=store)
    plan = plan_asks(small_cube, ("standard", "blind", "shuffled:2"), fingerprint=adapter.fingerprint)
    assert [(r.item_id, r.variant, r.rotation) for r in result.records] == [
        (a.item.id, a.variant, a.rotation) for a in plan
    ]
    n = len(small_cube)
    restricted = sum(1 for it in small_cube.items if it.image is None)
    assert len(result.records) == 4 * n  # every item has >= 2 options: 2 rotations each
    # Unavailable images: not asked in image variants, asked in blind.
    assert result.unavailable == 3 * restricted
    for rec in result.records:
        item_has_image = rec.image_digest is not None
        if rec.variant != "blind" and not item_has_image:
            assert rec.outcome is Outcome.UNAVAILABLE and rec.response is None
        else:
            assert rec.outcome in GRADED
    assert result.asked == 4 * n - 3 * restricted
    # Asks with the same key (the same prompt and image: identical questions in blind)
    # are one request, as they would be one store entry.
    first_of_key: dict[str, object] = {}
    for ask in plan:
        if ask.available:
            first_of_key.setdefault(ask.key, ask)
    assert len(first_of_key) < result.asked  # the fixture has such repeats
    assert result.requests_sent == len(first_of_key)
    assert result.cache_hits == 0 and result.errors == 0
    # The grade is exactly the baseline's choice compared with the answer as shown.
    for ask, rec in zip(plan, result.records):
        if not ask.available:
            continue
        choice = adapter.choose(first_of_key[ask.key].request())
        assert rec.extracted == choice
        assert rec.outcome is (Outcome.CORRECT if choice == ask.answer else Outcome.WRONG)
        assert rec.response == LETTERS[choice]
    # Rotation keeps the answer text: the shown answer index points to the same option.
    items = {it.id: it for it in small_cube.items}
    for ask in plan:
        assert ask.options[ask.answer] == items[ask.item.id].answer_text

    again = run_cube(small_cube, RandomAdapter(7), variants="standard,blind,shuffled:2", store=store)
    assert again.requests_sent == 0
    assert again.cache_hits == result.asked
    assert [(r.outcome, r.extracted) for r in again.records] == [(r.outcome, r.extracted) for r in result.records]
    assert all(r.cached for r in again.records if r.outcome is not Outcome.UNAVAILABLE)

    fresh = run_cube(small_cube, RandomAdapter(7), variants=("standard",), store=store, refresh=True)
    assert fresh.requests_sent == len({a.key for a in plan if a.variant == "standard" and a.available})
    assert fresh.cache_hits == 0
    store.close()


def test_without_a_store_everything_is_asked_every_time(unique_cube: Cube) -> None:
    model = Scripted(lambda r: Response(text="A"))
    first = run_cube(unique_cube, model, variants=("blind",))
    second = run_cube(unique_cube, model, variants=("blind",))
    assert first.requests_sent == second.requests_sent == len(unique_cube)
    assert max(model.seen.values()) == 2


def test_errors_are_recorded_never_graded_and_retried_on_rerun(unique_cube: Cube, tmp_path: Path) -> None:
    bad = {it.id for it in unique_cube.items[::5]}

    def answer(r: Request) -> Response:
        if r.item_id in bad:
            return Response(text=None, error="HTTP 503 after 6 attempts", error_kind=ErrorKind.SERVER, attempts=6)
        return Response(text="B")

    store = ResponseStore(tmp_path)
    result = run_cube(unique_cube, Scripted(answer), variants=("blind",), store=store)
    errs = [r for r in result.records if r.outcome is Outcome.ERROR]
    assert {r.item_id for r in errs} == bad and result.errors == len(bad)
    assert all(r.extracted is None and "server: HTTP 503" in (r.error or "") for r in errs)
    assert all(r.outcome in (Outcome.CORRECT, Outcome.WRONG) for r in result.records if r.item_id not in bad)
    assert len(store.errors()) == len(bad)

    healed = Scripted(lambda r: Response(text="B"))
    again = run_cube(unique_cube, healed, variants=("blind",), store=store)
    assert again.requests_sent == len(bad)
    expected = {a.key for a in plan_asks(unique_cube, "blind", fingerprint="scripted:1") if a.item.id in bad}
    assert set(healed.seen) == expected
    assert again.errors == 0
    store.close()


def test_an_adapter_that_raises_or_miscounts_yields_errors(unique_cube: Cube) -> None:
    class Broken(Scripted):
        async def generate(self, requests: Sequence[Request]) -> list[Response]:
            if requests[0].item_id == unique_cube.items[0].id:
                raise RuntimeError("boom")
            return [Response(text="A")] * (len(requests) + 1)

    result = run_cube(unique_cube, Broken(None), variants=("blind",))
    assert result.errors == len(unique_cube)
    first = result.records[0]
    assert first.outcome is Outcome.ERROR and "raised RuntimeError: boom" in first.error
    assert "returned 2 responses for 1 requests" in result.records[1].error


def test_an_authentication_error_stops_the_run(unique_cube: Cube, tmp_path: Path) -> None:
    model = Scripted(
        lambda r: Response(text=None, error="401: check OPENAI_API_KEY", error_kind=ErrorKind.AUTH),
        concurrency=1,
    )
    result = run_cube(unique_cube, model, variants=("blind",), store=ResponseStore(tmp_path))
    assert result.aborted and "OPENAI_API_KEY" in result.aborted
    assert result.requests_sent == 1 == sum(model.seen.values())
    assert result.errors == len(unique_cube)
    assert sum("not asked" in (r.error or "") for r in result.records) == len(unique_cube) - 1


def test_a_slow_request_holds_up_no_other(unique_cube: Cube) -> None:
    """No barrier between batches: the first request waits until every other request has
    been answered. With a barrier (batches awaited together) this could never finish and
    the slow request times out into an error, which the assertions catch."""
    slow_key = None
    others_done = asyncio.Event()
    answered: set[str] = set()
    total = len(unique_cube)

    async def answer(r: Request) -> Response:
        nonlocal slow_key
        if slow_key is None:
            slow_key = r.key
        if r.key == slow_key:
            try:
                await asyncio.wait_for(others_done.wait(), timeout=20)
            except TimeoutError:
                return Response(text=None, error="held up by a barrier", error_kind=ErrorKind.TIMEOUT)
            return Response(text="A")
        answered.add(r.key)
        if len(answered) == total - 1:
            others_done.set()
        return Response(text="A")

    result = run_cube(unique_cube, Scripted(answer, concurrency=4), variants=("blind",))
    assert result.errors == 0
    assert len(answered) == total - 1


def test_batches_respect_batch_size_and_ask_each_key_once(unique_cube: Cube, tmp_path: Path) -> None:
    model = Scripted(lambda r: Response(text="C"), batch_size=8, concurrency=3)
    result = run_cube(unique_cube, model, variants=("blind", "shuffled:3"), store=ResponseStore(tmp_path))
    assert max(model.batches) <= 8 and max(model.batches) > 1
    assert max(model.seen.values()) == 1
    assert sum(model.seen.values()) == result.requests_sent == result.asked


def test_the_judge_resolves_unparsed_answers_through_the_store(unique_cube: Cube, tmp_path: Path) -> None:
    vague = {it.id for it in unique_cube.items[::3]}

    def answer(r: Request) -> Response:
        if r.item_id in vague:
            return Response(text="It is hard to say; several findings could fit here.")
        return Response(text="A")

    judge = Scripted(lambda r: Response(text="B"), fingerprint="judge:1")
    store = ResponseStore(tmp_path)
    result = run_cube(unique_cube, Scripted(answer), variants=("blind",), store=store, judge=judge)
    judged = [r for r in result.records if r.item_id in vague]
    assert judged and all(r.how == "judge" and r.extracted == 1 for r in judged)
    assert all(r.outcome is (Outcome.CORRECT if r.answer == 1 else Outcome.WRONG) for r in judged)
    assert result.judge_requests == len(vague) == sum(judge.seen.values())
    # The judge's prompt names the question and the response.
    assert all(r.how != "judge" for r in result.records if r.item_id not in vague)

    judge2 = Scripted(lambda r: Response(text="B"), fingerprint="judge:1")
    again = run_cube(unique_cube, Scripted(answer), variants=("blind",), store=store, judge=judge2)
    assert again.judge_requests == 0 and sum(judge2.seen.values()) == 0
    assert [r.outcome for r in again.records] == [r.outcome for r in result.records]

    # A judge that cannot decide leaves the record unparsed, and says so.
    undecided = Scripted(lambda r: Response(text="no idea"), fingerprint="judge:2")
    third = run_cube(unique_cube, Scripted(answer), variants=("blind",), store=store, judge=undecided)
    assert all(r.outcome is Outcome.UNPARSED and r.how == "judge_undecided" for r in third.records if r.item_id in vague)
    store.close()


def test_refusals_are_their_own_outcome(unique_cube: Cube) -> None:
    result = run_cube(
        unique_cube,
        Scripted(lambda r: Response(text="I can't help with that.", refused=True)),
        variants=("blind",),
    )
    assert all(r.outcome is Outcome.REFUSED and r.how == "provider_refusal" for r in result.records)


def test_a_dead_owner_is_recognised_and_a_live_one_is_not() -> None:
    import os
    import socket
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    host = socket.gethostname()
    assert owner_is_dead(f"{host}:{proc.pid}:abcd")
    assert not owner_is_dead(f"{host}:{os.getpid()}:abcd")
    assert not owner_is_dead(f"{host}:{os.getppid()}:abcd")
    assert not owner_is_dead(f"other-host-{host}:{proc.pid}:abcd")
