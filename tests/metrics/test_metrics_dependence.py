"""The credibility statistics that decide: the odds ratio's robust score test
(metrics/dependence.py) and the luck rate's clustered score interval
(metrics/credibility.luck_rate), against exact and simulated references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medrcube.metrics.clustered import t_quantile, t_sf, wilson_q
from medrcube.metrics.credibility import luck_rate
from medrcube.metrics.dependence import CAP, dependence


def table(a: int, b: int, c: int, d: int) -> list[tuple[str, bool, bool]]:
    """One pair per image: (image, perception right, diagnosis right)."""
    rows = [(True, True)] * a + [(True, False)] * b + [(False, False)] * c + [(False, True)] * d
    return [(f"i{k}", low, high) for k, (low, high) in enumerate(rows)]


def test_the_estimate_is_the_sample_odds_ratio_and_haldane_when_a_group_is_empty() -> None:
    dep = dependence(table(40, 10, 20, 10))
    assert dep.odds_ratio == pytest.approx(40 * 20 / (10 * 10))
    assert (dep.A, dep.B, dep.C, dep.D, dep.pairs, dep.images) == (40, 10, 20, 10, 80, 80)
    dep = dependence(table(40, 0, 20, 10))
    assert dep.odds_ratio == pytest.approx(40.5 * 20.5 / (0.5 * 10.5))


def test_the_score_is_zero_at_the_estimate_and_the_interval_inverts_the_tests() -> None:
    dep = dependence(table(120, 30, 25, 40), confidence=0.95)
    assert dep.odds_ratio is not None
    assert dep.z(dep.odds_ratio) == pytest.approx(0.0, abs=1e-6)
    assert dep.lo < dep.odds_ratio < dep.hi
    # The interval's ends are where the one-sided p-values reach (1 - confidence) / 2.
    assert dep.p_at_most(dep.lo) == pytest.approx(0.025, abs=1e-4)
    assert dep.p_at_least(dep.hi) == pytest.approx(0.025, abs=1e-4)


def test_with_independent_pairs_the_score_at_one_is_pearsons_signed_chi_square() -> None:
    # Near independence, the sandwich (residuals under H0) is the model variance.
    a, b, c, d = 400, 100, 110, 400
    n = a + b + c + d
    chi2 = n * (a * c - b * d) ** 2 / ((a + b) * (c + d) * (a + d) * (b + c))
    # The sandwich is floored at the independent-pairs variance, so |Z| is at most Pearson's.
    z = dependence(table(a, b, c, d)).z(1.0)
    assert 0 < z <= math.sqrt(chi2) * (1 + 1e-9)
    assert z == pytest.approx(math.sqrt(chi2), rel=0.02)


def test_pairs_on_one_image_count_once_more_than_independent_ones() -> None:
    # The same table, its pairs either on their own images or four to an image (the
    # four sharing their outcomes): the clustered test is less sure.
    own = dependence(table(60, 15, 15, 10))
    shared = dependence([(f"j{k // 4}", low, high) for k, (_, low, high) in enumerate(
        sorted(table(60, 15, 15, 10), key=lambda r: (r[1], r[2])))])
    assert (shared.A, shared.B, shared.C, shared.D) == (own.A, own.B, own.C, own.D)
    assert abs(shared.z(1.0)) < abs(own.z(1.0))
    assert shared.hi - shared.lo > own.hi - own.lo


def test_undefined_without_both_kinds_of_perception_or_diagnosis() -> None:
    for dep in (dependence(table(30, 5, 0, 0)), dependence(table(30, 0, 0, 5)), dependence([])):
        assert not dep.defined and dep.p_at_most(2.0) == 1.0 and dep.p_at_least(2.0) == 1.0
        assert dep.hi == CAP  # finite: JSON-safe


def test_a_shortcut_is_decisively_below_the_bound_and_a_grounded_model_above_it() -> None:
    # Diagnosis 0.9 whatever the perception (odds ratio 1) on 2,000 pairs; a grounded model
    # (diagnosis 0.95 with the perception right, 0.5 with it wrong: odds ratio 19).
    shortcut = dependence(table(1440, 160, 40, 360))
    assert shortcut.p_at_least(2.5) < 1e-6 and shortcut.p_at_most(2.5) > 0.5
    grounded = dependence(table(1520, 80, 200, 200))
    assert grounded.p_at_most(2.5) < 1e-6


ROWS = st.lists(st.tuples(st.integers(0, 40), st.booleans(), st.booleans()), min_size=30, max_size=120)


@settings(max_examples=60, deadline=None)
@given(ROWS)
def test_interval_holds_the_estimate(rows: list[tuple[int, bool, bool]]) -> None:
    dep = dependence((f"i{k}", low, high) for k, low, high in rows)
    if not dep.defined:
        return
    assert dep.odds_ratio is not None
    assert dep.lo <= dep.odds_ratio * (1 + 1e-9) and dep.odds_ratio <= dep.hi * (1 + 1e-9)


@st.composite
def clustered_tables(draw: st.DrawFn) -> list[tuple[str, bool, bool]]:
    """A random table of pairs on 2 to 40 images (1 to 12 pairs each): perception and
    diagnosis right with an image's own rates, so images differ as they do in a run."""
    images = draw(st.integers(2, 40))
    rows: list[tuple[str, bool, bool]] = []
    for j in range(images):
        size = draw(st.integers(1, 12))
        low = draw(st.lists(st.booleans(), min_size=size, max_size=size))
        high = draw(st.lists(st.booleans(), min_size=size, max_size=size))
        rows += [(f"i{j}", lo, hi) for lo, hi in zip(low, high, strict=True)]
    return rows


BOUNDS = st.lists(st.floats(1e-5, 1e5), min_size=2, max_size=8)


@settings(max_examples=150, deadline=None)
@given(clustered_tables(), BOUNDS)
def test_p_values_are_monotone_in_the_bound(rows: list[tuple[str, bool, bool]], bounds: list[float]) -> None:
    # The point-null statistic is not monotone in theta (the sandwich is re-estimated at
    # each null value); the composite-null p-values are, by construction.
    dep = dependence(rows)
    if not dep.defined:
        return
    bounds = sorted(bounds)
    up = [dep.p_at_most(b) for b in bounds]
    down = [dep.p_at_least(b) for b in bounds]
    assert all(x <= y + 1e-12 for x, y in zip(up, up[1:], strict=False))
    assert all(x >= y - 1e-12 for x, y in zip(down, down[1:], strict=False))


@settings(max_examples=60, deadline=None)
@given(clustered_tables())
def test_the_composite_p_is_no_smaller_than_the_point_p_anywhere_on_its_null_side(
        rows: list[tuple[str, bool, bool]]) -> None:
    dep = dependence(rows)
    if not dep.defined:
        return
    df = dep.images - 1.0
    thetas = [math.exp(g / 4.0) for g in range(-36, 37)]  # 1.2e-4 to 8,100
    for b in (0.5, 2.0, 3.0):
        assert dep.p_at_most(b) >= max(t_sf(dep.z(t), df) for t in thetas if t <= b) - 1e-12
        assert dep.p_at_least(b) >= max(t_sf(-dep.z(t), df) for t in thetas if t >= b) - 1e-12


@settings(max_examples=60, deadline=None)
@given(clustered_tables(), BOUNDS)
def test_the_interval_is_the_set_of_bounds_neither_claim_rejects(rows: list[tuple[str, bool, bool]],
                                                                 bounds: list[float]) -> None:
    dep = dependence(rows, confidence=0.9)
    if not dep.defined:
        return
    for b in bounds:
        if dep.lo * 1.000001 < b < dep.hi / 1.000001:
            assert dep.p_at_most(b) > 0.05 and dep.p_at_least(b) > 0.05
        if 1.0 / CAP < b < dep.lo / 1.000001:
            assert dep.p_at_most(b) <= 0.05
        if CAP > b > dep.hi * 1.000001:
            assert dep.p_at_least(b) <= 0.05


def test_on_a_two_image_table_the_point_statistic_turns_but_the_p_value_does_not() -> None:
    """The table that showed the point-null p-value falling as the bound rose (2 images,
    p at 4 below p at 2): the statistic still turns, the composite p-value is flat."""
    dep = dependence([("i0", False, False)] * 20 + [("i0", False, True)] * 9 + [("i1", True, False)])
    assert dep.defined
    assert dep.z(4.0) > dep.z(2.0)  # the point-null p at 4 would be the smaller one
    assert t_sf(dep.z(4.0), 1.0) < t_sf(dep.z(2.0), 1.0)
    assert dep.p_at_most(4.0) >= dep.p_at_most(2.0)
    # Between 2 and 4 the statistic reaches its minimum: the p-value at 4 is the point p there.
    assert dep.p_at_most(4.0) == pytest.approx(max(t_sf(dep.z(2.0 + i / 100.0), 1.0) for i in range(201)),
                                               abs=1e-9)


def test_on_many_images_the_composite_p_is_the_point_p() -> None:
    """Where Z falls monotonely between the data and the bound (any sizeable table), the
    composite p-value is the point-null one: nothing is lost."""
    rows = [(f"i{k // 2}", low, high) for k, (_, low, high) in enumerate(table(300, 60, 50, 90))]
    dep = dependence(rows)
    df = dep.images - 1.0
    for b in (1.0, 2.0, 3.0):
        assert dep.p_at_most(b) == pytest.approx(t_sf(dep.z(b), df), rel=1e-12, abs=1e-15)
        assert dep.p_at_least(b) == pytest.approx(t_sf(-dep.z(b), df), rel=1e-12, abs=1e-15)


def test_one_sided_errors_at_the_bound_by_simulation() -> None:
    """A model whose odds ratio is the bound (clustered pairs: an image effect shared by
    its perception items), 300 seeded replicates: each one-sided error stays near 0.025."""
    rng = np.random.default_rng(7)
    theta, p1, images = 3.0, 0.85, 150
    odds0 = p1 / (1 - p1) / theta
    p0 = odds0 / (1 + odds0)
    false_pass = false_fail = 0
    reps = 300
    for _ in range(reps):
        rows = []
        for j in range(images):
            seen = rng.random() < 0.7  # the image is perceived: all of its perception items right
            high = rng.random() < (p1 if seen else p0)
            rows += [(f"i{j}", seen, high)] * 2
        dep = dependence(rows)
        false_pass += dep.p_at_most(theta) <= 0.025
        false_fail += dep.p_at_least(theta) <= 0.025
    assert false_pass / reps <= 0.05 and false_fail / reps <= 0.05


def test_luck_rate_of_single_diagnoses_is_wilson_on_the_clustered_n() -> None:
    units = [(f"i{k}", 1.0 if k < 12 else 0.0) for k in range(200)]
    lr = luck_rate(units, 0.95)
    assert lr.estimate == pytest.approx(0.06) and lr.n == 200 and lr.images == 200
    # One unit per image: the sandwich is the binomial variance times K / (K - 1).
    assert lr.deff == pytest.approx(200 / 199)
    lo, hi = wilson_q(0.06, 200 / lr.deff, t_quantile(0.975, 199))
    assert (lr.lo, lr.hi) == (pytest.approx(lo), pytest.approx(hi))
    assert lr.p_at_least(lr.hi) == pytest.approx(0.025, abs=1e-6)
    assert lr.p_at_most(lr.lo) == pytest.approx(0.025, abs=1e-6)


def test_luck_rate_counts_images_when_there_is_no_variance() -> None:
    lr = luck_rate([(f"i{k // 3}", 0.0) for k in range(90)])  # 30 images of 3 right diagnoses, no luck
    assert lr.estimate == 0.0 and lr.deff == 3.0 and lr.lo == 0.0
    assert lr.hi == pytest.approx(wilson_q(0.0, 30, t_quantile(0.975, 29))[1])
