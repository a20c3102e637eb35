"""The cluster-aware score interval: hand-computed ICC, Kish's sum(m^2)/n, the t(K-1)
quantile for few images, and the conservative fallback when the ICC is not estimable.

Expectations changed with issue 12 (deliberately): the design effect uses the
size-weighted mean cluster size, the quantile is t(K-1) when images carry several
items, and an ICC that cannot be estimated counts images (ICC = 1) instead of items."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import t

from medrcube.metrics.accuracy import wilson_interval
from medrcube.metrics.clustered import clustered_accuracy, clustered_wilson, icc_anova, wilson_q


def test_icc_hand_computed():
    # Clusters (k, m): (2,2) (0,2) (1,2). n=6, K=3, p=.5.
    # SSB = 1.0 -> MSB = .5; SSW = .5 -> MSW = .5/3; m0 = 2; rho = .5
    # m_w = (4+4+4)/6 = 2; deff = 1.5; n_eff = 4; quantile t(2) at .975 = 4.303.
    clusters = [(2, 2), (0, 2), (1, 2)]
    assert icc_anova(clusters) == pytest.approx(0.5)
    ci = clustered_wilson(clusters)
    assert (ci.k, ci.n, ci.clusters, ci.df) == (3, 6, 3, 2.0)
    assert ci.deff == pytest.approx(1.5) and ci.n_eff == pytest.approx(4.0)
    assert (ci.lo, ci.hi) == pytest.approx(wilson_q(0.5, 4.0, float(t.ppf(0.975, 2))))


def test_no_clustering_equals_plain_wilson():
    clusters = [(1, 1)] * 7 + [(0, 1)] * 5
    ci = clustered_wilson(clusters)
    assert ci.deff == 1.0 and ci.n_eff == 12 and ci.df == float("inf")
    assert (ci.lo, ci.hi) == pytest.approx(wilson_interval(7, 12))


def test_kish_uses_the_size_weighted_mean_cluster_size():
    # One image with 20 items among 30 singles: m_w = (400 + 30) / 50 = 8.6, not 50/31.
    clusters = [(10, 20)] + [(1, 1)] * 15 + [(0, 1)] * 15
    ci = clustered_wilson(clusters)
    assert ci.mean_cluster_size == pytest.approx(8.6)
    assert ci.deff == pytest.approx(1 + 7.6 * ci.icc)


def test_perfect_correlation_counts_images():
    clusters = [(3, 3), (0, 3), (3, 3), (0, 3)]
    ci = clustered_wilson(clusters)
    assert ci.icc == pytest.approx(1.0) and ci.n_eff == pytest.approx(4.0)
    assert (ci.lo, ci.hi) == pytest.approx(wilson_q(0.5, 4.0, float(t.ppf(0.975, 3))))


def test_negative_icc_is_clamped_and_degenerate_cases_fall_back():
    # Each image has one right and one wrong item: rho = -1, clamped to 0 (never narrower).
    assert icc_anova([(1, 2)] * 3) == pytest.approx(-1.0)
    ci = clustered_wilson([(1, 2)] * 3)
    assert ci.icc == 0.0 and ci.icc_estimated
    # Everything right: rho cannot be estimated: ICC = 1, the evidence is 2 images.
    assert icc_anova([(2, 2), (2, 2)]) is None
    flat = clustered_wilson([(2, 2), (2, 2)])
    assert (flat.icc, flat.icc_estimated, flat.n_eff) == (1.0, False, pytest.approx(2.0))
    # One image with 12 items: no spread can be learnt from one image: [0, 1].
    one = clustered_wilson([(12, 12)])
    assert (one.lo, one.hi) == (0.0, 1.0) and one.p_at_most(0.5) == 1.0
    # Empty.
    empty = clustered_wilson([])
    assert (empty.n, empty.lo, empty.hi, empty.estimate) == (0, 0.0, 1.0, None)


def test_p_values_invert_the_interval():
    ci = clustered_wilson([(1, 1)] * 30 + [(0, 1)] * 10)
    assert ci.p_at_most(ci.lo - 1e-6) < 0.025 < ci.p_at_most(ci.lo + 1e-6)
    assert ci.p_at_least(ci.hi + 1e-6) < 0.025 < ci.p_at_least(ci.hi - 1e-6)


def test_clustered_accuracy_groups_records_by_image(rec):
    records = [
        rec("a1", "correct", image="i1"), rec("a2", "correct", image="i1"), rec("a3", "correct", image="i1"),
        rec("b1", "wrong", image="i2"), rec("b2", "wrong", image="i2"), rec("b3", "unparsed", image="i2"),
        rec("e", "error", image="i3"),  # not graded: not a unit
    ]
    ci = clustered_accuracy(records)
    assert (ci.k, ci.n, ci.clusters, ci.n_eff) == (3, 6, 2, pytest.approx(2.0))


clusters_st = st.lists(
    st.integers(1, 6).flatmap(lambda m: st.tuples(st.integers(0, m), st.just(m))), min_size=1, max_size=40
)


@given(clusters_st)
def test_clustered_interval_contains_estimate_and_is_never_narrower(clusters):
    ci = clustered_wilson(clusters)
    k, n = sum(c[0] for c in clusters), sum(c[1] for c in clusters)
    assert 0.0 <= ci.lo <= k / n <= ci.hi <= 1.0
    plain = wilson_interval(k, n)
    assert ci.hi - ci.lo >= plain[1] - plain[0] - 1e-9
    m_w = sum(m * m for _, m in clusters) / n
    assert n / m_w - 1e-9 <= ci.n_eff <= n + 1e-9


def test_metrics_summary_carries_the_gates_clustered_interval(rec):
    from medrcube.rundir.summary import group_stats

    records = [rec(f"a{k}", "correct" if k % 3 else "wrong", image=f"i{k // 4}") for k in range(40)]
    stats = group_stats(records)
    ci = clustered_accuracy(records)
    assert stats["ci95"] == list(wilson_interval(stats["correct"], stats["n"]))  # the reference layout's key
    assert stats["ci95_clustered"] == [ci.lo, ci.hi] and "Kish" in stats["ci_method"]
    assert stats["images"] == 10 and stats["design_effect"] == ci.deff


def test_the_icc_standard_error_is_fishers_for_equal_images() -> None:
    from medrcube.metrics.clustered import icc_se

    rho, k, m = 0.3, 20, 8
    expected = math.sqrt(2 * (1 - rho) ** 2 * (1 + (m - 1) * rho) ** 2 / (m * (m - 1) * (k - 1)))
    assert icc_se(rho, [(5, m)] * k) == pytest.approx(expected)
    assert icc_se(rho, [(1, 1)] * 10) == 0.0  # single items: no ICC to estimate


def test_the_few_images_margin_widens_the_interval_by_raising_the_icc() -> None:
    from medrcube.metrics.clustered import FEW_METHOD, icc_se

    clusters = [(8, 8)] * 14 + [(6, 8)] * 4 + [(3, 8)] * 2  # 20 images of 8 items
    plain = clustered_wilson(clusters)
    raised = clustered_wilson(clusters, icc_margin=2.0)
    assert raised.icc == pytest.approx(min(1.0, plain.icc + 2.0 * icc_se(plain.icc, clusters)))
    assert raised.lo < plain.lo and raised.hi >= plain.hi and raised.method == FEW_METHOD
    assert raised.p_at_most(0.8) > plain.p_at_most(0.8)
    # An ICC that cannot be estimated is 1 already: nothing to raise.
    every = [(8, 8)] * 20
    assert clustered_wilson(every, icc_margin=2.0).icc == clustered_wilson(every).icc == 1.0
