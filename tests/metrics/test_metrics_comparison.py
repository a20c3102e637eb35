"""Exact McNemar, paired counts, Newcombe's paired interval, regression."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from medrcube.metrics.accuracy import wilson_interval
from medrcube.metrics.comparison import mcnemar_exact, newcombe_paired_interval, paired_records, regression


def test_mcnemar_hand_computed():
    # b=1, c=9: under H0 c ~ Bin(10, 1/2). P(X >= 9) = (10 + 1) / 1024.
    t = mcnemar_exact(1, 9)
    assert t.p_first_worse == pytest.approx(11 / 1024)
    assert t.p_two_sided == pytest.approx(22 / 1024)
    assert t.p_second_worse == pytest.approx(1 - 1 / 1024)


def test_mcnemar_without_discordant_pairs():
    t = mcnemar_exact(0, 0)
    assert (t.p_two_sided, t.p_first_worse, t.p_second_worse) == (1.0, 1.0, 1.0)


@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemar_symmetric_under_swapping_models(b, c):
    t, s = mcnemar_exact(b, c), mcnemar_exact(c, b)
    assert t.p_two_sided == pytest.approx(s.p_two_sided)
    assert t.p_first_worse == pytest.approx(s.p_second_worse)
    assert t.p_second_worse == pytest.approx(s.p_first_worse)
    assert 0.0 <= t.p_first_worse <= 1.0 and 0.0 <= t.p_two_sided <= 1.0


def test_newcombe_hand_computed():
    # a=10, b=15, c=5, d=20, n=50: p1 = .5, p2 = .3, difference .2.
    a, b, c, d = 10, 15, 5, 20
    l1, u1 = wilson_interval(25, 50)
    l2, u2 = wilson_interval(15, 50)
    phi = (10 * 20 - 15 * 5) / math.sqrt(25 * 25 * 15 * 35)  # = 125 / 572.81 = .21822
    assert phi == pytest.approx(0.218218, abs=1e-6)
    lo = 0.2 - math.sqrt((0.5 - l1) ** 2 - 2 * phi * (0.5 - l1) * (u2 - 0.3) + (u2 - 0.3) ** 2)
    hi = 0.2 + math.sqrt((u1 - 0.5) ** 2 - 2 * phi * (u1 - 0.5) * (0.3 - l2) + (0.3 - l2) ** 2)
    got = newcombe_paired_interval(a, b, c, d)
    assert got == pytest.approx((lo, hi))
    # By hand: Wilson(25/50) = (.36644, .63356), Wilson(15/50) = (.19104, .43750);
    # lo = .2 - sqrt(.13356^2 - 2 phi .13356 .13750 + .13750^2) = .2 - .16950 = .03050
    # hi = .2 + sqrt(.13356^2 - 2 phi .13356 .10896 + .10896^2) = .2 + .15284 = .35284
    assert got[0] == pytest.approx(0.03050, abs=2e-4) and got[1] == pytest.approx(0.35284, abs=2e-4)


@given(st.integers(0, 20), st.integers(0, 20), st.integers(0, 20), st.integers(0, 20))
def test_newcombe_contains_difference_and_mirrors(a, b, c, d):
    n = a + b + c + d
    lo, hi = newcombe_paired_interval(a, b, c, d)
    if n:
        assert lo - 1e-12 <= (b - c) / n <= hi + 1e-12
    mlo, mhi = newcombe_paired_interval(a, c, b, d)
    assert (mlo, mhi) == pytest.approx((-hi, -lo))


def test_paired_records_counts_shared_graded_items(rec):
    cand = [rec("x1", "correct"), rec("x2", "wrong"), rec("x3", "correct"), rec("x4", "error"), rec("x5", "correct")]
    base = [rec("x1", "correct"), rec("x2", "correct"), rec("x3", "wrong"), rec("x4", "correct"), rec("x6", "wrong")]
    pairs, counts = paired_records(cand, base)
    assert [p[0].item_id for p in pairs] == ["x1", "x2", "x3"]
    assert (counts.a, counts.b, counts.c, counts.d) == (1, 1, 1, 0)
    assert (counts.dropped, counts.first_only, counts.second_only) == (1, 1, 1)


def test_paired_records_refuses_duplicates(rec):
    with pytest.raises(ValueError, match="two 'standard' records"):
        paired_records([rec("x", "correct"), rec("x", "wrong")], [])


def test_regression_drop_and_direction(rec):
    base = [rec(f"i{i}", "correct") for i in range(20)]
    cand = [rec(f"i{i}", "correct" if i < 8 else "wrong") for i in range(20)]
    r = regression(cand, base)
    assert r.drop == pytest.approx(0.6)
    assert r.test.c == 12 and r.test.b == 0
    assert r.p_worse == pytest.approx(0.5**12)
    assert r.interval[0] <= 0.6 <= r.interval[1]
    # Swapped roles: an improvement, not significant as a regression.
    back = regression(base, cand)
    assert back.drop == pytest.approx(-0.6) and back.p_worse == pytest.approx(1.0)
