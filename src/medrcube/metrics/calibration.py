"""Calibration: does a model that says 80% get 80% right?

Input: graded records that carry a confidence (GradedRecord.confidence_value: the
probability the model gave its chosen option, from logprobs, hf logits or a stated
verbal confidence). A record graded without a confidence is counted as `missing` and
left out; an unparsed or refused answer with a confidence counts as not correct.

Bins are adaptive (equal mass): the records sorted by confidence (ties broken by image
and item, so the result does not depend on record order) are cut into `n_bins` groups
of as equal size as possible. With B bins of n_b records, bin accuracy a_b and mean
confidence c_b:

- `ece`: the expected calibration error, sum_b (n_b / n) |a_b - c_b|, the figure HELM
  and most papers report. It is biased upward on finite samples: a perfectly calibrated
  model scores about sqrt(2 / pi) * sqrt(a (1 - a) / n_b) per bin (0.03 to 0.04 with 100
  items per bin), never 0.
- `ce`: the debiased root-mean-square calibration error (Kumar, Liang & Ma 2019,
  "Verified uncertainty calibration", NeurIPS: the plug-in squared error minus each
  bin's sampling variance), ce^2 = sum_b (n_b / n) [(a_b - c_b)^2 - a_b (1 - a_b) / (n_b - 1)],
  reported as sqrt(max(0, ce^2)). For a model off by the same amount everywhere it
  equals that amount, as ECE does; for a calibrated model it is centred on 0. The
  calibration check uses it, so that its interval can contain the truth at both ends
  (benchmarks/scenarios/calibration.py shows the coverage of both).

Intervals: a cluster bootstrap over images (items of one image are resampled
together, since they share an error), `n_boot` replicates with a seeded generator;
bins are re-formed in every replicate. `ece` takes the percentile bounds. `ce` takes
ce^2 +- z * (the replicates' standard deviation) on the squared scale, mapped through
sqrt(max(0, .)), so its lower bound may be 0: percentiles would not do there, since
the debiased replicates centre on the sample's plug-in (biased) ce^2, which put the
calibrated scorer's truth, 0, inside the percentile interval only 83% of the time.

`reliability` gives the diagram's data per bin (mean confidence, accuracy with a Wilson
interval, count); `by_level` does everything per task level (low, mid, high) and over
all. The check itself (pass, fail, undecided) is the gate's (gate/evidence_clinical.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from medrcube.metrics.accuracy import wilson_interval
from medrcube.metrics.clustered import image_key
from medrcube.records import GradedRecord, Outcome
from medrcube.taxonomy import Level, task_level

# numpy is imported in the functions that compute: the gate's evidence registers these
# metrics at every start, before the first request, and numpy is needed after the answers.
if TYPE_CHECKING:
    import numpy as np

DEFAULT_BINS = 10
DEFAULT_BOOT = 400


@dataclass(frozen=True, slots=True)
class Scored:
    """The calibration input: confidence, correctness, and the cluster (image) of each record."""

    conf: np.ndarray  # float, in [0, 1]
    correct: np.ndarray  # float 0/1
    cluster: np.ndarray  # int cluster index per record
    missing: int = 0  # graded records without a confidence

    @property
    def n(self) -> int:
        return int(self.conf.size)


def confident_rows(records: Iterable[GradedRecord]) -> tuple[list[tuple[float, str, str, float]], int]:
    """(confidence clipped to [0, 1], image key, item id, 1.0 if correct) of every graded
    record that has a confidence, and how many graded records had none."""
    rows: list[tuple[float, str, str, float]] = []
    missing = 0
    for r in records:
        if not r.graded:
            continue
        c = r.confidence_value
        if c is None:
            missing += 1
            continue
        rows.append((min(1.0, max(0.0, c)), image_key(r), r.item_id, 1.0 if r.outcome is Outcome.CORRECT else 0.0))
    return rows, missing


def has_confidence(records: Iterable[GradedRecord]) -> bool:
    """Whether any graded record carries a confidence (decided without numpy: most runs'
    answers carry none, and the metrics that need one are then not computed)."""
    return any(r.graded and r.confidence_value is not None for r in records)


def scored(records: Iterable[GradedRecord]) -> Scored:
    """The graded records with a confidence, in a canonical order (confidence, image, item)."""
    return scored_rows(*confident_rows(records))


def scored_rows(rows: list[tuple[float, str, str, float]], missing: int) -> Scored:
    """`scored` from `confident_rows`' output (sorted here, in place)."""
    import numpy as np

    rows.sort()
    keys = {k: i for i, k in enumerate(sorted({k for _, k, _, _ in rows}))}
    return Scored(
        conf=np.array([r[0] for r in rows], dtype=float),
        correct=np.array([r[3] for r in rows], dtype=float),
        cluster=np.array([keys[r[1]] for r in rows], dtype=int),
        missing=missing,
    )


def from_arrays(conf: Sequence[float], correct: Sequence[bool | float], cluster: Sequence[int] | None = None) -> Scored:
    """A Scored from plain arrays (simulations and tests); each record its own cluster by default."""
    import numpy as np

    c = np.asarray(conf, dtype=float)
    order = np.argsort(c, kind="stable")
    y = np.asarray(correct, dtype=float)
    g = np.arange(c.size) if cluster is None else np.asarray(cluster, dtype=int)
    return Scored(c[order], y[order], g[order])


def _bin_edges(n: int, n_bins: int) -> np.ndarray:
    """Start offsets of equal-mass bins over n sorted records (as equal as integers allow)."""
    import numpy as np

    b = max(1, min(n_bins, n))
    return np.linspace(0, n, b + 1).round().astype(int)


def _stats(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> tuple[float, float]:
    """(ece, ce^2 debiased) of records sorted by confidence."""
    import numpy as np

    n = conf.size
    if n == 0:
        return float("nan"), float("nan")
    edges = _bin_edges(n, n_bins)
    starts, sizes = edges[:-1], np.diff(edges)  # every bin holds >= 1 record (n_bins <= n)
    a = np.add.reduceat(correct, starts) / sizes
    c = np.add.reduceat(conf, starts) / sizes
    w = sizes / n
    ece = float((w * np.abs(a - c)).sum())
    var = np.where(sizes > 1, a * (1.0 - a) / np.maximum(sizes - 1, 1), 0.0)
    ce2 = float((w * ((a - c) ** 2 - var)).sum())
    return ece, ce2


def cluster_bootstrap(
    cluster: np.ndarray,
    statistic: Callable[[np.ndarray], Sequence[float]],
    n_boot: int = DEFAULT_BOOT,
    seed: int = 0,
) -> np.ndarray:
    """Replicates of `statistic(indices)` over records resampled by whole clusters.

    `statistic` receives the record indices of one replicate (clusters drawn with
    replacement, each contributing all its records) and returns a tuple of numbers;
    the result has one row per replicate."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if not cluster.size:
        return np.empty((0, 0))
    _, dense = np.unique(cluster, return_inverse=True)
    big_k = int(dense.max()) + 1
    base = np.arange(cluster.size)
    out = []
    for _ in range(n_boot):
        # K clusters drawn with replacement = a multinomial count per cluster; each record
        # repeated as often as its cluster was drawn, in its original (confidence) order.
        weights = np.bincount(rng.integers(0, big_k, size=big_k), minlength=big_k)
        out.append(statistic(np.repeat(base, weights[dense])))
    return np.asarray(out, dtype=float)


@dataclass(frozen=True, slots=True)
class Calibration:
    """ECE and the debiased calibration error with cluster-bootstrap intervals."""

    n: int
    missing: int
    clusters: int
    n_bins: int
    ece: float | None
    ece_ci95: tuple[float, float]
    ce: float | None
    ce_ci95: tuple[float, float]
    mean_confidence: float | None
    accuracy: float | None
    bins: list[dict[str, Any]] = field(default_factory=list)
    # For decisions consistent with the intervals (gate/evidence_clinical.py): the signed
    # debiased ce^2 and its bootstrap standard error (the ce interval is
    # sqrt(max(0, ce2 -+ z * ce2_se))), and the ECE replicates (its percentile interval).
    ce2: float | None = None
    ce2_se: float | None = None
    ece_replicates: tuple[float, ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "missing": self.missing, "clusters": self.clusters, "n_bins": self.n_bins,
                "ece": self.ece, "ece_ci95": list(self.ece_ci95), "ce": self.ce, "ce_ci95": list(self.ce_ci95),
                "mean_confidence": self.mean_confidence, "accuracy": self.accuracy, "bins": self.bins}


def reliability(s: Scored, n_bins: int = DEFAULT_BINS) -> list[dict[str, Any]]:
    """The reliability diagram's bins: confidence range, mean confidence, accuracy (Wilson 95%), n."""
    import numpy as np

    edges = _bin_edges(s.n, n_bins) if s.n else np.array([0])
    out = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        if hi <= lo:
            continue
        k = int(s.correct[lo:hi].sum())
        m = int(hi - lo)
        wl, wh = wilson_interval(k, m)
        out.append({"conf_lo": float(s.conf[lo]), "conf_hi": float(s.conf[hi - 1]),
                    "confidence": float(s.conf[lo:hi].mean()), "accuracy": k / m, "ci95": [wl, wh], "n": m})
    return out


def calibration(s: Scored, n_bins: int = DEFAULT_BINS, n_boot: int = DEFAULT_BOOT, seed: int = 0,
                confidence: float = 0.95) -> Calibration:
    """ECE and debiased CE of `s` with their cluster-bootstrap percentile intervals."""
    import numpy as np

    if s.n == 0:
        return Calibration(0, s.missing, 0, n_bins, None, (0.0, 1.0), None, (0.0, 1.0), None, None, [])
    ece, ce2 = _stats(s.conf, s.correct, n_bins)
    reps = cluster_bootstrap(s.cluster, lambda idx: _stats(s.conf[idx], s.correct[idx], n_bins), n_boot, seed)
    alpha = (1.0 - confidence) / 2.0
    if reps.size:
        e_lo, e_hi = np.quantile(reps[:, 0], [alpha, 1 - alpha])
        # Not percentiles for ce^2: in the bootstrap world the truth is the sample's
        # plug-in ce^2 (biased upward), so the debiased replicates centre there, not on
        # the estimate. The bootstrap standard error around the estimate does not
        # inherit that shift (module doc).
        se = float(reps[:, 1].std(ddof=1)) if reps.shape[0] > 1 else float("inf")
        half = NormalDist().inv_cdf(1 - alpha) * se
        c_lo, c_hi = ce2 - half, ce2 + half
        ece_reps = tuple(float(x) for x in reps[:, 0])
    else:
        e_lo, e_hi, c_lo, c_hi = ece, ece, ce2, ce2
        se, ece_reps = float("inf"), ()

    def root(x: float) -> float:
        return float(np.sqrt(max(0.0, x)))

    return Calibration(
        n=s.n, missing=s.missing, clusters=int(np.unique(s.cluster).size), n_bins=min(n_bins, s.n),
        ece=float(ece), ece_ci95=(float(e_lo), float(e_hi)),
        ce=root(ce2), ce_ci95=(root(c_lo), root(c_hi)),
        mean_confidence=float(s.conf.mean()), accuracy=float(s.correct.mean()),
        bins=reliability(s, n_bins), ce2=float(ce2), ce2_se=se, ece_replicates=ece_reps,
    )


def by_level(records: Sequence[GradedRecord], n_bins: int = DEFAULT_BINS, n_boot: int = DEFAULT_BOOT,
             seed: int = 0) -> dict[str, Calibration]:
    """Calibration over all records ("all") and per task level ("low", "mid", "high");
    levels without any record with a confidence are left out."""
    out = {"all": calibration(scored(records), n_bins, n_boot, seed)}
    for level in Level:
        mine = [r for r in records if task_level(r.task) == level]
        s = scored(mine)
        if s.n:
            out[level.name.lower()] = calibration(s, n_bins, n_boot, seed)
    return out


def calibration_summary(records: Sequence[GradedRecord]) -> dict[str, Any] | None:
    """The metrics_summary.json block (None when no record carries a confidence)."""
    if not has_confidence(records):
        return None
    levels = by_level(records)
    if levels["all"].n == 0:
        return None
    sources = sorted({str(r.confidence.get("source")) for r in records if r.confidence})
    return {"sources": sources, **{k: v.to_dict() for k, v in levels.items()}}


__all__ = [
    "Calibration", "Scored", "by_level", "calibration", "calibration_summary",
    "cluster_bootstrap", "from_arrays", "has_confidence", "reliability", "scored", "scored_rows",
]
