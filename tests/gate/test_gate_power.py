"""Exact pass probabilities and required n."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medrcube.gate.power import min_successes, pass_probability, passes, power_report, required_n
from medrcube.metrics.accuracy import wilson_interval


def test_point_rule_hand_computed():
    # n=5, bound .6: pass needs k >= 3. P = sum_{k=3..5} C(5,k) .7^k .3^(5-k)
    p = sum(math.comb(5, k) * 0.7**k * 0.3 ** (5 - k) for k in range(3, 6))
    assert min_successes(5, "point", 0.6) == 3
    assert pass_probability("point", 0.6, 0.7, 5) == pytest.approx(p)  # .83692
    assert p == pytest.approx(0.83692, abs=1e-5)
    # n=1..4 stay below 80%, n=5 is the first to reach it.
    assert required_n("point", 0.6, 0.7) == 5


def test_lower_bound_min_successes_matches_wilson():
    for n in (10, 37, 50, 123):
        k = min_successes(n, "lower_bound", 0.6)
        assert wilson_interval(k, n)[0] >= 0.6
        assert k == 0 or wilson_interval(k - 1, n)[0] < 0.6


def test_lower_bound_required_n_near_normal_approximation():
    # Normal approximation: ((1.96 sqrt(.24) + .8416 sqrt(.21)) / .1)^2 = 181.
    n = required_n("lower_bound", 0.6, 0.7)
    assert 160 <= n <= 200
    assert pass_probability("lower_bound", 0.6, 0.7, n) >= 0.8
    assert pass_probability("lower_bound", 0.6, 0.7, n - 1) < 0.8


def test_stable_n_is_where_power_stays_above_target():
    # Point rule, bound .6, true .7: n=5 reaches 80% (.837) but n=6..17 dip below again.
    first, stable = required_n("point", 0.6, 0.7), required_n("point", 0.6, 0.7, stable=True)
    assert first == 5 and stable > first
    assert pass_probability("point", 0.6, 0.7, stable - 1) < 0.8
    assert all(pass_probability("point", 0.6, 0.7, n) >= 0.8 for n in range(stable, 4 * stable))
    assert "stays >= 80%" in power_report("point", 0.6, 0.7).text()


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["point", "lower_bound"]), st.floats(0.2, 0.9), st.floats(0.0, 1.0), st.integers(1, 400))
def test_vectorised_curve_matches_the_exact_scalar(rule, bound, accuracy, n):
    import numpy as np

    from medrcube.gate.power import _power_curve

    curve = _power_curve(rule, bound, accuracy, np.array([float(n)]), 0.95)
    assert curve[0] == pytest.approx(pass_probability(rule, bound, accuracy, n), abs=1e-12)


def test_unreachable_when_accuracy_at_or_below_bound():
    assert required_n("lower_bound", 0.6, 0.6) is None
    r = power_report("lower_bound", 0.6, 0.55, n=40)
    assert r.required_n is None and "does not exceed the bound" in r.text()
    with pytest.raises(ValueError, match="unknown rule"):
        passes(3, 5, "median", 0.5)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["point", "lower_bound"]), st.floats(0.3, 0.8), st.integers(1, 150))
def test_pass_probability_is_the_binomial_sum(rule, bound, n):
    # Brute force over every k against the rule itself.
    p = bound + 0.1
    brute = sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1) if passes(k, n, rule, bound))
    assert pass_probability(rule, bound, p, n) == pytest.approx(brute, abs=1e-9)


def test_needed_n_text_quotes_min_n_when_it_is_the_larger_requirement():
    from medrcube.gate.power import needed_n_text, required_n

    need = required_n("point", 0.6, 0.9, 0.95, stable=True)
    assert need is not None and need < 10
    text = needed_n_text("point", 0.6, 0.9, min_n=10)
    assert f"needs n>=10 (the policy's min_n; 80% power from n>={need})" in text
    assert needed_n_text("point", 0.6, 0.9, min_n=0).endswith(f"needs n>={need} for 80% power")
