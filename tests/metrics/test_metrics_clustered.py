"""The cluster-aware Wilson interval: hand-computed ICC, and the two limiting cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from medrcube.metrics.accuracy import wilson_from_proportion, wilson_interval
from medrcube.metrics.clustered import clustered_accuracy, clustered_wilson, icc_anova


def test_icc_hand_computed():
    # Clusters (k, m): (2,2) (0,2) (1,2). n=6, K=3, p=.5.
    # SSB = sum k^2/m - (sum k)^2/n = (2 + 0 + .5) - 1.5 = 1.0 -> MSB = .5
    # SSW = sum (k - k^2/m) = 0 + 0 + .5 -> MSW = .5/3; m0 = (6 - 12/6)/2 = 2
    # rho = (.5 - 1/6) / (.5 + 1/6) = .5; deff = 1 + (2 - 1) .5 = 1.5; n_eff = 4.
    clusters = [(2, 2), (0, 2), (1, 2)]
    assert icc_anova(clusters) == pytest.approx(0.5)
    ci = clustered_wilson(clusters)
    assert (ci.k, ci.n, ci.clusters) == (3, 6, 3)
    assert ci.deff == pytest.approx(1.5) and ci.n_eff == pytest.approx(4.0)
    assert (ci.lo, ci.hi) == pytest.approx(wilson_from_proportion(0.5, 4.0))
    # Wilson at p=.5, n=4: centre .5, half = (1.96/1.9604) sqrt(.0625 + 3.8415/64) = .34996
    assert ci.lo == pytest.approx(0.15004, abs=1e-4)


def test_no_clustering_equals_plain_wilson():
    clusters = [(1, 1)] * 7 + [(0, 1)] * 5
    ci = clustered_wilson(clusters)
    assert ci.deff == 1.0 and ci.n_eff == 12
    assert (ci.lo, ci.hi) == wilson_interval(7, 12)


def test_perfect_correlation_equals_wilson_on_clusters():
    # Every image's items are all right or all wrong: the evidence is 4 images, not 12 items.
    clusters = [(3, 3), (0, 3), (3, 3), (0, 3)]
    ci = clustered_wilson(clusters)
    assert ci.icc == pytest.approx(1.0)
    assert ci.n_eff == pytest.approx(4.0)
    assert (ci.lo, ci.hi) == pytest.approx(wilson_interval(2, 4))
    # Unequal sizes: still as wide as Wilson on the number of images at the item proportion.
    uneven = clustered_wilson([(3, 3), (0, 2), (1, 1)])
    assert uneven.n_eff == pytest.approx(3.0)
    assert (uneven.lo, uneven.hi) == pytest.approx(wilson_from_proportion(4 / 6, 3.0))


def test_negative_icc_is_clamped_and_degenerate_cases_fall_back():
    # Each image has one right and one wrong item: rho = -1, clamped to 0 (never narrower).
    assert icc_anova([(1, 2)] * 3) == pytest.approx(-1.0)
    ci = clustered_wilson([(1, 2)] * 3)
    assert ci.icc == 0.0 and (ci.lo, ci.hi) == wilson_interval(3, 6)
    # Everything right: rho cannot be estimated.
    assert icc_anova([(2, 2), (2, 2)]) is None
    assert (clustered_wilson([(2, 2), (2, 2)]).lo, 1.0) == (wilson_interval(4, 4)[0], 1.0)
    # Empty.
    empty = clustered_wilson([])
    assert (empty.n, empty.lo, empty.hi, empty.estimate) == (0, 0.0, 1.0, None)


def test_clustered_accuracy_groups_records_by_image(rec):
    records = [
        rec("a1", "correct", image="i1"), rec("a2", "correct", image="i1"), rec("a3", "correct", image="i1"),
        rec("b1", "wrong", image="i2"), rec("b2", "wrong", image="i2"), rec("b3", "unparsed", image="i2"),
        rec("e", "error", image="i3"),  # not graded: not a unit
    ]
    ci = clustered_accuracy(records)
    assert (ci.k, ci.n, ci.clusters) == (3, 6, 2)
    assert (ci.lo, ci.hi) == pytest.approx(wilson_interval(1, 2))


clusters_st = st.lists(
    st.integers(1, 6).flatmap(lambda m: st.tuples(st.integers(0, m), st.just(m))), min_size=1, max_size=40
)


@given(clusters_st)
def test_clustered_interval_contains_estimate_and_is_never_narrower(clusters):
    ci = clustered_wilson(clusters)
    k, n = sum(c[0] for c in clusters), sum(c[1] for c in clusters)
    assert 0.0 <= ci.lo <= k / n <= ci.hi <= 1.0
    plain = wilson_interval(k, n)
    assert ci.hi - ci.lo >= plain[1] - plain[0] - 1e-12
    assert len(clusters) - 1e-9 <= ci.n_eff <= n + 1e-9
