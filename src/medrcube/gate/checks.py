"""The gate's checks: one per cube cell, axis slice, overall, credibility scope, image
dependence, position robustness and regression, built from the cube's cells and the
policy alone, so that pytest can parametrize them at collection time before any
record exists.

Ids read as pytest ids: `overall`, `slice/part/Chest`, `Chest/X-Ray/Disease Diagnosis`,
`credibility/overall`, `credibility/part/Chest`, `image-dependence/overall`,
`position/overall`, `regression/overall`, `regression/Chest/X-Ray/Disease Diagnosis`,
`robustness/jpeg:30/overall`, `agreement/jpeg:30/part/Chest`,
`finding/pneumothorax/Chest/X-Ray/Disease Diagnosis`, `calibration/overall`,
`selective/utility/overall`, `selective/accuracy@0.8/overall`, `selective/coverage@risk0.1/overall`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from medrcube.gate.kinds import BuildContext, builds, entry_of, registered
from medrcube.gate.thresholds import AXES, Bound, Policy, ThresholdsError
from medrcube.metrics.findings import label_of
from medrcube.records import GradedRecord, is_perturbation
from medrcube.taxonomy import MODALITIES, PARTS, TASK_NAMES, Level, did_you_mean, task_level

# Labels of checks that span an axis, so that Allure groups them beside the cells.
ALL_PARTS = "All parts"
ALL_MODALITIES = "All modalities"
ALL_TASKS = "All tasks"


class CheckKind(StrEnum):
    """The built-in kinds (gate/kinds.py registers them; a registered kind's name is a plain str)."""

    CELL = "cell"
    SLICE = "slice"
    OVERALL = "overall"
    CREDIBILITY = "credibility"
    IMAGE_DEPENDENCE = "image_dependence"
    POSITION = "position"
    REGRESSION = "regression"
    # Image perturbations: per perturbation and scope, accuracy non-inferiority and answer agreement.
    ROBUSTNESS = "robustness"
    ROBUSTNESS_AGREEMENT = "robustness_agreement"
    # Clinical depth: per-finding sensitivity, calibration, selective prediction and deferral.
    FINDING = "finding"
    CALIBRATION = "calibration"
    SELECTIVE = "selective"
    # A site's own proportion over records it selects (plugin/site.py), decided here.
    SITE = "site"


ACCURACY_KINDS = frozenset({CheckKind.CELL, CheckKind.SLICE, CheckKind.OVERALL})


@dataclass(frozen=True, slots=True)
class Check:
    """One gate case. `params` holds the kind's extra bounds (max_shortcut_prob, max_gap, margin, rotations,
    exclude_low_tasks); `labels` are for Allure: part, modality, task, level, severity, kind. Both read-only."""

    id: str
    kind: str  # a registered kind (gate/kinds.py): a CheckKind for the built-in ones
    metric: str  # accuracy, grounding, blind_drop, circular_accuracy, regression_drop
    part: str | None  # selector: None means any value of the axis
    modality: str | None
    task: str | None
    bound: float | None  # the primary bound (None: the check relies on params only)
    rule: str  # point (no statistical guarantee) or lower_bound
    confidence: float  # two-sided; each one-sided claim is made at (1 - confidence) / 2
    min_n: int  # the point rule decides on its estimate only from this many units
    max_error_rate: float
    source: str = ""  # the thresholds.yaml key the bound came from
    required: bool = True  # False: reported, never blocks the gate
    above_chance: float = 0.0  # accuracy checks: bound raised to chance level + this
    variants: tuple[str, ...] = ("standard",)  # record variants the check reads
    params: dict[str, Any] = field(default_factory=dict, hash=False, compare=True)
    labels: dict[str, str] = field(default_factory=dict, hash=False, compare=True)
    pass_share: float = 1.0  # of `alpha`, spent by pass claims: 1 on a cube's first attempt (gate/attempts.py)

    @property
    def selector(self) -> tuple[str | None, str | None, str | None]:
        return (self.part, self.modality, self.task)

    @property
    def needs_baseline(self) -> bool:
        entry = entry_of(self.kind)  # the kind's registry entry says so (gate/kinds.py)
        return entry is not None and entry.needs_baseline

    def selects(self, record: GradedRecord) -> bool:
        """Whether the record lies in the check's part/modality/task scope (any variant)."""
        return (
            (self.part is None or record.part == self.part)
            and (self.modality is None or record.modality == self.modality)
            and (self.task is None or record.task == self.task)
        )

    @property
    def alpha(self) -> float:  # the one-sided level of each of the check's claims (pass or fail)
        return (1.0 - self.confidence) / 2.0
    pass_alpha = property(lambda self: self.alpha * self.pass_share, doc="the pass claim's one-sided level")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kind"] = str(self.kind)
        d["variants"] = list(self.variants)
        return d


# --------------------------------------------------------------------------- ordering, labels


def _order(values: Iterable[str], canonical: Sequence[str]) -> list[str]:
    rank = {v: i for i, v in enumerate(canonical)}
    return sorted(set(values), key=lambda v: (rank.get(v, len(rank)), v))


def _level_name(task: str | None) -> str:
    level = task_level(task) if task else None
    return level.name.lower() if level else "unknown"


_SEVERITY_BY_LEVEL = {"high": "critical", "mid": "normal", "low": "minor", "unknown": "normal"}


def _labels(part: str, modality: str, task: str, level: str, severity: str, kind: str) -> dict[str, str]:
    return {"part": part, "modality": modality, "task": task, "level": level, "severity": severity,
            "kind": str(kind)}


def _variant_names(variants: Iterable[Any] | str) -> tuple[list[str], int | None]:
    """Variant names from spec strings ("standard,blind,shuffled:3") or Variant objects,
    and K of shuffled:K (None when shuffled has no K)."""
    if isinstance(variants, str):
        variants = [v for v in variants.split(",") if v.strip()]
    names: list[str] = []
    rotations: int | None = None
    for v in variants:
        name = getattr(v, "name", None) or str(v).strip()
        base, _, arg = name.partition(":")
        names.append(base.strip())
        k = getattr(v, "k", None) or getattr(v, "rotations", None)
        if base.strip() == "shuffled":
            if isinstance(k, int):
                rotations = k
            elif arg.strip().isdigit():
                rotations = int(arg)
            elif hasattr(v, "instances"):
                rotations = sum(1 for n, _ in v.instances() if n == "shuffled")
    return names, rotations


def _accuracy_check(
    cid: str, kind: CheckKind, b: Bound, sel: tuple[str | None, str | None, str | None], labels: dict[str, str]
) -> Check:
    return Check(
        id=cid, kind=kind, metric="accuracy", part=sel[0], modality=sel[1], task=sel[2], bound=b.bound, rule=b.rule,
        confidence=b.confidence, min_n=b.min_n, max_error_rate=b.max_error_rate, source=b.source,
        above_chance=b.above_chance, labels=labels, required=b.required,
    )


# --------------------------------------------------------------------------- building

Selector = tuple[str | None, str | None, str | None]


def build_checks(
    cells: Iterable[Sequence[str]],
    policy: Policy,
    *,
    variants: Iterable[Any] | str = ("standard",),
    has_baseline: bool = False,
    cell_options: Mapping[tuple[str, str, str], Iterable[str]] | None = None,
    strata: Mapping[str, Mapping[str, int]] | None = None,
) -> list[Check]:
    """Every check the policy asks for on a cube with these (part, modality, task) cells.

    Image-dependence checks exist only if `blind` is among the variants, position
    checks only with `shuffled:K`, regression checks only with a baseline, robustness
    checks only for the image perturbations asked (`jpeg:30`), utility checks only with
    `abstain`. `cell_options` (the option texts offered per cell, from the cube) keeps
    per-finding checks to the cells that offer the finding; without it every matching
    diagnosis cell gets one. `strata` (images per value of each subgroup attribute,
    cube/attributes.strata) lets the subgroup kinds build a check per stratum.
    """
    cube_cells = sorted({(c[0], c[1], c[2]) for c in cells})
    parts = _order((c[0] for c in cube_cells), PARTS)
    modalities = _order((c[1] for c in cube_cells), MODALITIES)
    tasks = _order((c[2] for c in cube_cells), TASK_NAMES)
    rank = (
        {v: i for i, v in enumerate(parts)},
        {v: i for i, v in enumerate(modalities)},
        {v: i for i, v in enumerate(tasks)},
    )
    cube_cells.sort(key=lambda c: (rank[0][c[0]], rank[1][c[1]], rank[2][c[2]]))
    names, rotations = _variant_names(variants)
    asked = [v for v in variants.split(",") if v.strip()] if isinstance(variants, str) else list(variants)
    context = BuildContext(tuple(cube_cells), {"part": parts, "modality": modalities, "task": tasks}, policy,
                           tuple(names), has_baseline, cell_options, tuple(asked), rotations, strata)
    # Each kind builds its own, in the registry's order (gate/kinds.py; the built-in ones below).
    return [check for entry in registered() if entry.build is not None for check in entry.build(context)]


@builds(CheckKind.OVERALL)
def _overall_checks(ctx: BuildContext) -> list[Check]:
    if ctx.policy.overall is None:
        return []
    return [_accuracy_check("overall", CheckKind.OVERALL, ctx.policy.overall, (None, None, None),
                            _labels(ALL_PARTS, ALL_MODALITIES, ALL_TASKS, "overall", "blocker", CheckKind.OVERALL))]


@builds(CheckKind.SLICE)
def _slice_checks(ctx: BuildContext) -> list[Check]:
    out = []
    for axis in AXES:
        sp = ctx.policy.slices.get(axis)
        if sp is None:
            continue
        for value in ctx.axis_values[axis]:
            b = sp.bound_for(value)
            if b is None:
                continue
            sel = (value if axis == "part" else None, value if axis == "modality" else None,
                   value if axis == "task" else None)
            level = _level_name(value) if axis == "task" else "slice"
            labels = _labels(sel[0] or ALL_PARTS, sel[1] or ALL_MODALITIES, sel[2] or ALL_TASKS, level,
                             _SEVERITY_BY_LEVEL[level] if axis == "task" else "critical", CheckKind.SLICE)
            out.append(_accuracy_check(f"slice/{axis}/{value}", CheckKind.SLICE, b, sel, labels))
    return out


@builds(CheckKind.CELL)
def _cell_checks(ctx: BuildContext) -> list[Check]:
    out = []
    for cell in ctx.cells:
        b = ctx.policy.cell_bound(cell)
        if b is None:
            continue
        level = _level_name(cell[2])
        out.append(_accuracy_check("/".join(cell), CheckKind.CELL, b, cell,
                                   _labels(*cell, level, _SEVERITY_BY_LEVEL[level], CheckKind.CELL)))
    return out


@builds(CheckKind.IMAGE_DEPENDENCE)
def _image_dependence_checks(ctx: BuildContext) -> list[Check]:
    idp = ctx.policy.image_dependence
    if "blind" not in ctx.variants or not idp.enabled:
        return []
    return [Check(
        id="image-dependence/overall", kind=CheckKind.IMAGE_DEPENDENCE, metric="blind_drop",
        part=None, modality=None, task=None, bound=idp.min_drop, rule=idp.rule, confidence=idp.confidence,
        min_n=idp.min_n, max_error_rate=idp.max_error_rate, source=f"{idp.source}.min_drop",
        variants=("standard", "blind"), required=idp.required,
        labels=_labels(ALL_PARTS, "Image dependence", "Standard vs blind", "overall", "critical",
                       CheckKind.IMAGE_DEPENDENCE),
    )]


@builds(CheckKind.POSITION)
def _position_checks(ctx: BuildContext) -> list[Check]:
    pos = ctx.policy.position
    if "shuffled" not in ctx.variants or not pos.enabled or (pos.max_gap is None and pos.min_circular_accuracy is None):
        return []
    return [Check(
        id="position/overall", kind=CheckKind.POSITION, metric="circular_accuracy",
        part=None, modality=None, task=None, bound=pos.min_circular_accuracy, rule=pos.rule,
        confidence=pos.confidence, min_n=pos.min_n, max_error_rate=pos.max_error_rate, source=pos.source,
        variants=("standard", "shuffled"), params={"max_gap": pos.max_gap, "rotations": ctx.rotations},
        required=pos.required,
        labels=_labels(ALL_PARTS, "Position robustness", "Circular accuracy", "overall", "normal", CheckKind.POSITION),
    )]


@builds(CheckKind.REGRESSION)
def _regression_checks(ctx: BuildContext) -> list[Check]:
    reg = ctx.policy.regression
    if not ctx.has_baseline or not reg.enabled:
        return []
    scopes: list[tuple[str, Selector]] = [("regression/overall", (None, None, None))]
    if reg.per_cell:
        scopes += [("regression/" + "/".join(c), c) for c in ctx.cells]
    out = []
    for cid, sel in scopes:
        level = _level_name(sel[2]) if sel[2] else "overall"
        out.append(Check(
            id=cid, kind=CheckKind.REGRESSION, metric="regression_drop", part=sel[0], modality=sel[1],
            task=sel[2], bound=reg.margin, rule=reg.rule, confidence=1.0 - 2.0 * reg.alpha, min_n=reg.min_n,
            max_error_rate=reg.max_error_rate, source=f"{reg.source}.margin",
            params={"alpha": reg.alpha, "margin": reg.margin},
            required=reg.required if cid == "regression/overall" else reg.cells_required,
            labels=_labels(sel[0] or ALL_PARTS, sel[1] or ALL_MODALITIES, sel[2] or ALL_TASKS, level,
                           "critical" if level in ("overall", "high") else _SEVERITY_BY_LEVEL[level],
                           CheckKind.REGRESSION),
        ))
    return out


@builds(CheckKind.CREDIBILITY)
def _credibility_checks(ctx: BuildContext) -> list[Check]:
    cube_cells, parts, policy = ctx.cells, ctx.axis_values["part"], ctx.policy
    if (cred := policy.credibility) is None or not cred.enabled:
        return []
    excluded = set(cred.exclude_low_tasks)

    def has_chain(part: str | None) -> bool:
        tasks = {c[2] for c in cube_cells if part is None or c[0] == part}
        high = any(task_level(t) is Level.HIGH for t in tasks)
        low = any(task_level(t) in (Level.LOW, Level.MID) and t not in excluded for t in tasks)
        return high and low

    scopes = [("credibility/overall", None), *((f"credibility/part/{p}", p) for p in parts if cred.by_part)]
    out = []
    for cid, part in scopes:
        bounds = cred.overall if part is None else cred.for_part(part)
        # The odds ratio is the primary bound when set (the dependence that a shortcut lacks),
        # the luck rate the second route to a pass; min_grounding a further criterion.
        metric, bound = next(((m, b) for m, b in (("dependence", bounds.min_odds_ratio), ("luck_rate",
                              bounds.max_luck_rate), ("grounding", bounds.min_grounding)) if b is not None), ("", None))
        if bound is None or not has_chain(part):
            continue
        out.append(Check(
            id=cid, kind=CheckKind.CREDIBILITY, metric=metric, part=part,
            modality=None, task=None, bound=bound, rule=cred.rule,
            confidence=cred.confidence, min_n=bounds.min_pairs, max_error_rate=cred.max_error_rate,
            source=bounds.source, required=cred.required if part is None else cred.parts_required,
            params={"exclude_low_tasks": list(cred.exclude_low_tasks), "max_luck_rate": bounds.max_luck_rate,
                    "min_grounding": bounds.min_grounding, "min_odds_ratio": bounds.min_odds_ratio,
                    "odds_ratio_share": cred.odds_ratio_share, "shortcut_odds_ratio": cred.shortcut_odds_ratio,
                    "shortcut_luck_rate": cred.shortcut_luck_rate, "fail_share": None if part else cred.fail_share},
            labels=_labels(part or ALL_PARTS, "Credibility", "Diagnosis resting on perception", "credibility",
                           "critical", CheckKind.CREDIBILITY),
        ))
    return out


# --------------------------------------------------------------------------- clinical depth and image perturbations


def _perturbations(variants: Iterable[Any]) -> list[tuple[str, Any]]:
    """(spec, perturbation or None) of every image perturbation asked: Variant objects
    carry theirs (its `applies_to_task` says where it is asked); spec strings do not."""
    out: dict[str, Any] = {}
    for v in variants:
        p = getattr(v, "perturbation", None)
        if p is not None:
            out.setdefault(str(p.spec), p)
        elif isinstance(v, str) and is_perturbation(v.strip()):
            out.setdefault(v.strip(), None)
    return list(out.items())


def _scope_selectors(scope: str, cube_cells: Sequence[tuple[str, str, str]],
                     axis_values: Mapping[str, Sequence[str]]) -> list[tuple[str, Selector]]:
    if scope == "overall":
        return [("overall", (None, None, None))]
    if scope == "cell":
        return [("/".join(c), c) for c in cube_cells]
    axes = AXES if scope == "slice" else (scope,)
    out: list[tuple[str, Selector]] = []
    for axis in axes:
        for value in axis_values[axis]:
            sel = (value if axis == "part" else None, value if axis == "modality" else None,
                   value if axis == "task" else None)
            out.append((f"{axis}/{value}", sel))
    return out


def _scope_labels(sel: Selector, kind: str, severity: str = "critical") -> dict[str, str]:
    level = _level_name(sel[2]) if sel[2] else "overall"
    return _labels(sel[0] or ALL_PARTS, sel[1] or ALL_MODALITIES, sel[2] or ALL_TASKS, level, severity, kind)


@builds(CheckKind.ROBUSTNESS)
def _robustness(ctx: BuildContext) -> list[Check]:
    return [c for c in _robustness_checks(ctx) if c.kind is CheckKind.ROBUSTNESS]


@builds(CheckKind.ROBUSTNESS_AGREEMENT)
def _agreement(ctx: BuildContext) -> list[Check]:
    return [c for c in _robustness_checks(ctx) if c.kind is CheckKind.ROBUSTNESS_AGREEMENT]


def _robustness_checks(ctx: BuildContext) -> list[Check]:
    """Per perturbation asked and scope: the accuracy check and the agreement check."""
    rob = ctx.policy.robustness
    if not rob.enabled:
        return []
    out: list[Check] = []
    for spec, pert in _perturbations(ctx.asked):
        for scope in rob.scopes:
            for sid, sel in _scope_selectors(scope, ctx.cells, ctx.axis_values):
                # A perturbation never asked on a task (flip on ROI Grounding) has no evidence there.
                if pert is not None and sel[2] is not None and not pert.applies_to_task(sel[2]):
                    continue
                common: dict[str, Any] = dict(
                    part=sel[0], modality=sel[1], task=sel[2], rule=rob.rule, confidence=rob.confidence,
                    min_n=rob.min_n, max_error_rate=rob.max_error_rate, required=rob.required,
                    variants=("standard", spec))
                if rob.margin is not None:
                    out.append(Check(
                        id=f"robustness/{spec}/{sid}", kind=CheckKind.ROBUSTNESS, metric="perturbation_drop",
                        bound=rob.margin, source=f"{rob.source}.margin", params={"variant": spec, "margin": rob.margin},
                        labels=_scope_labels(sel, CheckKind.ROBUSTNESS), **common))
                if rob.min_agreement is not None:
                    out.append(Check(
                        id=f"agreement/{spec}/{sid}", kind=CheckKind.ROBUSTNESS_AGREEMENT, metric="answer_agreement",
                        bound=rob.min_agreement, source=f"{rob.source}.min_agreement", params={"variant": spec},
                        labels=_scope_labels(sel, CheckKind.ROBUSTNESS_AGREEMENT, "normal"), **common))
    return out


@builds(CheckKind.FINDING)
def _finding_checks(ctx: BuildContext) -> list[Check]:
    cube_cells, policy, cell_options = ctx.cells, ctx.policy, ctx.cell_options
    fp = policy.findings
    if fp is None or not fp.enabled or not fp.min_sensitivity:
        return []
    patterns = [tuple(p.split("/")) for p in fp.cells]
    cells = [c for c in cube_cells if any(all(fnmatch.fnmatchcase(v, q) for v, q in zip(c, p, strict=True))
                                          for p in patterns)]
    offered = {c: {label_of(o) for o in (cell_options or {}).get(c, ())} for c in cells}
    prevalence = {label_of(k): v for k, v in fp.prevalence.items()}
    out: list[Check] = []
    for name, bound in fp.min_sensitivity.items():
        finding = label_of(name)
        mine = [c for c in cells if cell_options is None or finding in offered[c]]
        if cell_options is not None and not mine:
            known = sorted(set().union(*offered.values())) if offered else []
            raise ThresholdsError(policy.source, f"findings.min_sensitivity.{name}",
                                  "no diagnosis cell of the cube offers this finding" + did_you_mean(finding, known),
                                  show_value=False, fix="use a finding the cube's options name "
                                  f"({', '.join(known[:12]) or 'none'}), or widen `findings.cells`")
        scopes: list[tuple[str, Selector]] = []
        if "cell" in fp.scopes:
            scopes += [("/".join(c), c) for c in mine]
        if "overall" in fp.scopes and mine:
            scopes.append(("overall", (None, None, None)))
        for sid, sel in scopes:
            out.append(Check(
                id=f"finding/{finding}/{sid}", kind=CheckKind.FINDING, metric="sensitivity", part=sel[0],
                modality=sel[1], task=sel[2], bound=bound, rule=fp.rule, confidence=fp.confidence, min_n=fp.min_n,
                max_error_rate=fp.max_error_rate, source=f"{fp.source}.min_sensitivity.{name}", required=fp.required,
                params={"finding": finding, "cells": list(fp.cells), "prevalence": prevalence.get(finding),
                        "site_prevalence": prevalence},
                labels=_scope_labels(sel, CheckKind.FINDING)))
    return out


@builds(CheckKind.CALIBRATION)
def _calibration_checks(ctx: BuildContext) -> list[Check]:
    cal = ctx.policy.calibration
    if cal is None or not cal.enabled or (cal.max_ce is None and cal.max_ece is None):
        return []
    statistic, bound = ("ce", cal.max_ce) if cal.max_ce is not None else ("ece", cal.max_ece)
    return [Check(
        id="calibration/overall", kind=CheckKind.CALIBRATION, metric=f"calibration_{statistic}", part=None,
        modality=None, task=None, bound=bound, rule=cal.rule, confidence=cal.confidence, min_n=cal.min_n,
        max_error_rate=cal.max_error_rate, source=f"{cal.source}.max_{statistic}", required=cal.required,
        params={"statistic": statistic, "n_bins": cal.n_bins, "n_boot": cal.n_boot},
        labels=_labels(ALL_PARTS, "Calibration", "Calibration error", "overall", "normal", CheckKind.CALIBRATION))]


@builds(CheckKind.SELECTIVE)
def _selective_checks(ctx: BuildContext) -> list[Check]:
    cube_cells, has_abstain = ctx.cells, "abstain" in ctx.variants
    sp = ctx.policy.selective
    if not sp.enabled:
        return []
    scopes: list[tuple[str, Selector]] = []
    if "overall" in sp.scopes:
        scopes.append(("overall", (None, None, None)))
    if "cell" in sp.scopes:
        scopes += [("/".join(c), c) for c in cube_cells]
    common: dict[str, Any] = dict(rule=sp.rule, confidence=sp.confidence, min_n=sp.min_n,
                                  max_error_rate=sp.max_error_rate, required=sp.required)
    out: list[Check] = []
    for sid, sel in scopes:
        if has_abstain and sp.min_utility is not None:
            out.append(Check(
                id=f"selective/utility/{sid}", kind=CheckKind.SELECTIVE, metric="utility", part=sel[0],
                modality=sel[1], task=sel[2], bound=sp.min_utility, source=f"{sp.source}.min_utility",
                variants=("abstain",), params={"deferral_cost": sp.deferral_cost},
                labels=_scope_labels(sel, CheckKind.SELECTIVE), **common))
        for coverage, bound in sorted(sp.accuracy_at_coverage.items()):
            out.append(Check(
                id=f"selective/accuracy@{coverage:g}/{sid}", kind=CheckKind.SELECTIVE, metric="accuracy_at_coverage",
                part=sel[0], modality=sel[1], task=sel[2], bound=bound,
                source=f"{sp.source}.accuracy_at_coverage.{coverage:g}", params={"coverage": coverage},
                labels=_scope_labels(sel, CheckKind.SELECTIVE, "normal"), **common))
        for risk, bound in sorted(sp.coverage_at_risk.items()):
            out.append(Check(
                id=f"selective/coverage@risk{risk:g}/{sid}", kind=CheckKind.SELECTIVE, metric="coverage_at_risk",
                part=sel[0], modality=sel[1], task=sel[2], bound=bound,
                source=f"{sp.source}.coverage_at_risk.{risk:g}", params={"risk": risk},
                labels=_scope_labels(sel, CheckKind.SELECTIVE, "normal"), **common))
    return out
