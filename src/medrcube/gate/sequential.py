"""The gate's decisions in a sequential run: group-sequential looks of each check's own
fixed-sample rule, with a final analysis on all its images.

Every check, whatever its kind, is looked at a few times at planned fractions of its
images (`CheckLooks.fractions`, the last one 1: the final analysis on all of them). At a
look its evidence is what the full run would compute on the images seen so far
(gate/evidence.py), reduced to the two one-sided p-values the family decision weighs
(gate/family.py: `pass_p`, `fail_p`). The levels of the looks come from an alpha-spending
function (metrics/group_sequential.py):

- pass claims, intersection-union: a check passes at the first look whose p of "the
  bound is not met" is at most that look's nominal level at the check's own alpha (no
  adjustment: QUALIFIED needs every required pass claim);
- fail claims, as one family (every check, required or reported-only: any decided
  failure makes the gate NOT QUALIFIED):
  Holm's step-down with group-sequential levels (Maurer & Bretz 2013, Stat. Biopharm.
  Res. 5:311): while r claims of a family of m are rejected, every other claim is tested,
  at each of its looks so far, at the nominal level for alpha / (m - r); a rejection
  frees its share for the others, whose earlier looks are tested again at the larger level;
- the point rule (`screening`) decides only at the final look, on the estimate, as the
  full run does (no guarantee);
- futility, non-binding (`_futility`): a check whose fail claim has a predictive power
  under `futility` at its latest look (the chance that its final analysis would decide
  it, the drift as uncertain as the look leaves it) stops asking for images when its
  pass claim's is under `futility` too, or when QUALIFIED is out of reach anyway (a
  required check undecided at its final analysis, or with its pass claim's power under
  `futility`) (`CheckLooks.futile_at`). It decides nothing: the check stays undecided
  (a required one so makes QUALIFIED impossible: a futility stop never turns into a
  pass), its looks so far are still tested (Holm's later rounds can reject its fail
  claim), and the levels are those of the design without the stop, so no error rate
  rises; what it trades is agreement with the full run, measured.

Decisions are kept once made: a passed check is no longer looked at (its fail claim keeps
its share of the family: it was not rejected).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from medrcube.gate.checks import Check
from medrcube.gate.criteria import Evidence
from medrcube.gate.family import decide, fail_p, pass_p
from medrcube.gate.verdict import NO_GUARANTEE, Status, Verdict
from medrcube.metrics.group_sequential import RHO, nominal_levels, predictive_power, spent

GUARANTEE = ("group-sequential: pass claim at one-sided {a:.3g} and fail claims at family-wise {a:.3g} (Holm over "
             "{m} checks) over every look, alpha spent as alpha * t^{rho:g} by information fraction t")


@dataclass(frozen=True, slots=True)
class Look:
    """One look at a check: its fixed-sample evidence on its first `images` images."""

    images: int
    fraction: float  # of the check's images
    p_pass: float
    p_fail: float
    point_ok: bool | None = None  # the point rule's verdict on the estimate (None: not met by min_n)
    error: str | None = None  # the evidence could not be graded (API errors)

    @classmethod
    def of(cls, evidence: Evidence, images: int, available: int) -> Look:
        usable = evidence.error is None and bool(evidence.criteria)
        point = (all(c.point_ok for c in evidence.criteria) if usable and evidence.n >= evidence.check.min_n
                 else None)
        return cls(images, images / max(available, 1), pass_p(evidence) if usable else 1.0,
                   fail_p(evidence) if usable else 1.0, point, evidence.error)


@dataclass
class CheckLooks:
    """One check's looks so far and its decision (None while undecided)."""

    check: Check
    fractions: tuple[float, ...]  # its planned looks; the last is 1.0 (the final analysis)
    looks: list[Look] = field(default_factory=list)
    evidence: Evidence | None = None  # at its latest look
    status: Status | None = None
    decided_at: int | None = None  # index of the deciding look
    fail_alpha: float = 0.0  # the level its family gave its fail claim when last tested
    by_point: bool = False  # decided by the point rule at the final look (no guarantee)
    futility: float | None = None  # stop asking when its claims' predictive power is under this (_futility)
    futile_at: int | None = None  # index of the look at which it stopped asking (futility)
    power_left: tuple[float, float] | None = None  # (pass, fail) predictive power at that look

    @property
    def final(self) -> bool:
        """The final analysis is made (every image of the check seen)."""
        return len(self.looks) >= len(self.fractions)

    def pass_levels(self) -> tuple[float, ...]:
        return nominal_levels(self.fractions, self.check.pass_alpha)

    def fail_levels(self, alpha: float) -> tuple[float, ...]:
        return nominal_levels(self.fractions, alpha)

    def record(self) -> list[dict[str, Any]]:
        """The levels spent per look, for gate.json."""
        passes = self.pass_levels()
        fails = self.fail_levels(self.fail_alpha) if self.fail_alpha > 0 else None
        return [{
            "images": lk.images, "fraction": round(lk.fraction, 4), "planned_fraction": self.fractions[i],
            "p_pass": lk.p_pass, "pass_level": passes[i], "pass_spent": spent(self.fractions[i], self.check.pass_alpha),
            "p_fail": lk.p_fail, "fail_level": fails[i] if fails else None,
            "fail_spent": spent(self.fractions[i], self.fail_alpha) if fails else None,
        } for i, lk in enumerate(self.looks)]


FAILED_EARLY = "not asked: a check failed at a look, so NOT QUALIFIED is final"
PASSED_ALL = "not asked: every required check passed, so QUALIFIED is final"


def verdict_is_final(members: Sequence[CheckLooks]) -> str | None:
    """Why the gate's verdict can no longer change, or None: a check failed, required or
    reported-only (NOT QUALIFIED whatever the others do), or every required check passed
    (QUALIFIED; a reported-only check still open could only have failed on images the
    run did not need to ask)."""
    required = [m for m in members if m.check.required]
    if any(m.status is Status.FAIL for m in members):
        return FAILED_EARLY
    if required and all(m.status is Status.PASS for m in required):
        return PASSED_ALL
    return None


def decide_looks(members: Sequence[CheckLooks]) -> list[CheckLooks]:
    """Decide what the looks taken so far decide (in place); the newly decided checks."""
    new: list[CheckLooks] = []
    for m in members:
        if m.status is not None or not m.looks:
            continue
        levels = m.pass_levels()
        hit = next((i for i, lk in enumerate(m.looks) if lk.p_pass <= levels[i]), None)
        if hit is not None:
            m.status, m.decided_at = Status.PASS, hit
            new.append(m)
        elif m.check.rule == "point" and m.final and m.looks[-1].point_ok is not None:
            m.status, m.decided_at = (Status.PASS if m.looks[-1].point_ok else Status.FAIL), len(m.looks) - 1
            m.by_point = True
            new.append(m)
    new += _holm(list(members))
    _futility(members)
    return new


def _futility(members: Sequence[CheckLooks]) -> None:
    """Mark the undecided checks whose images can no longer change the gate's verdict
    (futile: they stop asking for images; nothing is decided).

    At each check's latest usable look (both p-values inside (0, 1)) the predictive power
    of its pass claim (at its final pass level) and of its fail claim (at its final
    level for its present Holm share, alpha / (m - r): the first rejection makes NOT
    QUALIFIED final, so a share that only later rejections would enlarge cannot change
    the gate's verdict) is taken (metrics/group_sequential.py). QUALIFIED is out of reach once a required check
    has had its final analysis undecided or its pass claim's power is under `futility`;
    then a check whose fail claim's power is under `futility` stops (its pass could not
    make the gate QUALIFIED, and its fail is unlikely), and so does one whose both
    claims are under it in any case."""
    power: dict[int, tuple[float, float]] = {}
    for m in members:
        if m.futility is None or m.status is not None or m.futile_at is not None or not m.looks or m.final:
            continue
        lk = m.looks[-1]
        if lk.error is not None or not (0.0 < lk.p_pass < 1.0 and 0.0 < lk.p_fail < 1.0) or not 0.0 < lk.fraction < 1.0:
            continue
        power[id(m)] = (predictive_power(lk.p_pass, lk.fraction, m.pass_levels()[-1]),
                        predictive_power(lk.p_fail, lk.fraction, m.fail_levels(m.fail_alpha or m.check.alpha)[-1]))
    out_of_reach = any(m.check.required and m.status is None and (
        (m.final and m.futile_at is None) or m.futile_at is not None
        or (id(m) in power and m.futility is not None and power[id(m)][0] < m.futility)) for m in members)
    for m in members:
        if id(m) not in power or m.futility is None:
            continue
        p_pass, p_fail = power[id(m)]
        if p_fail < m.futility and (p_pass < m.futility or out_of_reach):
            m.futile_at, m.power_left = len(m.looks) - 1, (p_pass, p_fail)


def _holm(family: Sequence[CheckLooks]) -> list[CheckLooks]:
    """Holm's step-down over a family's fail claims, at group-sequential levels."""
    size = len(family)
    new: list[CheckLooks] = []
    while True:
        rejected = sum(m.status is Status.FAIL for m in family)
        share = max(size - rejected, 1)
        step = []
        for m in family:
            if m.status is not None or not m.looks:
                continue
            m.fail_alpha = m.check.alpha / share
            levels = m.fail_levels(m.fail_alpha)
            hit = next((i for i, lk in enumerate(m.looks) if lk.p_fail <= levels[i]), None)
            if hit is not None:
                step.append((m, hit))
        if not step:
            return new
        for m, hit in step:
            m.status, m.decided_at = Status.FAIL, hit
            new.append(m)


def sequential_verdicts(members: Iterable[CheckLooks], notes: dict[str, str]) -> dict[str, Verdict]:
    """Every check's verdict from its looks: its numbers are those of its fixed-sample
    evidence at its latest look; its status the looks' decision; `notes` says, per
    check, why its sequence ended (not asked, stream ended, budget ...)."""
    members = list(members)
    out: dict[str, Verdict] = {}
    for m in members:
        if m.evidence is None:
            continue
        fixed = decide([m.evidence])[0]
        out[m.check.id] = _verdict(m, fixed, len(members), notes.get(m.check.id, ""))
    return out


def _verdict(m: CheckLooks, fixed: Verdict, family: int, note: str) -> Verdict:
    lk = m.looks[-1] if m.looks else None
    seen = (f"{lk.images} of its images ({lk.fraction:.0%}), look {len(m.looks)} of {len(m.fractions)}"
            if lk else "no image")
    details = {**fixed.details, "sequential": {"looks": m.record(), "planned_fractions": list(m.fractions),
                                               "final_analysis": m.final, "stop": note}}
    common: dict[str, Any] = {"details": details, "p_fail_adjusted": None}
    if fixed.status is Status.ERROR:
        return replace(fixed, message=f"{fixed.message}\n  sequential: {seen}", **common)
    guarantee = GUARANTEE.format(a=m.check.alpha, m=family, rho=RHO)
    if m.status is not None and m.decided_at is not None:
        at = m.looks[m.decided_at]
        if m.by_point:
            how, guarantee, decided_by = "the point estimate at the final look (point rule)", NO_GUARANTEE, "point estimate"
        elif m.status is Status.PASS:
            how = f"p={at.p_pass:.3g} <= {m.pass_levels()[m.decided_at]:.3g}, the look's nominal level"
            decided_by = "group-sequential look"
        else:
            how = (f"p={at.p_fail:.3g} <= {m.fail_levels(m.fail_alpha)[m.decided_at]:.3g}, the look's nominal level "
                   f"for its family share {m.fail_alpha:.3g} (Holm)")
            decided_by = "group-sequential look"
        head = (f"sequential: {m.status.value} at look {m.decided_at + 1} of {len(m.fractions)} "
                f"({at.images} images, {at.fraction:.0%}): {how}")
        message = f"{head}\n  {m.evidence.facts if m.evidence else ''}"
        return replace(fixed, status=m.status, message=message, decided_by=decided_by, guarantee=guarantee,
                       needed_n=None, **common)
    why = note or ("its final analysis on all its images did not decide it" if m.final else "undecided")
    levels = ""
    if lk is not None:
        i = len(m.looks) - 1
        fail_level = m.fail_levels(m.fail_alpha)[i] if m.fail_alpha > 0 else None
        levels = (f"; at its last look p={lk.p_pass:.3g} for a pass (level {m.pass_levels()[i]:.3g}), "
                  f"p={lk.p_fail:.3g} for a fail" + (f" (level {fail_level:.3g})" if fail_level is not None else ""))
    facts = m.evidence.facts if m.evidence is not None else ""
    message = f"undecided: sequential: {why}; {seen}{levels}\n  {facts}"
    return replace(fixed, status=Status.UNDECIDED, message=message, decided_by="", guarantee="no decision",
                   **common)
