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

The bet l_i is predictable (it uses what was seen before image i only): the approximate
growth-rate optimal bet aGRAPA, l = sum(y) / sum(y^2) over the past outcomes (their mean
over their second moment), with a few pseudo-outcomes added to both sums (`Prior`: the
driver takes them from the accuracy of everything asked so far, so a cell's first bets
are not made blind; without them the first bet is 0), capped at MAX_BET / L where L is
the largest loss an outcome can bring (b for the pass test, whose outcomes are at least
-b, and 1 - b for the fail test): the worst image then leaves a fifth of the wealth,
whatever the bound. (A cap on l itself, not on l * L, would
throw away most of the growth when images hold several items and a typical outcome is far
smaller than the scale.) Decided when log K_t >= log(1/alpha); once decided a test stays
decided (the run stops asking for it).

A family of fail claims. Each fail test's wealth is a test supermartingale under its own
null, over the same global order of images (an image outside a check's scope leaves its
wealth as it is), so the average of the wealths of any set S of checks is one under the
intersection of their nulls, and so is a weighted average with weights fixed in advance.
`closed_rejections` rejects check i when that average reaches 1/alpha for every S
holding i: closed testing with averaged e-values (Vovk & Wang 2021). The family-wise
error is at most alpha at any stopping time, since a false rejection needs the average
over the true nulls to have reached 1/alpha, which by Ville happens with probability at
most alpha. Unweighted, it rejects whatever Bonferroni (e_i >= K/alpha) rejects, and much
more when several checks fail together. The driver weighs each check by the images in
its scope: a small cell, whose e-value stays near 1 for lack of images, then holds the
others back little (and a check that could not reach 1/alpha even on perfect evidence
has weight 0: it can never be rejected, so it need not be in the family).

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
from dataclasses import dataclass, replace

import numpy as np

MAX_BET = 0.8  # of the largest possible loss: the worst outcome leaves a fifth of the wealth


@dataclass(frozen=True, slots=True)
class Prior:
    """Pseudo-outcomes for a bet: `weight` outcomes of mean `mean` and second moment
    `second`. They may come from anything already seen (other checks' images asked
    before this one): the bet stays predictable, so the test stays valid whatever the
    prior; a good prior only makes the early bets less timid."""

    mean: float
    second: float
    weight: float

    def flipped(self) -> Prior:
        return Prior(-self.mean, self.second, self.weight)


@dataclass(frozen=True, slots=True)
class BetState:
    """A one-sided betting test's running state over outcomes y in [-max_loss, 1]."""

    max_loss: float = 1.0  # the largest loss one outcome can bring (the magnitude of its minimum)
    log_wealth: float = 0.0
    n: int = 0
    total: float = 0.0
    total_sq: float = 0.0

    def bet(self, prior: Prior | None = None) -> float:
        """The predictable bet for the next outcome: aGRAPA, sum(y) / sum(y^2) over the
        past outcomes (the mean over the second moment), with `prior`'s pseudo-outcomes
        added to both sums, clipped to [0, cap]. Without a prior the first bet is 0."""
        total, total_sq = self.total, self.total_sq
        if prior is not None:
            total += prior.weight * prior.mean
            total_sq += prior.weight * prior.second
        if total <= 0.0 or total_sq <= 0.0:
            return 0.0
        return min(total / total_sq, self.cap)

    @property
    def cap(self) -> float:
        return MAX_BET / max(self.max_loss, 1e-6)

    def update(self, y: float, prior: Prior | None = None) -> BetState:
        if not -self.max_loss - 1e-9 <= y <= 1.0 + 1e-9:
            raise ValueError(f"betting outcome {y} outside [{-self.max_loss:.3g}, 1]")
        lam = self.bet(prior)
        return BetState(
            max_loss=self.max_loss,
            log_wealth=self.log_wealth + math.log1p(lam * y),
            n=self.n + 1,
            total=self.total + y,
            total_sq=self.total_sq + y * y,
        )


@dataclass(frozen=True, slots=True)
class SequentialTest:
    """Both one-sided tests of one check: reaching `bound` (pass) and missing it (fail).

    `alpha_pass` and `alpha_fail` are the levels of the two claims; `scale` is the largest
    outcome magnitude before scaling (the largest image size M for accuracy, M * (1 + margin)
    for a paired drop); `up` and `down` know the largest loss of their outcomes. With
    `fail_by_family` the fail test never decides on its own: the caller decides it with the
    rest of its family (`closed_rejections`) and records that with `decide_fail`."""

    alpha_pass: float
    alpha_fail: float
    scale: float
    up: BetState = BetState()
    down: BetState = BetState()
    fail_by_family: bool = False
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

    def update(self, centred: float, prior: Prior | None = None) -> SequentialTest:
        """Add one image whose outcome, centred at the null boundary, is `centred`
        (c_j - b m_j for accuracy; positive is evidence for passing); `prior` (on the pass
        test's scale) seeds both bets."""
        if self.decision is not None:
            return self
        y = centred / self.scale
        up = self.up.update(y, prior)
        down = self.down.update(-y, prior.flipped() if prior is not None else None)
        decision = None
        if up.log_wealth >= math.log(1.0 / self.alpha_pass):
            decision = "pass"
        elif not self.fail_by_family and down.log_wealth >= math.log(1.0 / self.alpha_fail):
            decision = "fail"
        return replace(self, up=up, down=down, decided_at=up.n if decision else None, decision=decision)

    def decide_fail(self) -> SequentialTest:
        """The fail claim, rejected by the family rule at the images seen so far."""
        if self.decision is not None:
            return self
        return replace(self, decided_at=self.n, decision="fail")

    def extend(self, centred: Iterable[float]) -> SequentialTest:
        state = self
        for c in centred:
            state = state.update(c)
            if state.decision is not None:
                break
        return state


def accuracy_test_start(bound: float, alpha_pass: float, alpha_fail: float, max_size: int,
                        *, fail_by_family: bool = False) -> SequentialTest:
    """A fresh test of "accuracy >= bound" whose images hold at most `max_size` items:
    scaled outcomes (c - b m) / M lie in [-b, 1 - b]."""
    if max_size < 1:
        raise ValueError("max_size must be at least 1")
    return SequentialTest(alpha_pass, alpha_fail, float(max_size), BetState(max_loss=bound),
                          BetState(max_loss=1.0 - bound), fail_by_family)


def drop_test_start(margin: float, alpha_pass: float, alpha_fail: float, max_size: int,
                    *, fail_by_family: bool = False) -> SequentialTest:
    """A fresh non-inferiority test of a paired drop within `margin`: scaled outcomes
    (margin m - (base - cand)) / (M (1 + margin)) lie in [-(1 - margin) / (1 + margin), 1]."""
    if max_size < 1:
        raise ValueError("max_size must be at least 1")
    return SequentialTest(alpha_pass, alpha_fail, float(max_size) * (1.0 + margin),
                          BetState(max_loss=(1.0 - margin) / (1.0 + margin)), BetState(max_loss=1.0), fail_by_family)


def accuracy_test(
    clusters: Sequence[tuple[int, int]], bound: float, alpha_pass: float, alpha_fail: float, max_size: int
) -> SequentialTest:
    """The sequential test of "accuracy >= bound" over images in the given order.

    `clusters`: (correct, graded) per image, in the order the images were asked."""
    test = accuracy_test_start(bound, alpha_pass, alpha_fail, max_size)
    return test.extend(c - bound * m for c, m in clusters)


def drop_test(
    pairs: Sequence[tuple[int, int, int]], margin: float, alpha_pass: float, alpha_fail: float, max_size: int
) -> SequentialTest:
    """Non-inferiority of a paired drop (baseline - candidate accuracy) within `margin`.

    `pairs`: (baseline correct, candidate correct, items graded by both) per image.
    Passing means the drop is below the margin."""
    test = drop_test_start(margin, alpha_pass, alpha_fail, max_size)
    return test.extend(margin * m - (base - cand) for base, cand, m in pairs)


def closed_rejections(e_values: Sequence[float], alphas: Sequence[float],
                      weights: Sequence[float] | None = None) -> list[bool]:
    """Which hypotheses closed testing with (weighted) averaged e-values rejects.

    Hypothesis i is rejected when, for every set S holding i, the weighted mean of the
    e-values in S is at least 1 / alpha_i, that is when its e-value reaches the level
    `closed_levels` gives it. The weights are fixed before any data (a weighted mean of
    e-processes is one); a hypothesis of weight 0 is outside the family and never rejected."""
    w = [1.0] * len(e_values) if weights is None else weights
    return [e >= need for e, need in zip(e_values, closed_levels(e_values, alphas, w), strict=True)]


def closed_levels(e_values: Sequence[float], alphas: Sequence[float], weights: Sequence[float]) -> list[float]:
    """The e-value each hypothesis needs, the others as they are, for closed testing with
    averaged e-values to reject it (inf for weight 0).

    The smallest mean over the sets holding i is reached by adding to i the other
    e-values from the smallest up (one below the running mean lowers it, whatever its
    weight), so the level is the largest, over the prefixes P of the others in that order
    (P empty included), of (L (w_i + W_P) - E_P) / w_i, with L = 1 / alpha_i, W_P their
    weight and E_P their weighted e-values: one sort and one pass per hypothesis."""
    k = len(e_values)
    if len(alphas) != k or len(weights) != k:
        raise ValueError("one alpha and one weight per e-value")
    if any(x < 0 for x in weights):
        raise ValueError("weights must be non-negative")
    order = sorted((j for j in range(k) if weights[j] > 0), key=lambda j: e_values[j])
    out = []
    for i in range(k):
        if weights[i] <= 0:
            out.append(math.inf)
            continue
        level = 1.0 / alphas[i]
        need, w_sum, e_sum = level, 0.0, 0.0
        for j in order:
            if j == i:
                continue
            w_sum, e_sum = w_sum + weights[j], e_sum + weights[j] * e_values[j]
            need = max(need, (level * (weights[i] + w_sum) - e_sum) / weights[i])
        out.append(need)
    return out


def projected_log_wealth(state: BetState, left: int, optimism: float = 1.0) -> float:
    """Where a test's log wealth would end, about, after `left` more outcomes like the past
    ones, the mean taken `optimism` standard errors in the test's favour: growth per
    outcome lam m - lam^2 s2 / 2 at the bet lam = min(m / s2, cap) (s2 the second moment).
    A planning figure: no claim is decided by it."""
    if state.n < 2 or left <= 0:
        return state.log_wealth
    mean = state.total / state.n
    second = state.total_sq / state.n
    var = max(second - mean * mean, 0.0)
    m = mean + optimism * math.sqrt(var / state.n)
    if m <= 0:
        return state.log_wealth
    s2 = max(var + m * m, 1e-12)
    lam = min(m / s2, state.cap)
    return state.log_wealth + left * max(lam * m - lam * lam * s2 / 2.0, 0.0)


def log_wealth_paths(y: np.ndarray, max_loss: float = 1.0) -> np.ndarray:
    """Vectorised pass-side log wealth over rows of outcomes y (reps x t) in [-max_loss, 1].

    The same bet as BetState, for simulation: row r, column t is log K_t of replicate r."""
    reps, t = y.shape
    out = np.zeros((reps, t))
    total = np.zeros(reps)
    total_sq = np.zeros(reps)
    log_w = np.zeros(reps)
    cap = BetState(max_loss=max_loss).cap
    for i in range(t):
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.where((total > 0.0) & (total_sq > 0.0), np.minimum(total / total_sq, cap), 0.0)
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
