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

Inference: a robust score test of the point null OR = theta, clustered by image (Rao's
score test with a sandwich variance; Boos 1992, Am. Stat. 46:327). Under it the nuisance
beta = logit P(H | L wrong) is fitted by maximum likelihood with logit P(H | L right) =
beta + log(theta); the efficient score for log(theta) has per-image contributions

    s_j = (1 - w)(a_j - n1_j pi1) - w (d_j - n0_j pi0),   w = v1 / (v1 + v0),

(v1 = n1 pi1 (1 - pi1), v0 = n0 pi0 (1 - pi0)), and Z(theta) = sum s_j / sqrt(V) with V
the sandwich K/(K-1) sum s_j^2, never below the variance the score has with independent
pairs (v1 v0 / (v1 + v0)): the test is not made bolder than the unclustered one by an
unlucky small sample. Z is referred to Student's t on K - 1 degrees of freedom (K images
with pairs). Being a score test, its variance is taken under the null: with few wrong
diagnoses over a wrong perception (a model right on most diagnoses) it stays decisive
where Woolf's interval (1/A + 1/B + 1/C + 1/D) is not.

The claims are one-sided and composite ("OR <= b", "OR >= b"), and their p-values are
the largest point-null p-value over the null side of the bound (the p-value of a
composite null; Lehmann & Romano, Testing Statistical Hypotheses, 3rd ed., sec. 3.3):

    p_at_most(b)  = max over theta <= b of P(T > Z(theta)),
    p_at_least(b) = max over theta >= b of P(T < Z(theta)),   T ~ t(K - 1).

The sandwich is re-estimated at each theta, so Z(theta) is not monotone (its numerator
falls with theta, its variance moves; far from the data it tends to a finite limit, as
a sandwich-studentised sum is bounded by sqrt(K - 1)), and the point-null p-value at b
alone is not monotone in b: on random clustered tables of 2 images it fell as b rose in
36% of them, by up to 0.023 (benchmarks/RESULTS.md section 28). The maximum over the
null side is monotone by construction and no smaller than the point p-value at any theta
of the null, so each claim keeps the point test's level at every theta on its null side;
it differs from the point p-value only where Z somewhere on the null side comes below
(for "OR >= b": above) its value at the bound, which happens on tables of a few images,
where Z turns back far from the data. The set of
bounds neither claim rejects at level alpha/2 each is then an interval, and it is the
interval reported, so interval and decisions never disagree.

The parameter space is [1/CAP, CAP] (1e-4 to 1e4), where the interval is searched and
the estimate clamped: a bound outside it is read as its end. The maximum is taken over a
grid of log(theta) (step GRID_STEP) refined by golden-section search at each of Z's grid
local extrema, with the point itself: exact to rounding when Z has at most one turn per
two grid steps (Z is a ratio of smooth functions of theta whose shape in log(theta) is
set by the table's proportions more than by its size, with one kink where the floor
takes over).
The estimate is the sample odds ratio, with 0.5 added to every group when one is empty
(Haldane).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from medrcube.metrics.clustered import t_quantile, t_sf

METHOD = ("odds ratio of a right diagnosis on a right perception of the same image: robust score test "
          "clustered by image (sandwich variance, floored at the independent-pairs one), t(K-1); the p-value of "
          "a bound the largest over its null side (composite null), monotone in the bound")
CAP = 1e4
TOP = math.log(CAP)
GRID_STEP = 0.1  # spacing of the tabulated Z(theta) in log(theta)
_STEPS = 48  # bisection steps of the interval's ends
_REFINE = 45  # golden-section steps at a grid extremum (the bracket shrinks 0.618^45: 4e-10 of it)
_INVPHI = (math.sqrt(5.0) - 1.0) / 2.0


def _expit(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


Pattern = tuple[int, int, int, int]  # one image's (a, b, c, d)


@dataclass(frozen=True, slots=True)
class _Score:
    """The robust score statistic Z(gamma) of "log OR = gamma" on one table."""

    rows: tuple[tuple[int, int, int, int, int], ...]  # (a, a + b, d, c + d, images with this pattern)
    n1: int  # pairs with L right: A + B
    n0: int  # pairs with L wrong: C + D
    right: int  # pairs with H right: A + D
    k: int  # images

    @staticmethod
    def of(patterns: tuple[tuple[Pattern, int], ...], a: int, b: int, c: int, d: int, k: int) -> _Score:
        rows = tuple((pa, pa + pb, pd, pc + pd, n) for (pa, pb, pc, pd), n in patterns)
        return _Score(rows, a + b, c + d, a + d, k)

    def beta(self, gamma: float, start: float = 0.0) -> float:
        """logit P(H | L wrong) fitted under "log OR = gamma": the root of
        n1 expit(beta + gamma) + n0 expit(beta) = A + D (Newton's method kept inside a
        shrinking bracket, bisection when a step leaves it)."""
        n1, n0, right = self.n1, self.n0, self.right
        exp = math.exp
        lo, hi = -60.0, 60.0
        x = min(hi, max(lo, start))
        for _ in range(200):
            # _expit of x + gamma and of x, written out (the same arithmetic, without two calls a step:
            # a family's credibility checks take about 2,000 steps after the last answer)
            t = x + gamma
            if t >= 0:
                p1 = 1.0 / (1.0 + exp(-t))
            else:
                e = exp(t)
                p1 = e / (1.0 + e)
            if x >= 0:
                p0 = 1.0 / (1.0 + exp(-x))
            else:
                e = exp(x)
                p0 = e / (1.0 + e)
            f = n1 * p1 + n0 * p0 - right
            if f < 0.0:
                lo = x
            else:
                hi = x
            slope = n1 * p1 * (1.0 - p1) + n0 * p0 * (1.0 - p0)
            if slope > 0.0:
                nx = x - f / slope
                # Converged: the step is below the tolerance. Tested before the bracket, as a
                # step that rounds to nothing lands on the bracket's end (x itself) and a
                # bisection from there would leave the root (about 24 steps a call instead of 5).
                if abs(nx - x) <= 1e-12:
                    return min(hi, max(lo, nx))
            else:
                nx = (lo + hi) / 2.0
            if not lo < nx < hi:
                nx = (lo + hi) / 2.0
            if abs(nx - x) <= 1e-12 or hi - lo <= 1e-12:
                return nx
            x = nx
        return x

    def z(self, gamma: float, beta: float | None = None) -> float:
        """Z at log OR = gamma (beta: the fitted nuisance, when already known)."""
        if beta is None:
            beta = self.beta(gamma)
        pi1, pi0 = _expit(beta + gamma), _expit(beta)
        v1, v0 = self.n1 * pi1 * (1.0 - pi1), self.n0 * pi0 * (1.0 - pi0)
        if v1 + v0 <= 0.0:
            return 0.0
        w = v1 / (v1 + v0)
        rest = 1.0 - w
        u = 0.0
        ss = 0.0
        for pa, m1, pd, m0, count in self.rows:  # the same products and sums, each made once
            s = rest * (pa - m1 * pi1) - w * (pd - m0 * pi0)
            weighted = count * s
            u += weighted
            ss += weighted * s
        k = self.k
        robust = ss * k / (k - 1.0) if k > 1 else math.inf
        var = max(robust, v1 * v0 / (v1 + v0))
        return u / math.sqrt(var) if var > 0.0 else 0.0


def _golden(f: Callable[[float], float], lo: float, hi: float, sign: float) -> tuple[float, float]:
    """The (x, f(x)) evaluated in [lo, hi] with the smallest sign * f: golden-section search."""
    x1, x2 = hi - _INVPHI * (hi - lo), lo + _INVPHI * (hi - lo)
    f1, f2 = sign * f(x1), sign * f(x2)
    best = (x1, f1) if f1 <= f2 else (x2, f2)
    for _ in range(_REFINE):
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - _INVPHI * (hi - lo)
            f1 = sign * f(x1)
            if f1 < best[1]:
                best = (x1, f1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + _INVPHI * (hi - lo)
            f2 = sign * f(x2)
            if f2 < best[1]:
                best = (x2, f2)
    return best[0], sign * best[1]


@dataclass(frozen=True, slots=True)
class _Envelope:
    """Z tabulated over [-TOP, TOP] in log(theta): its running minimum from the left (the
    smallest Z over "OR <= theta") and its running maximum from the right (the largest
    over "OR >= theta")."""

    score: _Score
    at_min: tuple[float, ...]  # ascending log(theta)
    running_min: tuple[float, ...]  # min of Z over at_min[: i + 1]
    at_max: tuple[float, ...]  # ascending log(theta)
    running_max: tuple[float, ...]  # max of Z over at_max[i:]
    betas: tuple[float, ...]  # the fitted nuisance at each grid point: where Newton starts for a bound

    @staticmethod
    def of(score: _Score) -> _Envelope:
        n = round(2.0 * TOP / GRID_STEP)
        grid = [-TOP + 2.0 * TOP * i / n for i in range(n + 1)]
        zs = []
        betas = []
        beta = 0.0
        for g in grid:
            beta = score.beta(g, beta)
            betas.append(beta)
            zs.append(score.z(g, beta))
        lows = list(zip(grid, zs, strict=True))
        highs = list(lows)
        for i in range(1, n):
            left, mid, right = zs[i - 1], zs[i], zs[i + 1]
            if mid <= left and mid <= right and (mid < left or mid < right):
                lows.append(_golden(score.z, grid[i - 1], grid[i + 1], 1.0))
            if mid >= left and mid >= right and (mid > left or mid > right):
                highs.append(_golden(score.z, grid[i - 1], grid[i + 1], -1.0))
        lows.sort()
        highs.sort()
        running_min: list[float] = []
        for _, z in lows:
            running_min.append(min(z, running_min[-1]) if running_min else z)
        running_max: list[float] = []
        for _, z in reversed(highs):
            running_max.append(max(z, running_max[-1]) if running_max else z)
        running_max.reverse()
        return _Envelope(score, tuple(g for g, _ in lows), tuple(running_min), tuple(g for g, _ in highs),
                         tuple(running_max), tuple(betas))

    def _z(self, gamma: float) -> float:
        """Z at gamma, Newton started from the nuisance fitted at the nearest grid point."""
        i = min(len(self.betas) - 1, max(0, round((gamma + TOP) / (2.0 * TOP) * (len(self.betas) - 1))))
        return self.score.z(gamma, self.score.beta(gamma, self.betas[i]))

    def z_at_most(self, gamma: float) -> float:
        """The smallest Z over log(theta) <= gamma (gamma clamped into [-TOP, TOP])."""
        gamma = min(TOP, max(-TOP, gamma))
        z = self._z(gamma)
        i = bisect.bisect_right(self.at_min, gamma) - 1
        return min(z, self.running_min[i]) if i >= 0 else z

    def z_at_least(self, gamma: float) -> float:
        """The largest Z over log(theta) >= gamma (gamma clamped into [-TOP, TOP])."""
        gamma = min(TOP, max(-TOP, gamma))
        z = self._z(gamma)
        i = bisect.bisect_left(self.at_max, gamma)
        return max(z, self.running_max[i]) if i < len(self.at_max) else z


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
    # The tabulated statistic the composite p-values read (None when undefined).
    envelope: _Envelope | None = field(default=None, repr=False, compare=False)

    @property
    def defined(self) -> bool:
        return self.odds_ratio is not None

    def z(self, theta: float) -> float:
        """The robust score statistic of the point null OR = theta (positive: more
        dependence than theta). Not monotone in theta; the p-values below are."""
        return _Score.of(self.patterns, self.A, self.B, self.C, self.D, self.images).z(math.log(theta))

    def p_at_most(self, bound: float) -> float:
        """One-sided p of H0: OR <= bound (small: decisively dependent), the largest
        point-null p over theta <= bound: non-decreasing in the bound."""
        if not self.defined or self.envelope is None:
            return 1.0
        return t_sf(self.envelope.z_at_most(math.log(bound)), self.images - 1.0)

    def p_at_least(self, bound: float) -> float:
        """One-sided p of H0: OR >= bound (small: decisively below it: a shortcut), the
        largest point-null p over theta >= bound: non-increasing in the bound."""
        if not self.defined or self.envelope is None:
            return 1.0
        return t_sf(-self.envelope.z_at_least(math.log(bound)), self.images - 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "images": self.images, "A": self.A, "B": self.B, "C": self.C, "D": self.D,
                "odds_ratio": self.odds_ratio, "lo": self.lo, "hi": self.hi, "confidence": self.confidence,
                "method": self.method}


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
    env = _Envelope.of(_Score.of(patterns, a, b, c, d, k))
    q = t_quantile(0.5 + confidence / 2.0, k - 1.0)
    # Lower end: the largest log-theta at which "OR <= theta" is still rejected (its
    # smallest Z over the null side >= q: non-increasing in theta, so one crossing).
    if env.z_at_most(-TOP) < q:
        lower = -TOP
    else:
        lo, hi = -TOP, TOP
        for _ in range(_STEPS):
            mid = (lo + hi) / 2.0
            lo, hi = (mid, hi) if env.z_at_most(mid) >= q else (lo, mid)
        lower = lo
    # Upper end: the smallest log-theta at which "OR >= theta" is rejected (its largest
    # Z over the null side <= -q).
    if env.z_at_least(TOP) > -q:
        upper = TOP
    else:
        lo, hi = -TOP, TOP
        for _ in range(_STEPS):
            mid = (lo + hi) / 2.0
            lo, hi = (lo, mid) if env.z_at_least(mid) <= -q else (mid, hi)
        upper = hi
    return Dependence(n, k, a, b, c, d, est, math.exp(lower), math.exp(upper), confidence, patterns=patterns,
                      envelope=env)
