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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from medrcube.gate.checks import Check
from medrcube.gate.verdict import WorstItem
from medrcube.metrics.clustered import ClusteredInterval
from medrcube.metrics.paired import MeanDifference
from medrcube.records import GradedRecord, Outcome

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
    considered = [r for r in asked if r.outcome is not Outcome.UNAVAILABLE]
    # A truncated answer was not graded either: it counts against the bound like an error.
    errors = [r for r in considered if r.outcome in (Outcome.ERROR, Outcome.TRUNCATED)]
    rate = len(errors) / len(considered) if considered else 0.0
    if errors and rate > check.max_error_rate:
        kinds: dict[str, int] = defaultdict(int)
        for r in errors:
            kinds[(r.error or "unknown error").split(":")[0][:60]] += 1
        top = "; ".join(f"{k} x{v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:3])
        msg = (
            f"{len(errors)} errors of {len(considered)} requests ({pct(rate)} > max_error_rate "
            f"{pct(check.max_error_rate)}): the evidence is incomplete; not graded. Errors: {top}. "
            "Fix the endpoint (or raise max_error_rate) and rerun: cached answers are kept."
        )
        return rate, Evidence(check, len(considered) - len(errors), "graded items", error_rate=rate, error=msg,
                              details={"errors": len(errors), "asked": len(considered), "error_kinds": dict(kinds)})
    return rate, None
