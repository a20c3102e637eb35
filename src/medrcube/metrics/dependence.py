"""Does a right diagnosis depend on a right perception of the same image?

On the credibility pairs (metrics/credibility.py: a diagnosis-level item H and a
perception-level item L on one image, groups A = both right, B = L right and H wrong,
C = both wrong, D = L wrong and H right), the dependence is measured by the odds ratio

    OR = odds(H right | L right) / odds(H right | L wrong) = (A C) / (B D).

It is 1 for a model whose diagnosis ignores its perception (a shortcut), whatever its
accuracies, and above 1 when a wrong perception makes a wrong diagnosis likelier. Unlike
the difference P(H|L) - P(H|not L), it does not shrink as both accuracies approach 1
(for one shared latent image effect it grows), so a better diagnostician is not
penalised for being good.

Inference: a robust score test of H0: OR = theta, clustered by image (Rao's score test
with a sandwich variance; Boos 1992, Am. Stat. 46:327). Under H0 the nuisance
beta = logit P(H | L wrong) is fitted by maximum likelihood with logit P(H | L right) =
beta + log(theta); the efficient score for log(theta) has per-image contributions

    s_j = (1 - w)(a_j - n1_j pi1) - w (d_j - n0_j pi0),   w = v1 / (v1 + v0),

(v1 = n1 pi1 (1 - pi1), v0 = n0 pi0 (1 - pi0)), and Z = sum s_j / sqrt(V) with V the
sandwich K/(K-1) sum s_j^2, never below the variance the score has with independent
pairs (v1 v0 / (v1 + v0)): the test is not made bolder than the unclustered one by an
unlucky small sample. Z is referred to Student's t on K - 1 degrees of freedom (K images
with pairs). The interval is the set of theta the two one-sided tests do not reject, so
the interval and the p-values never disagree. Being a score test, its variance is taken
under the null: with few wrong diagnoses over a wrong perception (a model right on most
diagnoses) it stays decisive where Woolf's interval (1/A + 1/B + 1/C + 1/D) is not.
The estimate is the sample odds ratio, with 0.5 added to every group when one is empty
(Haldane); the interval is searched within [1e-4, 1e4].
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from medrcube.metrics.clustered import t_quantile, t_sf

METHOD = ("odds ratio of a right diagnosis on a right perception of the same image: robust score test "
          "clustered by image (sandwich variance, floored at the independent-pairs one), t(K-1)")
CAP = 1e4
_STEPS = 48


def _expit(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


Pattern = tuple[int, int, int, int]  # one image's (a, b, c, d)


@dataclass(frozen=True, slots=True)
class Dependence:
    """The odds ratio of the credibility pairs and its score test (see the module doc)."""

    pairs: int
    images: int
    A: int
    B: int
    C: int
    D: int
    odds_ratio: float | None  # None: no pair with L wrong, none with L right, or H always (never) right
    lo: float
    hi: float
    confidence: float
    method: str = METHOD
    # Per-image groups and how many images share them: what the score test reads.
    patterns: tuple[tuple[Pattern, int], ...] = field(default=(), repr=False, compare=False)

    @property
    def defined(self) -> bool:
        return self.odds_ratio is not None

    def z(self, theta: float) -> float:
        """The robust score statistic of H0: OR = theta (positive: more dependence than theta)."""
        return _z(self.patterns, self.A, self.B, self.C, self.D, self.images, math.log(theta))

    def p_at_most(self, bound: float) -> float:
        """One-sided p of H0: OR <= bound (small: decisively dependent)."""
        if not self.defined:
            return 1.0
        return t_sf(self.z(bound), self.images - 1.0)

    def p_at_least(self, bound: float) -> float:
        """One-sided p of H0: OR >= bound (small: decisively below it: a shortcut)."""
        if not self.defined:
            return 1.0
        return t_sf(-self.z(bound), self.images - 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "images": self.images, "A": self.A, "B": self.B, "C": self.C, "D": self.D,
                "odds_ratio": self.odds_ratio, "lo": self.lo, "hi": self.hi, "confidence": self.confidence,
                "method": self.method}


def _z(patterns: tuple[tuple[Pattern, int], ...], a: int, b: int, c: int, d: int, k: int, gamma: float) -> float:
    n1, n0 = a + b, c + d
    right = a + d
    # beta = logit P(H | not L) under H0, by bisection: n1 expit(beta + gamma) + n0 expit(beta) = A + D.
    lo, hi = -60.0, 60.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if n1 * _expit(mid + gamma) + n0 * _expit(mid) < right:
            lo = mid
        else:
            hi = mid
    beta = (lo + hi) / 2.0
    pi1, pi0 = _expit(beta + gamma), _expit(beta)
    v1, v0 = n1 * pi1 * (1.0 - pi1), n0 * pi0 * (1.0 - pi0)
    if v1 + v0 <= 0.0:
        return 0.0
    w = v1 / (v1 + v0)
    u = 0.0
    ss = 0.0
    for (pa, pb, pc, pd), count in patterns:
        s = (1.0 - w) * (pa - (pa + pb) * pi1) - w * (pd - (pc + pd) * pi0)
        u += count * s
        ss += count * s * s
    robust = ss * k / (k - 1.0) if k > 1 else math.inf
    var = max(robust, v1 * v0 / (v1 + v0))
    return u / math.sqrt(var) if var > 0.0 else 0.0


def dependence(per_image: Iterable[tuple[str, bool, bool]], confidence: float = 0.95) -> Dependence:
    """The odds ratio of (image, perception right, diagnosis right) pairs, clustered by image."""
    groups: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for image, low_right, high_right in per_image:
        g = (0 if high_right else 1) if low_right else (3 if high_right else 2)
        groups[image][g] += 1
    counted: Counter[Pattern] = Counter((v[0], v[1], v[2], v[3]) for v in groups.values())
    patterns = tuple(sorted(counted.items()))
    a, b, c, d = (sum(p[i] * n for p, n in patterns) for i in range(4))
    k = len(groups)
    n = a + b + c + d
    defined = (a + b) > 0 and (c + d) > 0 and (a + d) > 0 and (b + c) > 0 and k > 1
    if not defined:
        return Dependence(n, k, a, b, c, d, None, 0.0, CAP, confidence, patterns=patterns)
    if min(a, b, c, d) == 0:
        est = (a + 0.5) * (c + 0.5) / ((b + 0.5) * (d + 0.5))
    else:
        est = a * c / (b * d)
    est = min(CAP, max(1.0 / CAP, est))
    q = t_quantile(0.5 + confidence / 2.0, k - 1.0)
    def zg(gamma: float) -> float:
        return _z(patterns, a, b, c, d, k, gamma)

    top = math.log(CAP)
    # Lower end: the largest log-theta at which "OR <= theta" is still rejected (Z >= q).
    if zg(-top) < q:
        lower = -top
    else:
        lo, hi = -top, top
        for _ in range(_STEPS):
            mid = (lo + hi) / 2.0
            lo, hi = (mid, hi) if zg(mid) >= q else (lo, mid)
        lower = lo
    # Upper end: the smallest log-theta at which "OR >= theta" is rejected (Z <= -q).
    if zg(top) > -q:
        upper = top
    else:
        lo, hi = -top, top
        for _ in range(_STEPS):
            mid = (lo + hi) / 2.0
            lo, hi = (lo, mid) if zg(mid) <= -q else (mid, hi)
        upper = hi
    return Dependence(n, k, a, b, c, d, est, math.exp(lower), math.exp(upper), confidence, patterns=patterns)
