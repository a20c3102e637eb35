"""A cluster-robust interval for the mean of per-item differences.

Regression (baseline - candidate), image dependence (standard - blind) and position
robustness (standard - circular) are paired questions: each item contributes a
difference d_i in {-1, 0, 1}. Items on one image are not independent, so the mean
difference gets a cluster-robust (sandwich) standard error over images, with the
small-sample factor K / (K - 1) and Student's t on K - 1 degrees of freedom
(Miller 2024, "Adding Error Bars to Evals", arXiv 2411.00640; Cameron & Miller 2015,
J. Human Resources 50:317). McNemar's test assumes independent pairs and is not used
for decisions any more; the exact McNemar p-value stays in the outputs for reference.

Degenerate data (every difference equal, e.g. a candidate identical to its baseline)
give a sandwich variance of 0; the standard error is then floored at the one of a
table with one more discordant pair, sqrt(b + c + 1) / n, so that no interval has zero
width on finite evidence.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from medrcube.metrics.clustered import t_quantile, t_sf

METHOD = "cluster-robust mean difference over images (CR1 sandwich), t(K-1); se floor sqrt(b+c+1)/n"


@dataclass(frozen=True, slots=True)
class MeanDifference:
    """Mean of paired differences with its clustered interval."""

    n: int  # pairs
    clusters: int  # K images
    estimate: float | None
    se: float
    df: float
    lo: float
    hi: float
    confidence: float
    discordant: int  # pairs whose difference is not 0 (b + c)
    method: str = METHOD

    def p_at_most(self, bound: float) -> float:
        """One-sided p of H0: true mean difference <= bound (small: decisively above it)."""
        if self.estimate is None or self.df < 1:
            return 1.0
        return t_sf((self.estimate - bound) / self.se, self.df)

    def p_at_least(self, bound: float) -> float:
        """One-sided p of H0: true mean difference >= bound (small: decisively below it)."""
        if self.estimate is None or self.df < 1:
            return 1.0
        return t_sf((bound - self.estimate) / self.se, self.df)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["df"] = None if math.isinf(self.df) else self.df
        return d


def clustered_mean_difference(units: Iterable[tuple[str, float]], confidence: float = 0.95) -> MeanDifference:
    """The mean of (cluster key, difference) units with its cluster-robust interval."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    discordant = 0
    for key, d in units:
        s = sums[key]
        s[0] += d
        s[1] += 1.0
        discordant += d != 0
    n = int(sum(s[1] for s in sums.values()))
    big_k = len(sums)
    if n == 0:
        return MeanDifference(0, 0, None, math.inf, 0.0, -1.0, 1.0, confidence, 0)
    mean = sum(s[0] for s in sums.values()) / n
    # Per image: the sum of its residuals; sorted keys make the float sum order-free.
    resid = [sums[k][0] - mean * sums[k][1] for k in sorted(sums)]
    var = sum(r * r for r in resid) / (n * n) * (big_k / (big_k - 1) if big_k > 1 else math.inf)
    floor = math.sqrt(discordant + 1) / n
    se = max(math.sqrt(var) if math.isfinite(var) else math.inf, floor)
    df = float(big_k - 1)
    q = t_quantile(0.5 + confidence / 2.0, df)
    half = q * se
    lo = max(-1.0, mean - half) if math.isfinite(half) else -1.0
    hi = min(1.0, mean + half) if math.isfinite(half) else 1.0
    return MeanDifference(n, big_k, mean, se, df, lo, hi, confidence, discordant)
