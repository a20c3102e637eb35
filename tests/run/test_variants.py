"""Variants: parsing specs, instances per item, and option rotation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from medrcube.run.variants import (
    Variant,
    original_index,
    parse_variants,
    rotate,
)


def test_parse_the_three_kinds_in_order() -> None:
    got = parse_variants("standard,blind,shuffled:3")
    assert got == (Variant("standard"), Variant("blind"), Variant("shuffled", 3))
    assert [v.spec for v in got] == ["standard", "blind", "shuffled:3"]
    assert parse_variants(" Blind , STANDARD ") == (Variant("blind"), Variant("standard"))


def test_parse_accepts_an_iterable_as_the_runner_passes_it() -> None:
    assert parse_variants(("standard",)) == (Variant("standard"),)
    assert parse_variants(["standard,blind", Variant("shuffled", 2)]) == (
        Variant("standard"),
        Variant("blind"),
        Variant("shuffled", 2),
    )
    assert parse_variants(Variant("blind")) == (Variant("blind"),)


def test_uses_image_only_blind_goes_without() -> None:
    uses = {v.name: v.uses_image for v in parse_variants("standard,blind,shuffled:2")}
    assert uses == {"standard": True, "blind": False, "shuffled": True}


def test_instances() -> None:
    std, blind, shuf = parse_variants("standard,blind,shuffled:3")
    assert std.instances(4) == [("standard", 0)]
    assert blind.instances(4) == [("blind", 0)]
    assert shuf.instances(4) == [("shuffled", 0), ("shuffled", 1), ("shuffled", 2)]
    # K is capped by the item's option count: a 2-option item has two rotations.
    assert shuf.instances(2) == [("shuffled", 0), ("shuffled", 1)]
    assert shuf.instances() == [("shuffled", 0), ("shuffled", 1), ("shuffled", 2)]
    assert std.instances() == [("standard", 0)]


@pytest.mark.parametrize(
    ("spec", "needles"),
    [
        ("standard,blnd", ["'blnd'", "did you mean 'blind'", "standard,blnd", "shuffled:K"]),
        ("shuffled", ["'shuffled'", "K must be an integer >= 2", "shuffled:4"]),
        ("shuffled:1", ["'shuffled:1'", ">= 2", "'1'"]),
        ("shuffled:x", ["'shuffled:x'", "K must be"]),
        ("shuffled:-3", ["K must be"]),
        ("blind:2", ["'blind:2'", "takes no ':K'"]),
        ("standard,,blind", ["empty variant", "standard,,blind"]),
        ("", ["empty variant"]),
        ("standard,standard", ["appears twice"]),
        ("shuffled:2,shuffled:3", ["appears twice", "'shuffled:2'", "'shuffled:3'"]),
        ("circular", ["unknown variant 'circular'", "choices: standard, blind"]),
    ],
)
def test_bad_specs_name_the_spec_and_the_choices(spec: str, needles: list[str]) -> None:
    with pytest.raises(ValueError) as e:
        parse_variants(spec)
    for needle in needles:
        assert needle in str(e.value), (needle, str(e.value))


def test_variant_constructor_validates() -> None:
    with pytest.raises(ValueError, match="K >= 2"):
        Variant("shuffled", 1)
    with pytest.raises(ValueError, match="takes no rotation count"):
        Variant("blind", 3)
    with pytest.raises(ValueError, match="did you mean 'standard'"):
        Variant("standrd")


def test_rotate_examples() -> None:
    opts = ("CT", "MRI", "X-Ray", "US")
    assert rotate(opts, 2, 0) == (opts, 2)
    assert rotate(opts, 2, 1) == (("MRI", "X-Ray", "US", "CT"), 1)
    assert rotate(opts, 0, 1) == (("MRI", "X-Ray", "US", "CT"), 3)
    assert rotate(opts, 3, 3) == (("US", "CT", "MRI", "X-Ray"), 0)
    with pytest.raises(ValueError, match="outside"):
        rotate(opts, 4, 1)
    with pytest.raises(ValueError, match="empty"):
        rotate((), 0, 1)


@given(
    st.lists(st.text(max_size=8), min_size=1, max_size=8, unique=True),
    st.data(),
    st.integers(-50, 50),
)
def test_rotation_keeps_the_answer_text_and_maps_back(opts: list[str], data, r: int) -> None:
    answer = data.draw(st.integers(0, len(opts) - 1))
    rotated, new_answer = rotate(opts, answer, r)
    assert sorted(rotated) == sorted(opts)
    assert rotated[new_answer] == opts[answer]
    for shown in range(len(opts)):
        assert rotated[shown] == opts[original_index(shown, r, len(opts))]


@given(st.integers(2, 8), st.integers(2, 30))
def test_all_shuffled_instances_show_distinct_orders(n: int, k: int) -> None:
    opts = [f"o{i}" for i in range(n)]
    inst = Variant("shuffled", k).instances(n)
    assert len(inst) == min(k, n)
    orders = {rotate(opts, 0, r)[0] for _, r in inst}
    assert len(orders) == len(inst)
    # Rotation 0 is the cube order: the same prompt as `standard`.
    assert inst[0] == ("shuffled", 0)
