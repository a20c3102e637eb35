"""Evaluate checks on graded records: pass, fail, undecided or error, as a family.

    evaluate_gate(checks, records, baseline)  -> GateResult: every verdict and the gate's
    evaluate(check, records, baseline)        -> one check's verdict, as a family of one

Order of decisions, the same for every kind (gate/evidence.py, gate/family.py):
1. API errors above the check's max_error_rate: error ("the evidence is incomplete;
   not graded"). Never a pass, never a fail.
2. Decisive evidence decides at any n (min_n does not apply): pass when every criterion's
   confidence bound clears its bound (intersection-union), fail when the Holm-adjusted
   p-value of "the bound is met" is at most alpha.
3. The point rule only: from min_n units on, the estimate decides (no guarantee).
4. Otherwise undecided, with the number of items that would decide.

Evaluating one check alone (`evaluate`) makes it a family of one: its fail claim is not
adjusted for the other checks. The gate evaluates all its checks together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from medrcube.gate.checks import Check
from medrcube.gate.criteria import Evidence
from medrcube.gate.evidence import ByScope, collect
from medrcube.gate.family import decide
from medrcube.gate.verdict import NO_GUARANTEE, GateVerdict, Verdict, gate_verdict
from medrcube.records import GradedRecord


def evaluate(check: Check, records: Iterable[GradedRecord], baseline: Iterable[GradedRecord] | None = None) -> Verdict:
    """The verdict of `check` alone on the run's records (all variants; the check selects
    its own). `baseline` holds the baseline run's records, needed by regression checks."""
    return decide([collect(check, records, baseline)])[0]


@dataclass(frozen=True, slots=True)
class GateResult:
    verdicts: tuple[Verdict, ...]
    gate: GateVerdict
    evidences: tuple[Evidence, ...] = ()  # the family's evidence: a site check joins it (decide_joining)

    def by_id(self) -> dict[str, Verdict]:
        return {v.check_id: v for v in self.verdicts}


def guarantee_text(checks: Sequence[Check], scope: str = "") -> str:
    """What the gate's verdict guarantees on these checks, in one sentence, with the
    intended-use scope and the checks made optional on this cube (gate/feasible.py)."""
    dropped = [c for c in checks if c.params.get("not_required") and not c.params.get("detector")]
    detectors = [c for c in checks if c.params.get("detector")]
    tail = (f"; scope: {scope}" if scope else "") + (
        f"; {len(dropped)} checks reported, not required on this cube (gate.json `not_required` says why; "
        "a failure there still fails the gate)" if dropped else "") + (
        f"; {len(detectors)} harm detectors (subgroup gaps, `subgroups.gap: detect`): a gap shown above its bound "
        "fails the gate, QUALIFIED does not prove every gap below it (docs/guarantees.md)" if detectors else "")
    return _guarantee(checks) + tail


def _guarantee(checks: Sequence[Check]) -> str:
    required = [c for c in checks if c.required]
    point = [c.id for c in checks if c.rule == "point"]
    if not required:
        return "no required check: the gate cannot qualify"
    if point:
        return (f"{NO_GUARANTEE}: {len(point)} of {len(checks)} checks may decide on their point estimate "
                "(profile `screening` or `rule: point`)")
    alpha = max(c.alpha for c in checks)
    pass_alpha = max(c.pass_alpha for c in required)
    return (f"QUALIFIED is wrong (some required true value worse than its bound) with probability at most "
            f"{pass_alpha:.3g}; NOT QUALIFIED is wrong (every true value, required or reported-only, meets its bound) "
            f"with probability at most {alpha:.3g} (intersection-union for passes, Holm over every check for "
            "failures; docs/guarantees.md)")


# How a family's evidence is collected: each check's `collect`, in the checks' order. The gate
# process may collect on more than one core (plugin/speed/forked_evidence.py): the same
# evidence, as the same function of the same records.
CollectFamily = Callable[[Sequence[Check], ByScope, list[GradedRecord] | None, str | None], list[Evidence]]


def collect_each(checks: Sequence[Check], scoped: ByScope, base: list[GradedRecord] | None,
                 baseline_error: str | None) -> list[Evidence]:
    """Every check's evidence, one after the other."""
    return [collect(c, scoped, base if c.needs_baseline else None, baseline_error=baseline_error) for c in checks]


def evaluate_gate(
    checks: Sequence[Check],
    records: Iterable[GradedRecord],
    baseline: Iterable[GradedRecord] | None = None,
    *,
    baseline_error: str | None = None,
    scope: str = "",
    collect_family: CollectFamily = collect_each,
) -> GateResult:
    """Every check's verdict, decided as one family, and the gate's verdict.
    `baseline_error` says why the baseline's records are missing (the regression checks'
    error message)."""
    scoped = ByScope(records)
    base = list(baseline) if baseline is not None else None
    evidences = collect_family(checks, scoped, base, baseline_error)
    verdicts = tuple(decide(evidences))
    gate = gate_verdict((v.to_dict() for v in verdicts), guarantee_text(checks, scope))
    return GateResult(verdicts, gate, tuple(evidences))


def decide_joining(family: Sequence[Evidence], evidence: Evidence) -> Verdict:
    """The verdict of a check decided after the family (a site check, plugin/site.py):
    it joins the family (one Holm family, required and reported-only) and its fail claim is
    Holm-adjusted over the family and itself. The family's own verdicts stand as they
    were decided; site checks are not adjusted for one another (docs/guarantees.md)."""
    return decide([*family, evidence])[-1]
