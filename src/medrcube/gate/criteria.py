"""Criterion and Evidence: what a check measured, as the family decision weighs it
(gate/family.py), and the helpers every kind's evidence shares (gate/evidence.py,
gate/evidence_clinical.py).

A criterion carries its estimate, its interval and two one-sided p-values from the same
statistic:
    p_pass   of "the bound is not met" (small: the bound is decisively met)
    p_fail   of "the bound is met"     (small: the bound is decisively missed)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from medrcube.gate.checks import Check
from medrcube.gate.verdict import WorstItem
from medrcube.metrics import finite
from medrcube.metrics.clustered import FEW_IMAGES_ICC_MARGIN, FEW_METHOD, ClusteredInterval, clustered_wilson
from medrcube.metrics.paired import MeanDifference
from medrcube.records import GradedRecord, Outcome, outcome_counts
from medrcube.tally import NOT_ASKED

MAX_WORST = 5


@dataclass(frozen=True, slots=True)
class Criterion:
    """One bound of a check and the evidence about it."""

    name: str  # "accuracy", "gap to standard accuracy", ...
    estimate: float | None
    bound: float
    at_least: bool  # True: the estimate must reach the bound; False: stay at or below it
    lo: float
    hi: float
    p_pass: float
    p_fail: float
    unit_sd: float  # sd of one unit, design effect included: var(estimate) ~ unit_sd^2 / n
    # The two-sided level of lo..hi when it is not the check's (a route of a check that
    # decides on either of two statistics, each at its share of the one-sided level).
    confidence: float | None = None

    @property
    def point_ok(self) -> bool:
        if self.estimate is None:
            return False
        return self.estimate >= self.bound if self.at_least else self.estimate <= self.bound


@dataclass(frozen=True, slots=True)
class Evidence:
    check: Check
    n: int
    units: str  # what n counts: "graded items", "pairs", ...
    criteria: tuple[Criterion, ...] = ()
    observed: float | None = None
    interval: tuple[float, float] | None = None
    bound: float | None = None  # the bound as applied (raised to chance + above_chance)
    chance: float | None = None
    error_rate: float = 0.0
    facts: str = ""
    worst: tuple[WorstItem, ...] = ()  # shown when the check does not pass
    details: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    error: str | None = None  # not graded: why
    note: str = ""  # why there is nothing to decide, or a remark on the bound


def prop_criterion(name: str, ci: ClusteredInterval, bound: float) -> Criterion:
    p = ci.estimate
    v = p if p is not None and 0.0 < p < 1.0 else bound
    sd = math.sqrt(max(v * (1.0 - v), 1e-4) * ci.deff)
    return Criterion(name, p, bound, True, ci.lo, ci.hi, ci.p_at_most(bound), ci.p_at_least(bound), sd)


def diff_criterion(name: str, md: MeanDifference, bound: float, at_least: bool) -> Criterion:
    sd = md.se * math.sqrt(md.n) if md.n and math.isfinite(md.se) else 0.5
    if at_least:
        return Criterion(name, md.estimate, bound, True, md.lo, md.hi, md.p_at_most(bound), md.p_at_least(bound), sd)
    return Criterion(name, md.estimate, bound, False, md.lo, md.hi, md.p_at_least(bound), md.p_at_most(bound), sd)


def pct(x: float) -> str:
    return f"{x:.0%}"


def fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def ci_text(confidence: float, interval: tuple[float, float] | None) -> str:
    if interval is None:
        return ""
    return f", {pct(confidence)} CI [{interval[0]:.3f}, {interval[1]:.3f}]"


def api_errors(check: Check, asked: Sequence[GradedRecord]) -> tuple[float, Evidence | None]:
    """The error rate over records that were asked, and error evidence when above the bound."""
    # Counted first (C loops: a family's checks count tens of thousands of records so after the
    # last answer); the records themselves are listed only for the evidence of an error.
    counts = outcome_counts(asked)
    considered_n = len(asked) - counts[Outcome.UNAVAILABLE]
    # A truncated answer was not graded either: it counts against the bound like an error.
    errors_n = counts[Outcome.ERROR] + counts[Outcome.TRUNCATED]
    rate = errors_n / considered_n if considered_n else 0.0
    if errors_n and rate > check.max_error_rate:
        considered = [r for r in asked if r.outcome is not Outcome.UNAVAILABLE]
        errors = [r for r in considered if r.outcome in (Outcome.ERROR, Outcome.TRUNCATED)]
        kinds: dict[str, int] = defaultdict(int)
        for r in errors:
            kinds[(r.error or "unknown error").split(":")[0][:60]] += 1
        top = "; ".join(f"{k} x{v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:3])
        unasked = sum(1 for r in errors if r.how == NOT_ASKED)
        if unasked:  # the run stopped before asking them (tally.py): a rerun on the store asks them
            msg = (
                f"{unasked} of its {len(considered)} asks not asked (the run stopped early) and "
                f"{len(errors) - unasked} failed ({pct(rate)} > max_error_rate {pct(check.max_error_rate)}): the "
                f"evidence is incomplete; not decided on the {len(considered) - len(errors)} graded. Errors: {top}. "
                "Rerun on the same response store to ask only what is missing."
            )
        else:
            msg = (
                f"{len(errors)} errors of {len(considered)} requests ({pct(rate)} > max_error_rate "
                f"{pct(check.max_error_rate)}): the evidence is incomplete; not graded. Errors: {top}. "
                "Fix the endpoint (or raise max_error_rate) and rerun: cached answers are kept."
            )
        return rate, Evidence(check, len(considered) - len(errors), "graded items", error_rate=rate, error=msg,
                              details={"errors": len(errors), "asked": len(considered), "not_asked": unasked,
                                       "error_kinds": dict(kinds)})
    return rate, None


# --------------------------------------------------------------------------- few images

# Below this many effective images (n / m_w, m_w = sum m^2 / n), when some image carries
# several items, the cluster-robust intervals under-cover (benchmarks/RESULTS.md,
# section 13) and the gate decides with the finite-sample interval of metrics/finite.py.
# Paired differences are mostly 0 with rare, skewed +-1: their t interval needs more.
FEW_IMAGES = 100
FEW_IMAGES_PAIRED = 200


def image_units(units: Iterable[tuple[str, float]]) -> tuple[list[float], list[int]]:
    """Per image (sorted by key, so that sums do not depend on record order): the sum of
    its units' values in [0, 1] and how many units it holds."""
    acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for key, v in units:
        acc[key][0] += v
        acc[key][1] += 1
    return [acc[k][0] for k in sorted(acc)], [int(acc[k][1]) for k in sorted(acc)]


def few_images(sizes: Sequence[int], limit: int = FEW_IMAGES) -> bool:
    """Whether the cluster-robust interval is unreliable on these image sizes: several
    items share an image and the effective number of images is below `limit`."""
    n = sum(sizes)
    if n == 0:
        return False
    m_w = sum(m * m for m in sizes) / n
    return m_w > 1.0 and n / m_w < limit


def finite_criterion(crit: Criterion, units: Iterable[tuple[str, float]], confidence: float, *,
                     paired: bool = False) -> tuple[Criterion, str | None]:
    """`crit` decided with the few-images interval (at two-sided `confidence`) when few
    images hold its units (see few_images), and why; unchanged and None otherwise.
    `units` are (image, value) with values in [0, 1], or paired differences in
    {-1, 0, 1} when `paired`: those are mapped to (1 + d) / 2, and the bound and interval
    back. Right/wrong units (every value 0 or 1: accuracy, sensitivity, a site's
    proportion) get the clustered Wilson interval with its ICC raised by
    FEW_IMAGES_ICC_MARGIN standard errors; other units (paired drops, shares) the
    finite-sample Hoeffding-Bentkus interval (benchmarks/RESULTS.md, section 13)."""
    sums, sizes, binary = summed_units(units, paired=paired)
    return finite_criterion_of_images(crit, sums, sizes, confidence, paired=paired, binary=binary)


def summed_units(units: Iterable[tuple[str, float]], *, paired: bool = False) -> tuple[list[float], list[int], bool]:
    """What `finite_criterion` reads of its units: their sums and sizes per image (image_units,
    paired differences mapped to [0, 1] first), and whether every unit is 0 or 1."""
    units = list(units)
    if paired:
        units = [(k, (1.0 + d) / 2.0) for k, d in units]
    sums, sizes = image_units(units)
    return sums, sizes, not paired and all(v in (0.0, 1.0) for _, v in units)


def finite_criterion_of_images(crit: Criterion, sums: Sequence[float], sizes: Sequence[int], confidence: float, *,
                               paired: bool = False, binary: bool = False,
                               interval: bool = True) -> tuple[Criterion, str | None]:
    """`finite_criterion` of units already summed per image (image_units: in the order of
    the images' keys), `binary` when every unit is 0 or 1 (right/wrong). `interval=False`:
    the p-values only, the criterion's interval left as it is (a second bound's p-value
    needs no second finite-sample interval, the dearest part)."""
    limit = FEW_IMAGES_PAIRED if paired else FEW_IMAGES
    if not few_images(sizes, limit):
        return crit, None

    def to_u(x: float) -> float:  # a paired drop in [-1, 1] to a unit in [0, 1]
        return (1.0 + x) / 2.0 if paired else x

    def back(u: float) -> float:
        return 2.0 * u - 1.0 if paired else u

    b = to_u(crit.bound)
    n = sum(sizes)
    effective = f"{len(sizes)} images, effective {n * n / sum(m * m for m in sizes):.1f} < {limit}"
    if binary:
        ci = clustered_wilson([(round(s), m) for s, m in zip(sums, sizes, strict=True)], confidence,
                              icc_margin=FEW_IMAGES_ICC_MARGIN)
        up, down, lo_u, hi_u, method = ci.p_at_most(b), ci.p_at_least(b), ci.lo, ci.hi, FEW_METHOD
        why = f"decided with {method}: {effective}, ICC {ci.icc:.2f}"
    else:
        up, down = finite.p_at_most(sums, sizes, b), finite.p_at_least(sums, sizes, b)
        lo_u, hi_u = finite.interval(sums, sizes, confidence) if interval else (to_u(crit.lo), to_u(crit.hi))
        method = finite.METHOD
        why = f"decided with {method}: {effective}, where the cluster-robust interval is unreliable"
    p_pass, p_fail = (up, down) if crit.at_least else (down, up)
    return replace(crit, lo=back(lo_u), hi=back(hi_u), p_pass=p_pass, p_fail=p_fail), why


def few_images_method(why: str) -> str:
    """The method a finite_criterion reason names."""
    return FEW_METHOD if why.startswith(f"decided with {FEW_METHOD}") else finite.METHOD


def with_finite(ev: Evidence, units: Iterable[tuple[str, float]], *, paired: bool = False) -> Evidence:
    """`ev` decided with the finite-sample interval over images when few images hold its
    units (see few_images and finite_criterion); unchanged otherwise."""
    if not ev.criteria or ev.error is not None:
        return ev
    return _with_finite(ev, finite_criterion(ev.criteria[0], units, ev.check.confidence, paired=paired))


def with_finite_images(ev: Evidence, clusters: Sequence[tuple[int, int]]) -> Evidence:
    """`with_finite` of right/wrong units already counted per image: (right, graded) per
    image in the order of the images' keys (cluster_counts)."""
    if not ev.criteria or ev.error is not None:
        return ev
    sums, sizes = [float(k) for k, _ in clusters], [m for _, m in clusters]
    return _with_finite(ev, finite_criterion_of_images(ev.criteria[0], sums, sizes, ev.check.confidence, binary=True))


def _with_finite(ev: Evidence, decided: tuple[Criterion, str | None]) -> Evidence:
    new, why = decided
    crit = ev.criteria[0]
    if why is None:
        return ev
    method = few_images_method(why)
    details = {**ev.details, "interval_method": method, "cluster_robust_interval": [crit.lo, crit.hi]}
    return replace(ev, criteria=(new, *ev.criteria[1:]), interval=(new.lo, new.hi), method=method,
                   facts=ev.facts + "; " + why, details=details)
