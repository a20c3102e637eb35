"""The random and prior baselines (medrcube.models.baselines)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medrcube.cube.item import Cube, Item
from medrcube.models.base import ErrorKind, ModelAdapter, Request
from medrcube.models.baselines import PriorAdapter, RandomAdapter
from medrcube.models.registry import ModelSpecError, load_adapter


def _req(item_id: str, options: tuple[str, ...], variant: str = "standard", task: str = "") -> Request:
    return Request(key=f"{item_id}/{variant}", item_id=item_id, prompt="Question: ?", options=options, variant=variant, task=task)


def _answers(adapter: ModelAdapter, requests: list[Request]) -> list[str | None]:
    return [r.text for r in asyncio.run(adapter.generate(requests))]


# ---------------------------------------------------------------- random

OPTIONS = st.lists(st.text(min_size=1, max_size=12), min_size=2, max_size=6).map(tuple)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(-(2**40), 2**40), ids=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=20, unique=True), options=OPTIONS)
def test_random_is_independent_of_order_and_batching(seed: int, ids: list[str], options: tuple[str, ...]) -> None:
    reqs = [_req(i, options) for i in ids]
    whole = _answers(RandomAdapter(seed), reqs)
    shuffled = list(zip(ids, whole, strict=True))
    random.Random(0).shuffle(shuffled)
    # A fresh adapter (another worker), another order, one request per call.
    again = {i: _answers(RandomAdapter(seed), [_req(i, options)])[0] for i, _ in shuffled}
    assert [again[i] for i in ids] == whole
    assert all(a in "ABCDEF"[: len(options)] for a in whole)


def test_random_is_roughly_uniform_and_seed_dependent() -> None:
    reqs = [_req(f"item-{i}", ("w", "x", "y", "z")) for i in range(4000)]
    counts = Counter(_answers(RandomAdapter(1), reqs))
    assert set(counts) == set("ABCD")
    # Binomial(4000, 1/4) has sd ~27; 5 sd either side.
    assert all(865 < n < 1135 for n in counts.values()), counts
    other = _answers(RandomAdapter(2), reqs)
    agree = sum(a == b for a, b in zip(other, _answers(RandomAdapter(1), reqs), strict=True))
    assert 865 < agree < 1135  # independent seeds agree ~1/4 of the time


def test_random_depends_on_variant_and_shown_options() -> None:
    a = RandomAdapter(0)
    base = [_req(f"i{k}", ("a", "b", "c")) for k in range(200)]
    blind = [_req(f"i{k}", ("a", "b", "c"), variant="blind") for k in range(200)]
    rotated = [_req(f"i{k}", ("b", "c", "a")) for k in range(200)]
    assert _answers(a, base) != _answers(a, blind)
    assert _answers(a, base) != _answers(a, rotated)


def test_random_without_options_is_an_error_not_a_guess() -> None:
    (resp,) = asyncio.run(RandomAdapter(0).generate([_req("x", ())]))
    assert resp.text is None and resp.error_kind is ErrorKind.INTERNAL and "'x'" in resp.error


# ---------------------------------------------------------------- prior


def _item(i: str, task: str, options: tuple[str, ...], answer: int) -> Item:
    return Item(id=i, dataset="d", image=None, question="q?", options=options, answer=answer, task=task, modality="CT", part="Chest")


def _cube(items: list[Item]) -> Cube:
    return Cube(items=tuple(items), source="test-cube", fingerprint="fp123", read_image=lambda k: b"")


def _prior_req(item: Item, options: tuple[str, ...] | None = None) -> Request:
    return _req(item.id, options if options is not None else item.options, task=item.task)


def test_prior_leave_one_out_on_the_option_set() -> None:
    yes_no = ("Yes", "No")
    items = [
        _item("a", "Disease Diagnosis", yes_no, 0),
        _item("b", "Disease Diagnosis", yes_no, 0),
        _item("c", "Disease Diagnosis", yes_no, 1),
    ]
    prior = load_adapter("prior", cube=_cube(items))
    assert isinstance(prior, PriorAdapter)
    assert prior.fingerprint == "prior:fp123"
    # a: others are b(Yes), c(No) -> tie, broken by text: "no" < "yes" -> No -> "B"
    # b: same as a. c: others a, b both Yes -> "A".
    assert _answers(prior, [_prior_req(x) for x in items]) == ["B", "B", "A"]
    assert [prior.choose(_prior_req(x))[1] for x in items] == ["option_set"] * 3


def test_prior_answers_the_letter_in_the_order_shown() -> None:
    opts = ("normal", "pneumonia", "effusion")
    items = [_item(f"i{k}", "Disease Diagnosis", opts, 1) for k in range(4)]
    prior = PriorAdapter(_cube(items))
    rotated = ("effusion", "normal", "pneumonia")
    assert _answers(prior, [_prior_req(items[0], rotated)]) == ["C"]
    # the same set spelled differently still pools
    assert _answers(prior, [_prior_req(items[0], ("Effusion ", "NORMAL", "pneumonia"))]) == ["C"]


def test_prior_falls_back_to_the_task_then_to_A() -> None:
    items = [
        _item("x1", "Severity Grading", ("mild", "severe"), 1),
        _item("x2", "Severity Grading", ("mild", "moderate", "severe"), 2),
        _item("x3", "Severity Grading", ("none", "mild", "moderate", "severe"), 3),  # alone with its set
        _item("y1", "Organ Recognition", ("liver", "spleen"), 0),  # alone in its task
    ]
    prior = PriorAdapter(_cube(items))
    x3, y1 = items[2], items[3]
    assert prior.choose(_prior_req(x3)) == (3, "task")  # "severe" correct twice among others
    assert _answers(prior, [_prior_req(x3)]) == ["D"]
    # y1's own answer must not leak into its prediction: nothing else -> "A" by default
    assert prior.choose(_prior_req(y1)) == (0, "default")
    y1_rot = ("spleen", "liver")
    assert prior.choose(_prior_req(y1, y1_rot)) == (0, "default")  # "A" = spleen: wrong, honestly


def test_prior_never_sees_its_own_answer() -> None:
    """With every item alone in its group, the prior can only be right by the fallback."""
    rng = random.Random(5)
    items = [_item(f"u{k}", f"task{k}", (f"p{k}", f"q{k}", f"r{k}"), rng.randrange(3)) for k in range(50)]
    prior = PriorAdapter(_cube(items))
    assert _answers(prior, [_prior_req(x) for x in items]) == ["A"] * 50


def test_prior_unknown_item_and_missing_cube() -> None:
    prior = PriorAdapter(_cube([_item("a", "t", ("x", "y"), 0)]))
    (resp,) = asyncio.run(prior.generate([_req("zzz", ("x", "y"), task="t")]))
    assert resp.error_kind is ErrorKind.INTERNAL and "'zzz'" in resp.error and "test-cube" in resp.error
    with pytest.raises(ModelSpecError):
        load_adapter("prior")
