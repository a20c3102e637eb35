"""Accuracy by subgroup: one stratum's accuracy and its gap to the rest, clustered by image.

A stratum (the images whose attribute has one value: `sex = female`, `manufacturer = GE`)
is measured like any accuracy of the gate: the cluster-aware Wilson interval of
metrics/clustered.py. Its gap to the rest of the cube, `accuracy(rest) - accuracy(stratum)`,
compares two sets of images that share none (an image has one value of each attribute),
so the two accuracies are independent; the interval of the gap is Newcombe's hybrid score
interval (Newcombe 1998, Stat. Med. 17:873, method 10) built from the two clustered
Wilson intervals:

    lo = d - sqrt((p_r - l_r)^2 + (u_s - p_s)^2),   hi = d + sqrt((u_r - p_r)^2 + (p_s - l_s)^2)

The one-sided p-values the gate decides with invert the same interval: the p-value of
"gap >= b" is the one-sided level at which the upper end reaches b (found by regula falsi
on the log of the level), so a decision and the interval shown never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from medrcube.metrics.clustered import ClusteredInterval, clustered_wilson, t_quantile, wilson_q

METHOD = ("Newcombe's hybrid score interval of the difference (Stat. Med. 1998, method 10) from the two "
          "cluster-aware Wilson intervals (images of a stratum and of the rest are disjoint)")

Clusters = Sequence[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Gap:
    """accuracy(rest) - accuracy(stratum), its interval and the two accuracies."""

    estimate: float | None
    lo: float
    hi: float
    stratum: ClusteredInterval
    rest: ClusteredInterval
    confidence: float

    @property
    def se(self) -> float:
        """The standard error the interval implies (for planning only)."""
        from medrcube.metrics.special import ndtri

        z = float(ndtri(0.5 + self.confidence / 2.0))
        return (self.hi - self.lo) / (2.0 * z) if z > 0 else math.inf


def _ends(rest: ClusteredInterval, stratum: ClusteredInterval, one_sided: float) -> tuple[float, float]:
    """Newcombe's interval at one-sided level `one_sided` per end, from the two clustered
    proportions (their design effects and degrees of freedom do not depend on the level:
    only the quantile changes, as clustered_wilson computes it)."""
    ends = []
    for ci in (rest, stratum):
        p = ci.estimate or 0.0
        if ci.df < 1:
            ends.append((p, 0.0, 1.0))
            continue
        lo, hi = wilson_q(p, ci.n_eff, t_quantile(1.0 - one_sided, ci.df))
        ends.append((p, lo, hi))
    (pr, lr, ur), (ps, ls, us) = ends
    d = pr - ps
    return d - math.sqrt((pr - lr) ** 2 + (us - ps) ** 2), d + math.sqrt((ur - pr) ** 2 + (ps - ls) ** 2)


def gap(rest: Clusters, stratum: Clusters, confidence: float = 0.95) -> Gap:
    """The gap of a stratum to the rest, from (k_j, m_j) per image of each."""
    r, s = clustered_wilson(rest, confidence), clustered_wilson(stratum, confidence)
    if r.estimate is None or s.estimate is None:
        return Gap(None, -1.0, 1.0, s, r, confidence)
    lo, hi = _ends(r, s, (1.0 - confidence) / 2.0)
    return Gap(r.estimate - s.estimate, lo, hi, s, r, confidence)


def p_gap_at_least(rest: Clusters, stratum: Clusters, bound: float) -> float:
    """One-sided p-value of H0: gap >= bound (small: the gap is decisively below it)."""
    return _p(rest, stratum, bound, upper=True)


def p_gap_at_most(rest: Clusters, stratum: Clusters, bound: float) -> float:
    """One-sided p-value of H0: gap <= bound (small: the gap is decisively above it)."""
    return _p(rest, stratum, bound, upper=False)


def _p(rest: Clusters, stratum: Clusters, bound: float, *, upper: bool) -> float:
    r, s = clustered_wilson(rest), clustered_wilson(stratum)
    if not r.n or not s.n:
        return 1.0

    def margin(x: float) -> float:
        """How far the interval at one-sided level exp(x) reaches past the bound (> 0: it excludes it)."""
        lo, hi = _ends(r, s, math.exp(x))
        return bound - hi if upper else lo - bound

    a, b = math.log(1e-12), math.log(0.4999)
    fa, fb = margin(a), margin(b)
    if fb <= 0.0:
        return 1.0
    if fa > 0.0:
        return 1e-12
    # The level where the interval's end meets the bound: the end moves smoothly and
    # monotonically with log(level), so regula falsi (Illinois) brackets it in a few steps.
    side = 0
    for _ in range(100):
        x = b - fb * (b - a) / (fb - fa)
        fx = margin(x)
        if abs(fx) < 1e-12:  # the end on the bound: this level is the p-value
            return math.exp(x)
        if fx > 0.0:
            b, fb = x, fx
            if side == 1:
                fa /= 2.0
            side = 1
        else:
            a, fa = x, fx
            if side == -1:
                fb /= 2.0
            side = -1
        if b - a < 1e-5:  # the level to 1e-5 of itself
            break
    return math.exp(b)
