"""A Wilson interval that accounts for items sharing one image.

Several items of a chain are asked about the same image, so their outcomes are not
independent: a model that misreads an image tends to miss every question about it.
Treating them as independent would make intervals too narrow on slices and overall.

Method (design effect / effective sample size):

1. Clusters are images. Cluster i has m_i graded items of which k_i are correct;
   n = sum m_i, K clusters, p = sum k_i / n.
2. The intra-cluster correlation rho is estimated with the one-way ANOVA estimator
   (Donner & Klar 2000, *Design and Analysis of Cluster Randomization Trials*, sec. 5;
   shown by Ridout, Demetrio & Firth 1999, Biometrics 55:137-148, to behave well for
   binary outcomes):
       MSB = sum m_i (p_i - p)^2 / (K - 1)
       MSW = sum m_i p_i (1 - p_i) / (n - K)
       m0  = (n - sum m_i^2 / n) / (K - 1)
       rho = (MSB - MSW) / (MSB + (m0 - 1) MSW),   clamped to [0, 1].
3. Kish's design effect with the mean cluster size m = n / K
   (Kish 1965, *Survey Sampling*):  deff = 1 + (m - 1) rho,  n_eff = n / deff.
4. The Wilson score interval is computed for p on n_eff trials, as recommended for
   clustered surveys by Dean & Pagano (2015), J. Survey Stat. Methodol. 3:484-503
   (following Korn & Graubard 1998, Survey Methodology 24:193-201).

Properties the tests check: with no clustering (every image carries one item) m = 1,
deff = 1 and the interval is plain Wilson; with perfectly correlated clusters
(MSW = 0) rho = 1, deff = m, n_eff = K: the interval is Wilson on the number of images.

Edge cases, chosen so that the interval is never narrower than plain Wilson:
rho is clamped at 0 (a negative estimate would shrink the interval); when rho cannot
be estimated (one cluster, or every item agrees so MSB = MSW = 0) it is taken as 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from medrcube.metrics.accuracy import wilson_from_proportion
from medrcube.records import GradedRecord


@dataclass(frozen=True, slots=True)
class ClusteredInterval:
    """A proportion with its cluster-aware Wilson interval and how it was obtained."""

    k: int  # successes
    n: int  # units (graded items, or pairs)
    clusters: int  # K: distinct images
    icc: float  # rho after clamping to [0, 1] (0 when not estimable)
    deff: float  # design effect, >= 1
    n_eff: float  # n / deff
    lo: float
    hi: float

    @property
    def estimate(self) -> float | None:
        return self.k / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def icc_anova(clusters: Sequence[tuple[int, int]]) -> float | None:
    """The ANOVA estimate of the intra-cluster correlation, unclamped.

    `clusters` holds (k_i, m_i) pairs: successes and size of each cluster (m_i >= 1).
    None when it cannot be estimated: fewer than two clusters, no cluster with more
    than one unit, or no variation at all (every unit has the same outcome).
    """
    sizes = [m for _, m in clusters]
    if any(m < 1 for m in sizes):
        raise ValueError("every cluster needs at least one unit")
    if any(not 0 <= k <= m for k, m in clusters):
        raise ValueError("need 0 <= k_i <= m_i in every cluster")
    big_k = len(clusters)
    n = sum(sizes)
    if big_k < 2 or n == big_k:
        return None
    total = sum(k for k, _ in clusters)
    ssb = sum(k * k / m for k, m in clusters) - total * total / n
    ssw = sum(k - k * k / m for k, m in clusters)
    msb = ssb / (big_k - 1)
    msw = ssw / (n - big_k)
    m0 = (n - sum(m * m for m in sizes) / n) / (big_k - 1)
    denom = msb + (m0 - 1.0) * msw
    if denom <= 1e-15:
        return None
    return (msb - msw) / denom


def clustered_wilson(clusters: Sequence[tuple[int, int]], confidence: float = 0.95) -> ClusteredInterval:
    """The cluster-aware Wilson interval for (k_i, m_i) clusters (see the module doc)."""
    clusters = [c for c in clusters if c[1] > 0]
    n = sum(m for _, m in clusters)
    k = sum(c for c, _ in clusters)
    big_k = len(clusters)
    if n == 0:
        return ClusteredInterval(0, 0, 0, 0.0, 1.0, 0.0, 0.0, 1.0)
    raw = icc_anova(clusters)
    rho = 0.0 if raw is None else min(1.0, max(0.0, raw))
    deff = 1.0 + (n / big_k - 1.0) * rho
    n_eff = n / deff
    lo, hi = wilson_from_proportion(k / n, n_eff, confidence)
    return ClusteredInterval(k, n, big_k, rho, deff, n_eff, lo, hi)


def image_key(record: GradedRecord) -> str:
    """The cluster of a record: its image, or the item itself when it has no image."""
    return f"image:{record.image}" if record.image else f"item:{record.item_id}"


def cluster_counts(
    units: Iterable[tuple[str, bool]],
) -> list[tuple[int, int]]:
    """(k_i, m_i) per cluster from (cluster key, success) units, ordered by key so that
    the floating-point sums, hence the interval, do not depend on the order of records
    (pytest-xdist workers may deliver them in any order)."""
    acc: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for key, ok in units:
        cell = acc[key]
        cell[0] += 1 if ok else 0
        cell[1] += 1
    return [(acc[key][0], acc[key][1]) for key in sorted(acc)]


def clustered_accuracy(
    records: Iterable[GradedRecord],
    confidence: float = 0.95,
    key: Callable[[GradedRecord], str] = image_key,
) -> ClusteredInterval:
    """Accuracy of the graded records with the interval clustered by image."""
    units = ((key(r), r.correct) for r in records if r.graded)
    return clustered_wilson(cluster_counts(units), confidence)
