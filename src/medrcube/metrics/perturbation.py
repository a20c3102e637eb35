"""Robustness to image perturbations: the paired accuracy drop and the answer agreement.

A perturbation variant (run/perturb.py; records whose variant is "jpeg:30", "flip", ...)
asks each item again on a changed image. On the items graded in both the standard and
the perturbed variant:

- drop = standard accuracy - perturbed accuracy (positive: the perturbation hurts),
  with a paired interval clustered by image;
- agreement = the share of items whose perturbed answer names the same option as the
  standard answer (both parsed; options are in cube order in both variants), with a
  Wilson interval clustered by image (metrics/clustered.py).

The drop's interval (`clustered_paired_interval`): Tango's score interval for a paired
difference (T. Tango 1998, "Equivalence test and confidence interval for the difference
in proportions for the paired-sample design", Statistics in Medicine 17:891-908), with
its score statistic divided by the square root of a design effect for the images:
    Z(delta) = (b - c - n delta) / sqrt(deff * n (2 q(delta) + delta (1 - delta))),
q(delta) being the maximum-likelihood P(wrong -> right) under the constraint that the
drop is delta; the interval is every delta with |Z(delta)| <= z. A score interval takes
its variance at the value tested, not at the estimate, which matters here: lost
answers are often rare, and an interval built on the observed variance (Wald, or
Newcombe's hybrid, method 10) is too short on the upper side, the side a
non-inferiority decision reads (benchmarks/robustness_coverage.py measures both).

The design effect: the items of one image are not independent, so the per-item
differences d_i = s_i - p_i in {-1, 0, 1} are summed per image and the cluster-robust
variance of their mean,
    V_cl = K / (K - 1) * sum_c (sum_{i in c} (d_i - D))^2 / n^2,
is compared with the variance the independent-items formula gives,
    V_iid = sum_i (d_i - D)^2 / (n (n - 1)).
deff = V_cl / V_iid, never below 1, taken as 1 where either is not estimable (one image,
or no discordant pair). With one item per image deff is 1 and the interval is Tango's.
With no discordant pair it still has width (a small sample proves nothing). With few
images carrying many items each the estimated deff is itself uncertain and the interval
runs short (simulation: 90% coverage for 30 images of 10 items); decisions should ask
for enough images (`min_n` counts items; the caller may add its own floor on images).

Estimates and intervals only: the robustness and agreement checks are decided by the
gate (gate/evidence_clinical.py), and report.html shows the gate's verdicts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from medrcube.metrics.accuracy import z_value
from medrcube.metrics.clustered import ClusteredInterval, cluster_counts, clustered_wilson, image_key
from medrcube.records import NOT_ANSWERED, GradedRecord, is_perturbation

STANDARD = "standard"


@dataclass(frozen=True, slots=True)
class PairedDrop:
    """standard - perturbed accuracy on paired items, with its clustered interval."""

    n: int  # pairs (items graded in both variants)
    clusters: int  # distinct images among them
    a: int  # both right
    b: int  # right in standard only (lost under the perturbation)
    c: int  # right under the perturbation only
    d: int  # both wrong
    deff: float
    lo: float
    hi: float

    @property
    def standard_acc(self) -> float | None:
        return (self.a + self.b) / self.n if self.n else None

    @property
    def perturbed_acc(self) -> float | None:
        return (self.a + self.c) / self.n if self.n else None

    @property
    def drop(self) -> float | None:
        return (self.b - self.c) / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "clusters": self.clusters, "a": self.a, "b": self.b, "c": self.c, "d": self.d,
                "deff": self.deff, "standard_acc": self.standard_acc, "perturbed_acc": self.perturbed_acc,
                "drop": self.drop, "lo": self.lo, "hi": self.hi}


def tango_score(b: int, c: int, n: int, delta: float, deff: float = 1.0) -> float:
    """Tango's score statistic Z(delta) for H0: drop = delta, divided by sqrt(deff); it
    decreases in delta. The interval is {delta: |Z(delta)| <= z}, so the one-sided
    p-values Phi(Z(m)) (of "drop >= m") and 1 - Phi(Z(m)) (of "drop <= m") decide
    exactly as the interval's bounds do (the gate reads them: gate/evidence_clinical.py)."""
    w = -b - c + delta * (2 * n - b + c)
    q = (-w + math.sqrt(max(0.0, w * w + 8.0 * n * c * delta * (1.0 - delta)))) / (4.0 * n)
    var = deff * n * (2.0 * q + delta * (1.0 - delta))
    diff = b - c - n * delta
    if var <= 1e-300:
        return math.copysign(math.inf, diff) if diff else 0.0
    return diff / math.sqrt(var)


def tango_interval(b: int, c: int, n: int, deff: float = 1.0, confidence: float = 0.95) -> tuple[float, float]:
    """Tango's score interval for (b - c) / n, the score divided by sqrt(deff) (module doc)."""
    if n <= 0:
        return (-1.0, 1.0)
    z = z_value(confidence)

    def score(delta: float) -> float:
        return tango_score(b, c, n, delta, deff)

    est = (b - c) / n

    def solve(target: float, lo: float, hi: float) -> float:
        # score() decreases in delta: bisection to 1e-12, far below any printed digit
        for _ in range(45):
            mid = (lo + hi) / 2
            if score(mid) > target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    edge = 1.0 - 1e-12
    lo = -1.0 if score(-edge) <= z else solve(z, -edge, est)
    hi = 1.0 if score(edge) >= -z else solve(-z, est, edge)
    return (max(-1.0, min(lo, est)), min(1.0, max(hi, est)))


def difference_deff(units: Sequence[tuple[str, int]]) -> float:
    """The design effect of the mean of per-item differences d_i clustered by key (module doc)."""
    n = len(units)
    if n < 2:
        return 1.0
    mean = sum(d for _, d in units) / n
    sums: dict[str, float] = defaultdict(float)
    for key, d in units:
        sums[key] += d - mean
    k = len(sums)
    v_iid = sum((d - mean) ** 2 for _, d in units) / (n * (n - 1))
    if k < 2 or v_iid <= 1e-15:
        return 1.0
    v_cl = k / (k - 1) * sum(s * s for _, s in sorted(sums.items())) / (n * n)
    return max(1.0, v_cl / v_iid)


def clustered_paired_interval(pairs: Sequence[tuple[str, bool, bool]], confidence: float = 0.95) -> PairedDrop:
    """The drop of (cluster key, standard right, perturbed right) pairs, clustered by key."""
    a = sum(1 for _, s, p in pairs if s and p)
    b = sum(1 for _, s, p in pairs if s and not p)
    c = sum(1 for _, s, p in pairs if p and not s)
    d = len(pairs) - a - b - c
    n = len(pairs)
    clusters = len({k for k, _, _ in pairs})
    if n == 0:
        return PairedDrop(0, 0, 0, 0, 0, 0, 1.0, -1.0, 1.0)
    deff = difference_deff([(k, int(s) - int(p)) for k, s, p in pairs])
    lo, hi = tango_interval(b, c, n, deff, confidence)
    return PairedDrop(n, clusters, a, b, c, d, deff, lo, hi)


@dataclass(frozen=True, slots=True)
class PerturbationRobustness:
    """One perturbation on one scope (a cell, a slice or everything)."""

    variant: str  # "jpeg:30"
    scope: str  # "overall", "part=Brain", "Brain/MRI/Organ Recognition"
    drop: PairedDrop
    agreement: ClusteredInterval  # k = items answered alike, n = pairs
    errors: int  # perturbed asks of paired-able items that ended in an error
    asked: int  # perturbed asks of items with a standard record (errors included)
    not_graded: int  # items left out: not graded in one of the two variants

    @property
    def error_rate(self) -> float:
        return self.errors / self.asked if self.asked else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "scope": self.scope, "drop": self.drop.to_dict(),
                "agreement": self.agreement.to_dict(), "agreement_rate": self.agreement.estimate,
                "errors": self.errors, "asked": self.asked, "not_graded": self.not_graded}


def perturbation_variants(records: Iterable[GradedRecord]) -> list[str]:
    """The perturbation variants present, in first-seen order."""
    return list(dict.fromkeys(r.variant for r in records if is_perturbation(r.variant)))


def perturbation_robustness(records: Iterable[GradedRecord], variant: str, *, scope: str = "overall",
                            confidence: float = 0.95,
                            key: Callable[[GradedRecord], str] = image_key) -> PerturbationRobustness:
    """The drop and the agreement of `variant` against standard on `records` (any scope)."""
    standard: dict[str, GradedRecord] = {}
    perturbed: dict[str, GradedRecord] = {}
    for r in records:
        if r.variant == STANDARD:
            standard[r.item_id] = r
        elif r.variant == variant:
            perturbed[r.item_id] = r
    pairs: list[tuple[str, bool, bool]] = []
    agree: list[tuple[str, bool]] = []
    errors = asked = not_graded = 0
    for item_id in sorted(perturbed):
        p, s = perturbed[item_id], standard.get(item_id)
        if s is None:
            continue
        asked += 1
        errors += p.outcome in NOT_ANSWERED
        if not (s.graded and p.graded):
            not_graded += 1
            continue
        pairs.append((key(s), s.correct, p.correct))
        agree.append((key(s), s.extracted is not None and s.extracted == p.extracted))
    return PerturbationRobustness(
        variant=variant, scope=scope, drop=clustered_paired_interval(pairs, confidence),
        agreement=clustered_wilson(cluster_counts(agree), confidence), errors=errors, asked=asked,
        not_graded=not_graded,
    )


def _scopes(r: GradedRecord, by: str) -> list[str]:
    if by == "overall":
        return ["overall"]
    if by == "cell":
        return ["/".join(r.cell)]
    if by == "slice":
        return [f"part={r.part}", f"modality={r.modality}", f"task={r.task}"]
    if by in ("part", "modality", "task"):
        return [f"{by}={getattr(r, by)}"]
    raise ValueError(f"unknown scope {by!r}; choices: overall, cell, slice, part, modality, task")


def robustness_table(records: Iterable[GradedRecord], *, by: str = "overall", variants: Sequence[str] | None = None,
                     confidence: float = 0.95) -> list[PerturbationRobustness]:
    """`perturbation_robustness` of every perturbation variant on every scope of `by`
    ("overall", "cell", "slice" = part, modality and task slices, or one axis), sorted
    by variant (run order) then scope."""
    records = list(records)
    names = list(variants) if variants is not None else perturbation_variants(records)
    groups: dict[str, list[GradedRecord]] = defaultdict(list)
    for r in records:
        if r.variant == STANDARD or r.variant in names:
            for scope in _scopes(r, by):
                groups[scope].append(r)
    return [perturbation_robustness(groups[scope], v, scope=scope, confidence=confidence)
            for v in names for scope in sorted(groups)
            if any(r.variant == v for r in groups[scope])]
