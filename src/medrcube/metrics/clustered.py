"""A score interval for a proportion that accounts for items sharing one image.

Several items of a chain are asked about the same image, so their outcomes are not
independent: a model that misreads an image tends to miss every question about it.
Treating them as independent makes intervals too narrow.

Method (named in every output as METHOD):

1. Clusters are images. Cluster j has m_j graded items of which k_j are correct;
   n = sum m_j, K clusters, p = sum k_j / n.
2. The intra-cluster correlation rho: the one-way ANOVA estimator (Donner & Klar 2000,
   *Design and Analysis of Cluster Randomization Trials*, sec. 5; Ridout, Demetrio &
   Firth 1999, Biometrics 55:137-148), clamped to [0, 1].
3. Kish's design effect for unequal clusters (Kish 1965, *Survey Sampling*):
       m_w = sum m_j^2 / n        (the size-weighted mean cluster size, not n / K)
       deff = 1 + (m_w - 1) rho,   n_eff = n / deff.
4. The Wilson score interval of p on n_eff trials (Dean & Pagano 2015, J. Survey Stat.
   Methodol. 3:484-503; Korn & Graubard 1998) with the quantile of Student's t on
   K_eff - 1 degrees of freedom in place of the normal one, K_eff = n / m_w the
   effective number of images (K when all images carry as many items): a small-sample
   correction for few or very unequal images (the reference of cluster-robust standard
   errors with a t(K-1) reference, Miller 2024, arXiv 2411.00640). With many images it
   is the normal quantile.

Fallbacks, chosen so that the interval is never narrower than the data allow:
- rho cannot be estimated (one image, or no within-image variation such as every
  item right): rho = 1, i.e. the evidence counts images, not items;
- a negative estimate is clamped to 0 (never shrinks the interval below plain Wilson);
- one image only: t on 0 degrees of freedom does not exist; the interval is [0, 1];
- no image carries two items: no clustering at all, plain Wilson (normal quantile).

The same score statistic gives the one-sided p-values the gate decides with
(`p_at_most`, `p_at_least`), so an interval and a decision never disagree.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from medrcube.metrics.special import ndtr, ndtri, stdtr, stdtrit
from medrcube.records import GradedRecord

METHOD = "Wilson score on the Kish effective n (sum m^2/n), t(n/m_w - 1) quantile; ICC=1 when not estimable"
# With few images (gate/criteria.py), the same interval with the ICC raised by this many
# of its standard errors: the ANOVA estimate is low exactly when a sample's images look
# alike, which is when its accuracy looks high, so the plain interval passes too often
# (one-sided miss 0.06 at 20 images x 8 items, p 0.95, ICC 0.5). Calibrated by
# simulation over 48 designs (benchmarks/few_images.py, RESULTS.md section 13).
FEW_IMAGES_ICC_MARGIN = 2.0
FEW_METHOD = (f"Wilson score on the Kish effective n, ICC raised by {FEW_IMAGES_ICC_MARGIN:g} standard errors "
              "(few images), t(n/m_w - 1) quantile; ICC=1 when not estimable")


@functools.lru_cache(maxsize=4096)
def t_quantile(level: float, df: float) -> float:
    """The `level` quantile of Student's t with df degrees of freedom (normal when df is
    infinite); inf when df < 1 (no evidence of the spread at all). metrics/special.py:
    scipy.special's functions, without the cost of importing scipy. Remembered: a run's
    verdicts and its metrics_summary.json ask it of the same groups (a root search each)."""
    if math.isinf(df):
        return float(ndtri(level))
    if df < 1:
        return math.inf
    return float(stdtrit(df, level))


def t_sf(x: float, df: float) -> float:
    """P(T > x) for Student's t with df degrees of freedom (normal when df is infinite)."""
    if math.isinf(df):
        return float(ndtr(-x))
    if df < 1:
        return 0.5 if math.isfinite(x) else (0.0 if x > 0 else 1.0)
    return float(stdtr(df, -x))


def wilson_q(p: float, n: float, q: float) -> tuple[float, float]:
    """The Wilson score interval of p on n trials for the quantile q (two-sided ends)."""
    if n <= 0 or not math.isfinite(q):
        return (0.0, 1.0)
    q2 = q * q
    denom = 1.0 + q2 / n
    centre = (p + q2 / (2.0 * n)) / denom
    half = (q / denom) * math.sqrt(max(0.0, p * (1.0 - p) / n + q2 / (4.0 * n * n)))
    lo = 0.0 if p <= 0.0 else max(0.0, centre - half)
    hi = 1.0 if p >= 1.0 else min(1.0, centre + half)
    return (lo, hi)


@dataclass(frozen=True, slots=True)
class ClusteredInterval:
    """A proportion with its cluster-aware score interval and how it was obtained."""

    k: int  # successes
    n: int  # units (graded items, or pairs)
    clusters: int  # K: distinct images
    icc: float  # rho used (after clamping; 1.0 when not estimable)
    deff: float  # design effect, >= 1
    n_eff: float  # n / deff
    lo: float
    hi: float
    confidence: float = 0.95
    df: float = math.inf  # degrees of freedom of the t quantile (K - 1)
    icc_estimated: bool = True  # False: the conservative fallback rho = 1 was used
    mean_cluster_size: float = 1.0  # m_w = sum m^2 / n
    method: str = METHOD

    @property
    def estimate(self) -> float | None:
        return self.k / self.n if self.n else None

    def p_at_most(self, bound: float) -> float:
        """One-sided p-value of H0: true proportion <= bound (small: decisively above)."""
        return _score_p(self, bound, upper=True)

    def p_at_least(self, bound: float) -> float:
        """One-sided p-value of H0: true proportion >= bound (small: decisively below)."""
        return _score_p(self, bound, upper=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["df"] = None if math.isinf(self.df) else self.df
        return d


def _score_p(ci: ClusteredInterval, bound: float, *, upper: bool) -> float:
    """p-value of the score test that inverts the interval: z = (p - b) / sqrt(b(1-b)/n_eff)."""
    if ci.n == 0 or ci.n_eff <= 0 or ci.df < 1:
        return 1.0
    p = ci.k / ci.n
    if bound <= 0.0 or bound >= 1.0:
        # A bound at 0 (or 1) cannot be exceeded (or undercut) with certainty by sampling:
        # only a proportion strictly beyond it with no variance left decides.
        if upper:
            return 0.0 if bound <= 0.0 and p > 0.0 else 1.0
        return 0.0 if bound >= 1.0 and p < 1.0 else 1.0
    z = (p - bound) / math.sqrt(bound * (1.0 - bound) / ci.n_eff)
    return t_sf(z, ci.df) if upper else t_sf(-z, ci.df)


def icc_anova(clusters: Sequence[tuple[int, int]]) -> float | None:
    """The ANOVA estimate of the intra-cluster correlation, unclamped.

    `clusters` holds (k_j, m_j) pairs: successes and size of each cluster (m_j >= 1).
    None when it cannot be estimated: fewer than two clusters, no cluster with more
    than one unit, or no variation at all (every unit has the same outcome).
    """
    sizes = [m for _, m in clusters]
    return _icc_anova(clusters, sizes, sum(sizes), sum([m * m for m in sizes]))


def _icc_anova(clusters: Sequence[tuple[int, int]], sizes: Sequence[int], n: int, squares: int) -> float | None:
    """icc_anova with the clusters' sizes, their sum and the sum of their squares (exact
    integers) already taken, as clustered_wilson has them."""
    if sizes and min(sizes) < 1:
        raise ValueError("every cluster needs at least one unit")
    if any(not 0 <= k <= m for k, m in clusters):
        raise ValueError("need 0 <= k_i <= m_i in every cluster")
    big_k = len(clusters)
    if big_k < 2 or n == big_k:
        return None
    total = sum([k for k, _ in clusters])
    ssb = sum([k * k / m for k, m in clusters]) - total * total / n
    ssw = sum([k - k * k / m for k, m in clusters])
    msb = ssb / (big_k - 1)
    msw = ssw / (n - big_k)
    m0 = (n - squares / n) / (big_k - 1)
    denom = msb + (m0 - 1.0) * msw
    if denom <= 1e-15:
        return None
    return (msb - msw) / denom


def icc_se(rho: float, clusters: Sequence[tuple[int, int]]) -> float:
    """The large-sample standard error of the ANOVA ICC estimate (Fisher 1925; Donner &
    Klar 2000, sec. 5), with the ANOVA mean size m0 for unequal clusters."""
    big_k = len(clusters)
    n = sum(m for _, m in clusters)
    if big_k < 2 or n == 0:
        return 0.0
    m0 = (n - sum(m * m for _, m in clusters) / n) / (big_k - 1)
    if m0 <= 1.0:
        return 0.0
    return math.sqrt(2.0 * (1.0 - rho) ** 2 * (1.0 + (m0 - 1.0) * rho) ** 2 / (m0 * (m0 - 1.0) * (big_k - 1)))


def clustered_wilson(clusters: Sequence[tuple[int, int]], confidence: float = 0.95,
                     icc_margin: float = 0.0) -> ClusteredInterval:
    """The cluster-aware interval for (k_j, m_j) clusters (see the module doc); with
    `icc_margin`, the estimated ICC raised by that many of its standard errors (icc_se)."""
    clusters = [c for c in clusters if c[1] > 0]
    sizes = [m for _, m in clusters]
    n = sum(sizes)
    k = sum([c for c, _ in clusters])
    big_k = len(clusters)
    if n == 0:
        return ClusteredInterval(0, 0, 0, 0.0, 1.0, 0.0, 0.0, 1.0, confidence, math.inf, False, 1.0)
    squares = sum([m * m for m in sizes])  # integers: exact in any order
    m_w = squares / n
    if m_w <= 1.0:  # every cluster is one item: nothing to correlate
        rho, estimated = 0.0, True
    else:
        raw = _icc_anova(clusters, sizes, n, squares)
        estimated = raw is not None
        rho = 1.0 if raw is None else min(1.0, max(0.0, raw))
        if icc_margin and estimated:
            rho = min(1.0, rho + icc_margin * icc_se(rho, clusters))
    deff = 1.0 + (m_w - 1.0) * rho
    n_eff = n / deff
    # Independent items (no image carries two): the plain Wilson interval, whose
    # coverage is well studied; with clusters the spread is learnt from K images.
    # With unequal sizes the spread is learnt from fewer images than K: the effective
    # number of clusters n^2 / sum m^2 = n / m_w (K when every image has as many items).
    df = math.inf if m_w <= 1.0 else max(n / m_w - 1.0, 0.0)
    q = t_quantile(0.5 + confidence / 2.0, df)
    lo, hi = wilson_q(k / n, n_eff, q)
    return ClusteredInterval(k, n, big_k, rho, deff, n_eff, lo, hi, confidence, df, estimated, m_w,
                             FEW_METHOD if icc_margin else METHOD)


def image_key(record: GradedRecord) -> str:
    """The cluster of a record: its image, or the item itself when it has no image."""
    return f"image:{record.image}" if record.image else f"item:{record.item_id}"


def cluster_counts(
    units: Iterable[tuple[str, bool]],
) -> list[tuple[int, int]]:
    """(k_j, m_j) per cluster from (cluster key, success) units, ordered by key so that
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
