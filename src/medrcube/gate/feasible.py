"""Before the first request: which required checks this cube can decide at all.

A required check that no answer set could pass on the cube at hand makes the gate unable
to say QUALIFIED to anyone. Planning knows it from the cube alone (its items, images and
options), so it is settled here, visibly, by the policy's `feasibility` section:

- a check with fewer than `feasibility.min_images` images under it, or one that a model
  right on every item would still not pass (the gate's own evidence code is run on such
  answers: too few images for the bound at the check's confidence), is *undecidable on
  this cube*; `when_undecidable: optional` reports it without requiring it,
  `when_undecidable: refuse` stops the run, naming every such check, and `required`
  (the default of a file without the section) leaves it required;
The intended-use `scope` is applied before this (gate/scope.py): a scoped run's checks
are built on the items inside it, so every one of them lies within it.

A check made optional keeps running and its verdict, gate.json and the summary say it is
not required and why (`Verdict.details["not_required"]`, `GateVerdict.not_required`):
QUALIFIED never rests on a check that was dropped silently, and a decided failure of
such a check still makes the gate NOT QUALIFIED (gate/verdict.py): feasibility only
decides which checks must *pass*. Only the kinds whose best
answers are "every item right" are assessed (accuracy, credibility, findings); the
paired kinds (robustness, regression, image dependence) compare two answer sets and are
left as the policy says.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from medrcube.cube.item import Item
from medrcube.gate.checks import ACCURACY_KINDS, Check, CheckKind
from medrcube.gate.evidence import collect
from medrcube.gate.policy import FeasibilityPolicy, Policy, ThresholdsError
from medrcube.gate.power import clustered_power
from medrcube.metrics.clustered import image_key
from medrcube.records import GradedRecord, Outcome

ASSESSED = ACCURACY_KINDS | {CheckKind.CREDIBILITY, CheckKind.FINDING}


def perfect_records(items: Iterable[Item]) -> list[GradedRecord]:
    """Standard records of a model right on every item whose image is available."""
    out = []
    for it in items:
        if it.restricted or it.image is None:
            continue
        out.append(GradedRecord(
            item_id=it.id, dataset=it.dataset, task=it.task, modality=it.modality, part=it.part, image=it.image,
            image_digest=None, variant="standard", rotation=0, answer=it.answer, n_options=len(it.options),
            prompt_hash="", response=None, extracted=it.answer, how="perfect", outcome=Outcome.CORRECT,
            options=tuple(it.options)))
    return out


def _why_undecidable(check: Check, records: Sequence[GradedRecord], feas: FeasibilityPolicy) -> str | None:
    mine = [r for r in records if check.selects(r)]
    sizes = Counter(image_key(r) for r in mine)
    images = len(sizes)
    if images < feas.min_images:
        return (f"{images} images under it, fewer than feasibility.min_images={feas.min_images}: too few to require "
                "a pass on this cube")
    ev = collect(check, mine)
    # Passing needs every criterion decisively met, or under the point rule met on the
    # estimate from min_n units on (gate/family.py).
    if ev.criteria and max(c.p_pass for c in ev.criteria) <= check.alpha:
        return _why_underpowered(check, ev.criteria[0].bound, list(sizes.values()), feas)
    if check.rule == "point" and ev.criteria and ev.n >= check.min_n and all(c.point_ok for c in ev.criteria):
        return None
    if not ev.criteria:
        return f"not measurable on this cube even with every answer right ({ev.note or 'nothing to measure'})"
    c = ev.criteria[0]
    return (f"a model right on every item would not pass it: {c.name} {c.lo:.3f}..{c.hi:.3f} on {images} images "
            f"cannot clear the bound {c.bound:.3f} at one-sided level {check.alpha:.3g}")


def _why_underpowered(check: Check, bound: float, sizes: list[int], feas: FeasibilityPolicy) -> str | None:
    """Why an accuracy check is not required to pass under the power rule: a model
    `power_margin` above its applied bound would pass it with probability below `power`
    (normal approximation of the score test, design effect 1 + (m_w - 1) ICC with m_w the
    size-weighted items per image); None when it would, or when the rule is off."""
    if feas.power_margin is None or check.kind not in ACCURACY_KINDS or check.rule != "lower_bound":
        return None
    n = sum(sizes)
    m_w = sum(m * m for m in sizes) / n
    deff = 1.0 + (m_w - 1.0) * feas.power_icc
    target = min(0.999, bound + feas.power_margin)
    power = clustered_power(bound, target, n, check.alpha, deff=deff)
    if power >= feas.power:
        return None
    return (f"too few images for power at margin {feas.power_margin:g}: {len(sizes)} images ({n} items, design effect "
            f"{deff:.2f} at ICC {feas.power_icc:g}) give a model at {target:.3f} against the applied bound {bound:.3f} "
            f"a {power:.3f} chance of passing, below feasibility.power={feas.power:g}")


CHANCE = "fail power at chance: "  # the memo's key prefix of _fail_power_at_chance's figures


def _fail_power_at_chance(check: Check, records: Sequence[GradedRecord], feas: FeasibilityPolicy, m: int) -> float:
    """How likely an accuracy check fails a model at chance on its items (blind guessing),
    before the run: the normal approximation of the score test at Holm's first-step level
    alpha / m over the family's m checks (the least level a fail claim gets), design effect
    at feasibility.power_icc; 0 when it has no items or its bound is not above chance."""
    mine = [r for r in records if check.selects(r)]
    if not mine:
        return 0.0
    ev = collect(check, mine)
    if ev.bound is None or ev.chance is None or ev.bound <= ev.chance:
        return 0.0
    sizes = Counter(image_key(r) for r in mine).values()
    n = len(mine)
    deff = 1.0 + (sum(k * k for k in sizes) / n - 1.0) * feas.power_icc
    return clustered_power(float(ev.bound), float(ev.chance), n, check.alpha / max(1, m), deff=deff)


# A caller's cache of the undecidable checks (check id -> why): given the computation, it
# returns its result, computed or remembered (plugin/speed/feasibility_memo.py keys it on the
# items' content, the checks, the policy and the decision code; no I/O here).
Memo = Callable[[Callable[[], dict[str, str]]], dict[str, str]]


def assess(checks: Sequence[Check], items: Iterable[Item], policy: Policy, memo: Memo | None = None) -> list[Check]:
    """The checks with every required check this cube cannot decide made optional, with
    its reason in `params["not_required"]`; ThresholdsError when the policy says
    `when_undecidable: refuse` and some are."""
    feas = policy.feasibility
    if feas.when_undecidable == "required":
        return list(checks)  # the policy asks for nothing of this (a file without `feasibility`)

    def undecidable() -> dict[str, str]:
        perfect = perfect_records(items)
        whys = {c.id: _why_undecidable(c, perfect, feas) for c in checks
                if c.required and c.kind in ASSESSED}
        out = {k: v for k, v in whys.items() if v is not None}
        out.update({CHANCE + c.id: f"{_fail_power_at_chance(c, perfect, feas, len(checks)):.4f}" for c in checks
                    if c.kind in ACCURACY_KINDS})
        return out

    whys = undecidable() if memo is None else memo(undecidable)
    out: list[Check] = []
    refused: list[str] = []
    for c in checks:
        if CHANCE + c.id in whys:
            c = replace(c, params={**c.params, "fail_power_at_chance": float(whys[CHANCE + c.id])})
        reason = None
        if c.required and c.kind in ASSESSED:
            why = whys.get(c.id)
            if why is not None:
                reason = f"not required on this cube: {why}"
                refused.append(f"{c.id}: {why}")
        if reason is None:
            out.append(c)
        else:
            out.append(replace(c, required=False, params={**c.params, "not_required": reason}))
    if refused and feas.when_undecidable == "refuse":
        shown = "\n  ".join(refused[:20]) + ("\n  ..." if len(refused) > 20 else "")
        raise ThresholdsError(policy.source, f"{feas.source}.when_undecidable",
                              f"{len(refused)} required checks cannot be decided on this cube:\n  {shown}\n",
                              show_value=False, fix="add items (images) to these scopes, lower their bounds, or "
                              "write `when_undecidable: optional` to report them without requiring them")
    return out
