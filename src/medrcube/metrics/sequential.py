"""Anytime-valid one-sided tests of a bound, by betting, over images in a random order.

Why this method. A sequential gate looks at its evidence after every batch; a fixed-n
confidence interval inspected that often loses its error rate (peeking). A test
supermartingale does not: by Ville's inequality, the probability that its wealth ever
reaches 1/alpha under the null is at most alpha, whenever the run stops. Among the
time-uniform methods (Howard et al. 2021's boundaries, Waudby-Smith & Ramdas 2024's
betting confidence sequences), betting is the tightest for bounded outcomes and needs
no variance assumption; the images of a check are the unit of sampling, so the
per-image counts (correct of m items) are the bounded outcomes, and items that share an
image are accounted for without a design effect.

The test. For a check with bound b on item-level accuracy and images j with m_j items of
which c_j are right, the claim "accuracy >= b" is "E[c_j - b m_j] >= 0" over images.
With M the largest image size of the check, y_j = (c_j - b m_j) / M lies in [-1, 1].

- pass test, H0: accuracy <= b: wealth K_t = prod (1 + l_i y_i), l_i >= 0;
- fail test, H0: accuracy >= b: the same with -y_j.

The bet l_i is predictable (it uses images 1..i-1 only): the approximate growth-rate
optimal bet aGRAPA, l = clip(mean / (variance + mean^2), 0, MAX_BET), from the running
mean and variance of the past outcomes (shrunk towards 0 by one pseudo-observation, so
the first bet is 0). Decided when log K_t >= log(1/alpha); once decided a test stays
decided (the run stops asking for it).

Validity needs the images of one check to come as an i.i.d. sequence from the population
the cube samples: the cube's images are taken as such a sample (the same model the
fixed-n intervals use), and a uniformly random order of an i.i.d. sample is again one;
a check's stream is the global order filtered by the check's scope, so it is i.i.d. too.
This is why the order is a plain random permutation of images and not a stratified
interleaving: stratifying would make a slice's stream non-identically distributed and
void the supermartingale under a slice null.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

MAX_BET = 0.8  # below 1, so that no outcome can ruin the wealth (y = -1 leaves a fifth of it)
PRIOR_WEIGHT = 1.0  # pseudo-observations at 0 in the bet's running mean


@dataclass(frozen=True, slots=True)
class BetState:
    """A one-sided betting test's running state over outcomes y in [-1, 1]."""

    log_wealth: float = 0.0
    n: int = 0
    total: float = 0.0
    total_sq: float = 0.0

    def bet(self) -> float:
        """The predictable bet for the next outcome (aGRAPA from the past only)."""
        weight = self.n + PRIOR_WEIGHT
        mean = self.total / weight
        var = max(self.total_sq / weight - mean * mean, 0.0)
        if mean <= 0.0:
            return 0.0
        return min(mean / (var + mean * mean), MAX_BET)

    def update(self, y: float) -> BetState:
        if not -1.0 - 1e-12 <= y <= 1.0 + 1e-12:
            raise ValueError(f"betting outcome {y} outside [-1, 1]")
        lam = self.bet()
        return BetState(
            log_wealth=self.log_wealth + math.log1p(lam * y),
            n=self.n + 1,
            total=self.total + y,
            total_sq=self.total_sq + y * y,
        )


@dataclass(frozen=True, slots=True)
class SequentialTest:
    """Both one-sided tests of one check: reaching `bound` (pass) and missing it (fail).

    `alpha_pass` and `alpha_fail` are the levels of the two claims (the caller adjusts the
    fail level for the family); `scale` is the largest outcome magnitude before scaling
    (the largest image size M for accuracy, M * (1 + margin) for a paired drop)."""

    alpha_pass: float
    alpha_fail: float
    scale: float
    up: BetState = BetState()
    down: BetState = BetState()
    decided_at: int | None = None  # images seen when it decided
    decision: str | None = None  # "pass" or "fail"

    @property
    def n(self) -> int:
        return self.up.n

    @property
    def e_pass(self) -> float:
        return math.exp(self.up.log_wealth)

    @property
    def e_fail(self) -> float:
        return math.exp(self.down.log_wealth)

    def update(self, centred: float) -> SequentialTest:
        """Add one image whose outcome, centred at the null boundary, is `centred`
        (c_j - b m_j for accuracy; positive is evidence for passing)."""
        if self.decision is not None:
            return self
        y = centred / self.scale
        up, down = self.up.update(y), self.down.update(-y)
        decision = None
        if up.log_wealth >= math.log(1.0 / self.alpha_pass):
            decision = "pass"
        elif down.log_wealth >= math.log(1.0 / self.alpha_fail):
            decision = "fail"
        return SequentialTest(self.alpha_pass, self.alpha_fail, self.scale, up, down,
                              up.n if decision else None, decision)

    def extend(self, centred: Iterable[float]) -> SequentialTest:
        state = self
        for c in centred:
            state = state.update(c)
            if state.decision is not None:
                break
        return state


def accuracy_test(
    clusters: Sequence[tuple[int, int]], bound: float, alpha_pass: float, alpha_fail: float, max_size: int
) -> SequentialTest:
    """The sequential test of "accuracy >= bound" over images in the given order.

    `clusters`: (correct, graded) per image, in the order the images were asked."""
    if max_size < 1:
        raise ValueError("max_size must be at least 1")
    test = SequentialTest(alpha_pass, alpha_fail, float(max_size))
    return test.extend(c - bound * m for c, m in clusters)


def drop_test(
    pairs: Sequence[tuple[int, int, int]], margin: float, alpha_pass: float, alpha_fail: float, max_size: int
) -> SequentialTest:
    """Non-inferiority of a paired drop (baseline - candidate accuracy) within `margin`.

    `pairs`: (baseline correct, candidate correct, items graded by both) per image.
    Passing means the drop is below the margin."""
    test = SequentialTest(alpha_pass, alpha_fail, float(max_size) * (1.0 + margin))
    return test.extend(margin * m - (base - cand) for base, cand, m in pairs)


def log_wealth_paths(y: np.ndarray) -> np.ndarray:
    """Vectorised pass-side log wealth over rows of outcomes y (reps x t) in [-1, 1].

    The same bet as BetState, for simulation: row r, column t is log K_t of replicate r."""
    reps, t = y.shape
    out = np.zeros((reps, t))
    total = np.zeros(reps)
    total_sq = np.zeros(reps)
    log_w = np.zeros(reps)
    for i in range(t):
        weight = i + PRIOR_WEIGHT
        mean = total / weight
        var = np.maximum(total_sq / weight - mean * mean, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.where(mean > 0.0, np.minimum(mean / (var + mean * mean), MAX_BET), 0.0)
        log_w = log_w + np.log1p(lam * y[:, i])
        out[:, i] = log_w
        total += y[:, i]
        total_sq += y[:, i] ** 2
    return out


def images_needed(delta: float, alpha: float, spread: float = 1.0) -> int:
    """A planning figure: images a betting test needs, about, to decide when the centred
    per-image outcome has mean `delta` (in units of the scale) and spread `spread`.

    Growth per image of a near-optimal bet is about delta^2 / (2 (spread^2 + delta^2)), and
    the test decides at log(1/alpha); the figure is their ratio, rounded up."""
    if delta <= 0:
        return 0
    growth = delta * delta / (2.0 * (spread * spread + delta * delta))
    return math.ceil(math.log(1.0 / alpha) / growth)
