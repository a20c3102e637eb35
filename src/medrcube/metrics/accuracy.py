"""Accuracy of graded records and its Wilson score interval.

The denominator is graded records only (correct, wrong, unparsed, refused). Errors
(the model was not reached or failed) and unavailable items (restricted images) are
counted but never enter the denominator: an API error is not a wrong answer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

from medrcube.records import GradedRecord, Outcome


def z_value(confidence: float) -> float:
    """The two-sided standard normal quantile for `confidence` (1.96 at 0.95)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_from_proportion(p: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion `p` observed on an (effective) sample size `n`.

    `n` may be fractional: the cluster-aware interval feeds an effective sample size
    here (metrics.clustered). With n <= 0 there is no evidence: the interval is [0, 1].
    Reference: E. B. Wilson (1927), JASA 22:209-212, "Probable inference, the law of
    succession, and statistical inference".
    """
    if n <= 0:
        return (0.0, 1.0)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"proportion must be in [0, 1], got {p!r}")
    z = z_value(confidence)
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = (z / denom) * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n))
    # Clamp rounding noise: at p = 0 the exact lower bound is 0, at p = 1 the upper is 1.
    lo = 0.0 if p == 0.0 else max(0.0, centre - half)
    hi = 1.0 if p == 1.0 else min(1.0, centre + half)
    return (lo, hi)


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes out of n trials; (0.0, 1.0) when n == 0."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k!r}, n={n!r}")
    if n == 0:
        return (0.0, 1.0)
    return wilson_from_proportion(k / n, n, confidence)


@dataclass(frozen=True, slots=True)
class Accuracy:
    """Accuracy over graded records, with the Wilson interval and what was left out.

    `acc` is None when nothing was graded (n == 0); the interval is then [0, 1].
    """

    n: int  # graded records: the denominator
    correct: int
    acc: float | None
    lo: float
    hi: float
    unparsed: int  # graded as not correct: the response named no single option
    refused: int  # graded as not correct
    errors: int  # excluded from n: the model was not reached or failed
    unavailable: int  # excluded from n: restricted image, not asked

    @property
    def total(self) -> int:
        """Every record seen, graded or not."""
        return self.n + self.errors + self.unavailable

    @property
    def error_rate(self) -> float:
        """Errors over records that were asked (graded + errors); 0.0 when none were."""
        asked = self.n + self.errors
        return self.errors / asked if asked else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def accuracy(records: Iterable[GradedRecord], confidence: float = 0.95) -> Accuracy:
    """Accuracy of `records` with a (plain, unclustered) Wilson interval at `confidence`."""
    counts = {o: 0 for o in Outcome}
    for r in records:
        counts[r.outcome] += 1
    return accuracy_of_counts(counts, confidence)


def accuracy_of_counts(counts: Mapping[Outcome, int], confidence: float = 0.95) -> Accuracy:
    """`accuracy` of records counted by outcome (every outcome a key)."""
    correct = counts[Outcome.CORRECT]
    n = correct + counts[Outcome.WRONG] + counts[Outcome.UNPARSED] + counts[Outcome.REFUSED]
    lo, hi = wilson_interval(correct, n, confidence)
    return Accuracy(
        n=n,
        correct=correct,
        acc=correct / n if n else None,
        lo=lo,
        hi=hi,
        unparsed=counts[Outcome.UNPARSED],
        refused=counts[Outcome.REFUSED],
        errors=counts[Outcome.ERROR],
        unavailable=counts[Outcome.UNAVAILABLE],
    )


def chance_level(records: Iterable[GradedRecord], power: int = 1) -> float | None:
    """The accuracy of uniform random answers over the graded records: the mean of
    (1/n_options)^power (power = the number of rotations that must all be right, for
    circular accuracy). None when nothing was graded. The gate's bounds and the report's
    chance lines both use this one definition."""
    return chance_level_of_options((r.n_options for r in records if r.graded), power)


def chance_level_of_options(option_counts: Iterable[int], power: int = 1) -> float | None:
    """The same mean over option counts (items not yet asked), summed by option count so
    that order cannot change it; None when there is none."""
    return chance_level_of_counts(Counter(option_counts), power)


def chance_level_of_counts(counts: Mapping[int, int], power: int = 1) -> float | None:
    """The same mean over items counted by their number of options (options -> items)."""
    counts = {k: c for k, c in counts.items() if k > 0 and c > 0}
    total = sum(counts.values())
    if not total:
        return None
    return sum(c * (1.0 / k) ** power for k, c in sorted(counts.items())) / total
