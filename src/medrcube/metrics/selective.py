"""Selective prediction: a model that answers only when sure, and one that may defer.

Two ways a model can decline, measured apart:

1. By its confidence (any variant with a confidence on its records). Ranking the graded
   records from most to least confident and answering only the top fraction c gives the
   risk-coverage curve: at coverage k/n the risk is the error rate of the k most
   confident answers. Its area (AURC, the mean risk over k = 1..n; lower is better; a
   model whose confidence carries no information has AURC = its overall error rate) and
   two readings of it:
   - accuracy at coverage c: the accuracy of the ceil(c n) most confident answers, with
     the image-clustered interval of metrics.findings (the selection is taken as fixed:
     the interval is for the answers it kept);
   - coverage at risk r: the largest coverage whose risk is at most r, with a cluster
     bootstrap interval over images (metrics.calibration.cluster_bootstrap).
   Ties in confidence are ordered by image and item, so the curve does not depend on
   record order; records graded without a confidence are counted as `missing`.

2. By the explicit abstention option (the `abstain` variant, run/variants.py): a choice
   of "Cannot be determined from this image" is DEFERRED. A deferral is never an error:
   the policy states what it costs against an error (`DeferralCosts`; a site may say a
   deferral costs a tenth of a miss). Per item the cost is 0 when correct, `error` when
   wrong (unparsed and refused answers included: they are no answer a clinician can use,
   and not a deferral), `deferral` when deferred; the cell's mean cost and its utility
   1 - mean cost / error (1: every answer right; 1 - deferral/error: always defers;
   0: every answer wrong), with a cluster-robust interval (the ratio estimator's
   between-image variance, normal approximation, clipped to [0, 1]).

Estimates and intervals only: the checks are decided by the gate (gate/evidence_clinical.py).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from medrcube.metrics.calibration import DEFAULT_BOOT, cluster_bootstrap, confident_rows, has_confidence
from medrcube.metrics.clustered import image_key
from medrcube.metrics.findings import Proportion, clustered_proportion
from medrcube.records import GradedRecord, Outcome

# numpy is imported in the functions that compute: the gate's evidence registers these
# metrics at every start, before the first request, and numpy is needed after the answers.
if TYPE_CHECKING:
    import numpy as np

ABSTAIN_VARIANT = "abstain"


# -- confidence-based selection ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ranked:
    """Graded records with a confidence, most confident first."""

    conf: np.ndarray
    correct: np.ndarray  # 0/1
    cluster: np.ndarray  # int per record
    keys: tuple[str, ...]  # cluster key per record (for clustered intervals)
    missing: int = 0

    @property
    def n(self) -> int:
        return int(self.conf.size)


def ranked(records: Iterable[GradedRecord]) -> Ranked:
    """The graded records with a confidence, most confident first (then image, item)."""
    import numpy as np

    rows, missing = confident_rows(records)
    rows = [(-c, key, item, ok) for c, key, item, ok in rows]
    rows.sort()
    index = {k: i for i, k in enumerate(sorted({k for _, k, _, _ in rows}))}
    return Ranked(np.array([-r[0] for r in rows], dtype=float), np.array([r[3] for r in rows], dtype=float),
                  np.array([index[r[1]] for r in rows], dtype=int), tuple(r[1] for r in rows), missing)


def ranked_from_arrays(conf: Sequence[float], correct: Sequence[bool | float]) -> Ranked:
    """A Ranked from plain arrays (simulations, tests): each record its own cluster."""
    import numpy as np

    c = np.asarray(conf, dtype=float)
    order = np.argsort(-c, kind="stable")
    return Ranked(c[order], np.asarray(correct, dtype=float)[order], np.arange(c.size),
                  tuple(f"r{i}" for i in order))


def risk_coverage(correct_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(coverage, risk) at k = 1..n for records sorted most confident first."""
    import numpy as np

    n = correct_sorted.size
    k = np.arange(1, n + 1)
    return k / n, np.cumsum(1.0 - correct_sorted) / k


def aurc(correct_sorted: np.ndarray) -> float | None:
    """The area under the risk-coverage curve: the mean risk over k = 1..n."""
    return float(risk_coverage(correct_sorted)[1].mean()) if correct_sorted.size else None


def accuracy_at_coverage(r: Ranked, coverage: float, confidence: float = 0.95) -> Proportion:
    """Accuracy of the ceil(coverage n) most confident answers, clustered by image."""
    if not 0.0 < coverage <= 1.0:
        raise ValueError(f"coverage must be in (0, 1], got {coverage!r}")
    k = math.ceil(coverage * r.n - 1e-9)
    return clustered_proportion(((r.keys[i], bool(r.correct[i])) for i in range(k)), confidence)


def _coverage_at_risk(correct_sorted: np.ndarray, risk: float) -> float:
    import numpy as np

    if not correct_sorted.size:
        return 0.0
    cov, rk = risk_coverage(correct_sorted)
    ok = np.flatnonzero(rk <= risk + 1e-12)
    return float(cov[ok[-1]]) if ok.size else 0.0


def coverage_at_risk_replicates(r: Ranked, risk: float, n_boot: int = DEFAULT_BOOT, seed: int = 0) -> np.ndarray:
    """The cluster-bootstrap replicates of the coverage at `risk` (its percentile interval's
    input; the gate reads the share of them beyond a bound as a p-value)."""
    import numpy as np

    reps = cluster_bootstrap(r.cluster, lambda idx: (_coverage_at_risk(r.correct[idx], risk),), n_boot, seed)
    return reps[:, 0] if reps.size else np.empty(0)


def coverage_at_risk(r: Ranked, risk: float, n_boot: int = DEFAULT_BOOT, seed: int = 0,
                     confidence: float = 0.95) -> dict[str, Any]:
    """The largest coverage whose risk is at most `risk`, with a cluster-bootstrap interval."""
    import numpy as np

    if not 0.0 <= risk <= 1.0:
        raise ValueError(f"risk must be in [0, 1], got {risk!r}")
    value = _coverage_at_risk(r.correct, risk)
    reps = coverage_at_risk_replicates(r, risk, n_boot, seed)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = (np.quantile(reps, [alpha, 1 - alpha]) if reps.size else (value, value))
    return {"risk": risk, "coverage": value, "ci95": [float(lo), float(hi)], "n": r.n}


def selective_summary(records: Sequence[GradedRecord], coverages: Sequence[float] = (0.5, 0.8, 0.9),
                      risks: Sequence[float] = (0.05, 0.1, 0.2), points: int = 50) -> dict[str, Any] | None:
    """The metrics_summary.json block: AURC, the curve (at most `points` points), accuracy
    at the given coverages, coverage at the given risks. None without any confidence."""
    if not has_confidence(records):
        return None
    import numpy as np

    r = ranked(records)
    if r.n == 0:
        return None
    cov, rk = risk_coverage(r.correct)
    pick = np.unique(np.linspace(0, r.n - 1, min(points, r.n)).round().astype(int))
    return {
        "n": r.n, "missing": r.missing, "aurc": aurc(r.correct), "error_rate": float(1.0 - r.correct.mean()),
        "curve": {"coverage": [float(cov[i]) for i in pick], "risk": [float(rk[i]) for i in pick]},
        "accuracy_at_coverage": {f"{c:g}": accuracy_at_coverage(r, c).to_dict() for c in coverages},
        "coverage_at_risk": {f"{x:g}": coverage_at_risk(r, x) for x in risks},
    }


# -- the abstention option -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeferralCosts:
    """What a deferral costs against an error (a correct answer costs 0)."""

    error: float = 1.0
    deferral: float = 0.1

    def __post_init__(self) -> None:
        if not self.error > 0:
            raise ValueError(f"the cost of an error must be > 0, got {self.error!r}")
        if not 0 <= self.deferral <= self.error:
            raise ValueError(f"the cost of a deferral must be in [0, cost of an error = {self.error}], "
                             f"got {self.deferral!r}")


@dataclass(frozen=True, slots=True)
class Utility:
    """One cell of the abstain variant under the policy's costs."""

    n: int  # asked and answered in some way: correct + errors + deferred
    correct: int
    errors: int  # wrong, unparsed and refused
    deferred: int
    mean_cost: float | None
    utility: float | None
    ci95: tuple[float, float]
    clusters: int
    costs: DeferralCosts
    se: float = float("inf")  # of the utility (the interval is utility -+ z se, clipped to [0, 1])

    @property
    def deferral_rate(self) -> float | None:
        return self.deferred / self.n if self.n else None

    @property
    def accuracy_answered(self) -> float | None:
        """Accuracy over the answers the model did not defer (selective accuracy)."""
        answered = self.correct + self.errors
        return self.correct / answered if answered else None

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "correct": self.correct, "errors": self.errors, "deferred": self.deferred,
                "deferral_rate": self.deferral_rate, "accuracy_answered": self.accuracy_answered,
                "mean_cost": self.mean_cost, "utility": self.utility, "ci95": list(self.ci95),
                "clusters": self.clusters, "costs": {"error": self.costs.error, "deferral": self.costs.deferral}}


def item_cost(outcome: Outcome, costs: DeferralCosts) -> float | None:
    """The cost of one record; None for records that do not count (errors, unavailable)."""
    if outcome is Outcome.CORRECT:
        return 0.0
    if outcome is Outcome.DEFERRED:
        return costs.deferral
    if outcome in (Outcome.WRONG, Outcome.UNPARSED, Outcome.REFUSED):
        return costs.error
    return None


def utility(records: Iterable[GradedRecord], costs: DeferralCosts = DeferralCosts(),
            confidence: float = 0.95) -> Utility:
    """Utility of `records` (pass the abstain variant's) under `costs` (module doc)."""
    by_cluster: dict[str, list[float]] = defaultdict(list)
    counts = {Outcome.CORRECT: 0, Outcome.DEFERRED: 0}
    errors = 0
    for r in records:
        c = item_cost(r.outcome, costs)
        if c is None:
            continue
        by_cluster[image_key(r)].append(c)
        if r.outcome in counts:
            counts[r.outcome] += 1
        else:
            errors += 1
    n = sum(len(v) for v in by_cluster.values())
    if n == 0:
        return Utility(0, 0, 0, 0, None, None, (0.0, 1.0), 0, costs)
    totals = [(sum(v), len(v)) for _, v in sorted(by_cluster.items())]
    mean = sum(t for t, _ in totals) / n
    big_k = len(totals)
    # Ratio estimator, clusters as units: var(mean) = K/(K-1) sum (t_i - m_i mean)^2 / n^2.
    var = big_k / (big_k - 1) * sum((t - m * mean) ** 2 for t, m in totals) / n ** 2 if big_k > 1 else float("inf")
    # Every item costing the same (all right, say) gives a variance of 0 and an interval
    # of no width however few the items; the standard error is floored at that of one
    # more item of the other kind, sqrt(k + 1) / n (k: items of non-zero cost), as
    # metrics.paired floors a paired difference, so no finite evidence is certain.
    nonzero = sum(1 for _, v in by_cluster.items() for c in v if c > 0)
    floor = math.sqrt(min(nonzero, n - nonzero) + 1) / n * costs.error
    var = max(var, floor * floor)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    half = z * math.sqrt(var) / costs.error if math.isfinite(var) else 1.0
    u = 1.0 - mean / costs.error
    return Utility(n, counts[Outcome.CORRECT], errors, counts[Outcome.DEFERRED], mean, u,
                   (max(0.0, u - half), min(1.0, u + half)), big_k, costs,
                   math.sqrt(var) / costs.error if math.isfinite(var) else float("inf"))


def utility_by_cell(records: Iterable[GradedRecord], costs: DeferralCosts = DeferralCosts(),
                    variant: str = ABSTAIN_VARIANT) -> dict[tuple[str, str, str], Utility]:
    groups: dict[tuple[str, str, str], list[GradedRecord]] = defaultdict(list)
    for r in records:
        if r.variant == variant:
            groups[r.cell].append(r)
    return {cell: utility(groups[cell], costs) for cell in sorted(groups)}


def abstention_summary(records: Sequence[GradedRecord], costs: DeferralCosts = DeferralCosts()) -> dict[str, Any] | None:
    """The metrics_summary.json block for the abstain variant (None when it did not run)."""
    mine = [r for r in records if r.variant == ABSTAIN_VARIANT]
    if not mine:
        return None
    cells = utility_by_cell(mine, costs)
    return {"costs": {"error": costs.error, "deferral": costs.deferral}, "global": utility(mine, costs).to_dict(),
            "by_task_modality_parts": {f"task={c[2]}|modality={c[1]}|parts={c[0]}": u.to_dict()
                                       for c, u in cells.items()}}


__all__ = [
    "DeferralCosts", "Ranked", "Utility", "abstention_summary", "accuracy_at_coverage",
    "aurc", "coverage_at_risk", "coverage_at_risk_replicates", "item_cost", "ranked", "ranked_from_arrays", "risk_coverage", "selective_summary", "utility",
    "utility_by_cell",
]
