"""Accuracy and the Wilson interval against hand-computed values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from medrcube.metrics.accuracy import accuracy, wilson_interval, z_value


def test_z_value_at_95_percent():
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)


def test_wilson_hand_computed_7_of_10():
    # By hand: p=.7, z=1.959964, z2/n=.384146; centre=(.7+.192073)/1.384146=.644493;
    # half=(1.959964/1.384146)*sqrt(.021+.00960365)=.247714 -> (.396779, .892209).
    lo, hi = wilson_interval(7, 10)
    assert lo == pytest.approx(0.396779, abs=1e-5)
    assert hi == pytest.approx(0.892209, abs=1e-5)


def test_wilson_extremes_and_empty():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.277540, abs=1e-5)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(1 - 0.277540, abs=1e-5)


def test_wilson_rejects_bad_counts():
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(1, 2, confidence=1.0)


def test_accuracy_counts_and_denominator(rec):
    records = (
        [rec(f"c{i}", "correct") for i in range(3)]
        + [rec("w", "wrong"), rec("u", "unparsed"), rec("r", "refused")]
        + [rec("e1", "error"), rec("e2", "error"), rec("na", "unavailable")]
    )
    a = accuracy(records)
    assert (a.n, a.correct, a.unparsed, a.refused, a.errors, a.unavailable) == (6, 3, 1, 1, 2, 1)
    assert a.acc == pytest.approx(0.5)
    assert (a.lo, a.hi) == wilson_interval(3, 6)
    assert a.total == 9
    assert a.error_rate == pytest.approx(2 / 8)


def test_accuracy_of_nothing_graded(rec):
    a = accuracy([rec("e", "error")])
    assert a.n == 0 and a.acc is None and (a.lo, a.hi) == (0.0, 1.0) and a.errors == 1


@given(st.integers(0, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_interval_contains_point_estimate(kn):
    k, n = kn
    lo, hi = wilson_interval(k, n)
    assert 0.0 <= lo <= hi <= 1.0
    if n:
        assert lo <= k / n <= hi


@given(st.integers(1, 20), st.integers(1, 20), st.integers(1, 30))
def test_interval_narrows_as_n_grows(num, extra, scale):
    # Fixed proportion p = num / den; scaling k and n by m > 1 must give a narrower interval.
    den = num + extra
    lo1, hi1 = wilson_interval(num, den)
    lo2, hi2 = wilson_interval(num * (scale + 1), den * (scale + 1))
    assert hi2 - lo2 < hi1 - lo1
    assert not math.isnan(lo2)
