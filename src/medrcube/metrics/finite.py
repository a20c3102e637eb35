"""Intervals valid in finite samples for a mean over images: Hoeffding-Bentkus.

When few images hold the items (or accuracy is near 0 or 1, or one image holds most of
them), the cluster-robust intervals of clustered.py and paired.py rest on a normal or t
approximation that under-covers (benchmarks/RESULTS.md, section 13). This module gives
the interval the gate then uses instead; it needs no estimate of the ICC and holds at
any number of images.

The statistic is the item-level total S = sum_j s_j over K independent images, image j
contributing s_j in [0, m_j] (its correct items, or for a paired drop its items'
(1 + d_i) / 2 with d_i in {-1, 0, 1}); the estimand is mu = E[S] / n, n = sum m_j, the
item-weighted mean the cluster-robust intervals estimate too. Under "mu = b" three
bounds hold on the same tail probability P(S >= s), so their minimum does as well
(Bates et al. 2021, "Distribution-free, risk-controlling prediction sets", JACM 68:43,
combine the last two the same way):

1. Hoeffding (1963, JASA 58:13, Thm 2) with ranges m_j: exp(-2 (s - n b)^2 / sum m_j^2);
2. Hoeffding's relative-entropy bound (Thm 1) on Z_j = s_j / M in [0, 1], M = max m_j,
   K terms of average mean p = n b / (K M): exp(-K kl(s / (K M), p));
3. Bentkus (2004, Ann. Probab. 32:1650) on the same Z_j: e P(Binomial(K, p) >= floor(s / M)).

Independence between images is the one assumption (the same as the cluster-robust
interval's); images may differ in their own accuracy. With every image of the same size
and every item right, 3. is b^K up to e, and 2. is exactly b^K: the exact binomial.
The interval's ends are found by bisection on b, so an interval and a decision from its
p-values never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from medrcube.metrics.special import bdtr, bdtrc

METHOD = "Hoeffding-Bentkus over images (finite-sample valid: min of Hoeffding, Hoeffding-KL, Bentkus)"

# Bisection steps for an interval end: 2^-40 is far below any reported digit.
_STEPS = 40


def _kl(q: float, p: float) -> float:
    """Bernoulli relative entropy kl(q || p), with 0 log 0 = 0."""
    out = 0.0
    if q > 0.0:
        out += q * math.log(q / p) if p > 0.0 else math.inf
    if q < 1.0:
        out += (1.0 - q) * math.log((1.0 - q) / (1.0 - p)) if p < 1.0 else math.inf
    return out


class _Shape(NamedTuple):
    """What the three bounds take of the image sizes: taken once per sample, not once per
    step of an interval's bisection (80 steps of two tails each; thousands of images on a
    large cube)."""

    n: int  # items
    k: int  # images
    big_m: int  # the largest image's items
    squares: int  # sum of m_j^2 (Hoeffding's ranges)


def _shape(sizes: Sequence[int]) -> _Shape:
    return _Shape(sum(sizes), len(sizes), max(sizes, default=0), sum(m * m for m in sizes))


def upper_tail(total: float, sizes: Sequence[int], mean: float) -> float:
    """An upper bound on P(S >= total) when E[S] = mean * n (see the module doc)."""
    return _upper(total, _shape(sizes), mean)


def _upper(total: float, shape: _Shape, mean: float) -> float:
    n, big_k, big_m = shape.n, shape.k, shape.big_m
    if n == 0 or total <= mean * n:
        return 1.0
    if mean <= 0.0:
        return 0.0  # S >= total > 0 is impossible when every s_j has mean 0 (s_j >= 0)
    hoeffding = math.exp(-2.0 * (total - mean * n) ** 2 / shape.squares)
    p = mean * n / (big_k * big_m)
    t = total / big_m
    q = min(1.0, t / big_k)
    entropy = math.exp(-big_k * _kl(q, p)) if q > p else 1.0
    bentkus = math.e * _binom_sf(math.floor(t + 1e-9) - 1, big_k, p)
    return min(1.0, hoeffding, entropy, bentkus)


def _binom_sf(k: int, n: int, p: float) -> float:
    """P(X > k) for X ~ Binomial(n, p), exact (metrics/special.py: 1 below k = 0, 0 from k = n)."""
    return bdtrc(k, n, p)


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), exact (metrics/special.py: 0 below k = 0, 1 from k = n)."""
    return bdtr(k, n, p)


def lower_tail(total: float, sizes: Sequence[int], mean: float) -> float:
    """An upper bound on P(S <= total) when E[S] = mean * n: the same three bounds on
    Z_j = s_j / M read from below, and the upper tail of the complements m_j - s_j (two
    bounds of one probability: their minimum is one too)."""
    return _lower(total, _shape(sizes), mean)


def _lower(total: float, shape: _Shape, mean: float) -> float:
    n, big_k, big_m = shape.n, shape.k, shape.big_m
    if n == 0 or total >= mean * n:
        return 1.0
    if mean >= 1.0:
        return 0.0  # S <= total < n is impossible when every item's mean is 1
    hoeffding = math.exp(-2.0 * (mean * n - total) ** 2 / shape.squares)
    p = mean * n / (big_k * big_m)
    t = total / big_m
    q = max(0.0, t / big_k)
    entropy = math.exp(-big_k * _kl(q, p)) if q < p else 1.0
    bentkus = math.e * _binom_cdf(math.ceil(t - 1e-9), big_k, p)
    return min(1.0, hoeffding, entropy, bentkus, _upper(n - total, shape, 1.0 - mean))


def p_at_most(sums: Sequence[float], sizes: Sequence[int], bound: float) -> float:
    """p-value of H0: mu <= bound (small: decisively above it); mu, sums in [0, 1] units."""
    if not sizes:
        return 1.0
    return _p_at_most(sum(sums), _complement(sums, sizes), _shape(sizes), bound)


def _complement(sums: Sequence[float], sizes: Sequence[int]) -> float:
    """The total of the complements m_j - s_j."""
    return sum(m - s for s, m in zip(sums, sizes, strict=True))


def _p_at_most(total: float, complement: float, shape: _Shape, bound: float) -> float:
    return min(_upper(total, shape, bound), _lower(complement, shape, 1.0 - bound))


def p_at_least(sums: Sequence[float], sizes: Sequence[int], bound: float) -> float:
    """p-value of H0: mu >= bound (small: decisively below it)."""
    if not sizes:
        return 1.0
    return _lower(sum(sums), _shape(sizes), bound)


def interval(sums: Sequence[float], sizes: Sequence[int], confidence: float = 0.95) -> tuple[float, float]:
    """The two-sided interval of mu: each end is a one-sided bound at (1 - confidence) / 2."""
    shape = _shape(sizes)
    if shape.n == 0:
        return (0.0, 1.0)
    alpha = (1.0 - confidence) / 2.0
    total, complement = sum(sums), _complement(sums, sizes)
    est = total / shape.n
    # lower: the largest b that "mu <= b" is rejected at (p_at_most grows with b);
    # upper: the smallest b that "mu >= b" is rejected at (p_at_least falls with b).
    lo, hi = 0.0, est
    if _p_at_most(total, complement, shape, 0.0) > alpha:
        hi = 0.0
    for _ in range(_STEPS):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if _p_at_most(total, complement, shape, mid) <= alpha else (lo, mid)
    lower = lo
    lo, hi = est, 1.0
    if _lower(total, shape, 1.0) > alpha:
        lo = 1.0
    for _ in range(_STEPS):
        mid = (lo + hi) / 2.0
        lo, hi = (lo, mid) if _lower(total, shape, mid) <= alpha else (mid, hi)
    return (lower, hi)
