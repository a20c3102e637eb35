"""A plan made a chunk at a time while the first requests are out (run/plan.py
`plan_in_chunks`, run/pump.py `Pump.run(..., more)`): the same asks as the whole plan,
records in plan order, each key asked once even when two chunks share it, and a chunk
that fails to plan stops the run with its own error; a further chunk is made once an
answer is in (never before the first requests are out) unless the queue ran dry."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.cube.item import Cube
from medrcube.models.base import AdapterBase, Request, Response
from medrcube.models.baselines import RandomAdapter
from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.run.plan import as_variants, plan_asks, plan_in_chunks, planned_count
from medrcube.run.pump import Pump
from medrcube.run.runner import run_cube
from medrcube.run.store import AskedBy, ResponseStore
from medrcube.testing.gencube import generate_release_cube

VARIANTS = "standard,blind,shuffled:3"


@pytest.fixture(scope="module")
def cube(tmp_path_factory: pytest.TempPathFactory) -> Cube:
    # 90 items on 25 images: questions repeat on one image (keys shared across chunks); some restricted
    root = tmp_path_factory.mktemp("cube") / "cube"
    return load_cube(str(generate_release_cube(root, n_items=90, n_datasets=3, n_images=25, image_size=32,
                                               restricted_fraction=0.15, seed=7)))


def test_the_chunks_sorted_by_position_are_the_whole_plan(cube: Cube) -> None:
    variants = as_variants(VARIANTS)
    chunks = list(plan_in_chunks(cube, variants, fingerprint="fp", first=1, size=7))
    assert len(chunks[0]) == sum(len(v.instances(len(cube.items[0].options))) for v in variants)  # one item, every variant
    flat = sorted((pa for chunk in chunks for pa in chunk), key=lambda pa: pa[0])
    whole = plan_asks(cube, variants, fingerprint="fp")
    assert len({pos for pos, _ in flat}) == len(flat) == len(whole) == planned_count(cube, variants)
    assert [(a.item.id, a.variant, a.rotation, a.key, a.available, a.prompt) for _, a in flat] == \
        [(a.item.id, a.variant, a.rotation, a.key, a.available, a.prompt) for a in whole]


def test_a_perturbation_is_planned_whole_not_in_chunks(cube: Cube) -> None:
    with pytest.raises(ValueError, match="without a perturbation"):
        next(plan_in_chunks(cube, as_variants("standard,jpeg:30"), fingerprint="fp"))


def test_a_run_planned_in_chunks_records_the_plan_order_and_asks_each_key_once(
        cube: Cube, tmp_path: Path, scripted_server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    whole = plan_asks(cube, as_variants(VARIANTS), fingerprint="x")
    first_chunk_items = {it.id for it in cube.items[:32]}  # the runner's first chunk: 2 x 8 workers, at least 32 items
    shared = {a.key for a in whole if a.available and a.item.id in first_chunk_items} & \
        {a.key for a in whole if a.available and a.item.id not in first_chunk_items}
    assert shared, "the cube should repeat a question on one image across the first chunk's edge"
    scripted_server.set_script({"default": "B", "latency": 0.005})
    runs = {}
    for order in ("image", "plan"):  # "image" plans in chunks; "plan" plans whole, as before
        scripted_server.reset_stats()
        adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, concurrency=8, timeout=10.0)
        result = run_cube(cube, adapter, variants=VARIANTS, store=ResponseStore(tmp_path / f"{order}.sqlite"),
                          concurrency=8, order=order)
        stats = scripted_server.stats(log=False)
        assert stats["total"] == len({a.key for a in whole if a.available})  # one request per key
        runs[order] = result
    chunked, planned = runs["image"], runs["plan"]
    shown = [(r.item_id, r.variant, r.rotation, r.outcome, r.extracted) for r in chunked.records]
    assert shown == [(r.item_id, r.variant, r.rotation, r.outcome, r.extracted) for r in planned.records]
    assert [r.item_id for r in chunked.records] == [a.item.id for a in whole]
    assert chunked.unavailable == planned.unavailable == sum(1 for a in whole if not a.available) > 0
    assert chunked.errors == 0 and chunked.requests_sent == planned.requests_sent


def _requests(keys: list[str]) -> dict[str, Request]:
    return {k: Request(key=k, item_id=k, prompt="?", options=("a", "b", "c")) for k in keys}


def _pump(done: list[str]) -> Pump:
    return Pump(RandomAdapter(seed=1, batch_size=1, concurrency=2), None, owner="t", concurrency=2, newer_than=None,
                claim_ttl_s=60.0, on_done=lambda key, response, cached: done.append(key), asked_by=AskedBy(run="r"))


def test_the_pump_answers_every_chunk_once_even_empty_or_repeated() -> None:
    def more() -> Iterator[Mapping[str, Request]]:
        yield _requests(["k2", "k3"])
        yield {}
        yield _requests(["k1", "k4"])  # k1 came in the first chunk: not asked again

    done: list[str] = []
    results = asyncio.run(_pump(done).run(_requests(["k0", "k1"]), more(), at_most=6))
    assert sorted(results) == ["k0", "k1", "k2", "k3", "k4"] and sorted(done) == sorted(results)


def test_a_chunk_that_fails_to_plan_stops_the_run_with_its_error() -> None:
    def more() -> Iterator[Mapping[str, Request]]:
        yield _requests(["k2"])
        raise OSError("cube.jsonl: unreadable")

    with pytest.raises(OSError, match="unreadable"):
        asyncio.run(_pump([]).run(_requests(["k0", "k1"]), more(), at_most=3))


def test_nothing_first_and_nothing_after_is_a_finished_run() -> None:
    assert asyncio.run(_pump([]).run({}, iter([{}]), at_most=0)) == {}


def test_a_fed_run_must_say_how_many_requests_it_can_hold() -> None:
    # the workers started are bounded by it (a concurrency of a billion starts a handful)
    with pytest.raises(ValueError, match="at_most"):
        asyncio.run(_pump([]).run(_requests(["k0", "k1"]), iter([{}])))


class _Answering(AdapterBase):
    """A model answering every request after a short wait (as a server does), counting what it was sent."""

    spec = fingerprint = "answering:1"
    concurrency = 4

    def __init__(self) -> None:
        self.sent = 0

    async def generate(self, requests):
        self.sent += len(requests)
        await asyncio.sleep(0.01)
        return [Response(text="A") for _ in requests]


@pytest.mark.parametrize("first, workers", [(12, 4), (2, 4)])
def test_a_further_chunk_is_made_once_an_answer_is_in_unless_the_queue_is_empty(first: int, workers: int) -> None:
    # A first chunk that keeps the workers busy: nothing more is planned before an answer
    # came back (so never before the first requests were out). One smaller than the
    # workers: planned at once, since a worker would wait for it.
    adapter, done = _Answering(), []
    seen: list[tuple[int, int]] = []  # (requests sent, answers in) when each further chunk was asked for

    def more() -> Iterator[Mapping[str, Request]]:
        for c in range(3):
            seen.append((adapter.sent, len(done)))
            yield _requests([f"m{c}-{i}" for i in range(8)])

    pump = Pump(adapter, None, owner="t", concurrency=workers, newer_than=None, claim_ttl_s=60.0,
                on_done=lambda key, response, cached: done.append(key), asked_by=AskedBy(run="r"))
    results = asyncio.run(pump.run(_requests([f"k{i}" for i in range(first)]), more(), at_most=first + 24))
    assert len(results) == first + 24 and len(done) == len(results)
    if first > workers:
        assert seen[0][0] >= workers and seen[0][1] > 0  # the workers' first requests out, an answer in
    else:
        assert seen[0][1] == 0  # the queue ran dry: planned before any answer came back
