"""Subgroup checks: accuracy per stratum of a patient or device attribute, and its gap to the rest.

The policy section

    subgroups:
      by: [sex, age_band, manufacturer]   # attributes of the items (cube/attributes.py)
      min_accuracy: 0.6                   # each stratum reaches this accuracy
      max_gap: 0.10                       # no stratum more than this below the rest of the cube
      gap: detect                         # detect (the default) or prove: see below
      min_images: 30                      # a smaller stratum is too small to decide: reported, not required
      # rule, confidence, min_n, max_error_rate, required: as every section

adds two kinds of check per stratum (each value of each attribute the cube has):

- `subgroup`      subgroup/ATTRIBUTE/VALUE: the stratum's accuracy (standard answers,
                  clustered by image, the finite-sample interval with few images, as the
                  overall accuracy) is at least `min_accuracy`;
- `subgroup_gap`  subgroup_gap/ATTRIBUTE/VALUE: accuracy(rest) - accuracy(stratum) is at
                  most `max_gap` (metrics/strata.py: Newcombe's interval from the two
                  clustered intervals; a stratum's images are disjoint from the rest's).

Both are decided in the gate's family like every other check (a pass claim at the
check's level, fail claims Holm-adjusted over the family). The accuracy checks are
required; the gap checks are *harm detectors* under `gap: detect`: reported, not required
to pass, so a decided gap above `max_gap` (Holm over the family) makes the gate NOT
QUALIFIED with the stratum named, while QUALIFIED never waits for a proof that every gap
is below `max_gap`: the interval of a difference carries both accuracies' uncertainty,
and an even model's gap (0) lies only `max_gap` from its bound, so that proof needs many
more images per stratum than the accuracy claim (docs/guarantees.md, "Subgroups").
`gap: prove` makes them required as well. A stratum with fewer
than `min_images` images, the stratum `unknown` (the source does not say), and a stratum
whose images could not show `min_accuracy` even with every answer right, are built and
reported, never merged or dropped, but not required: every output names them, with why.

The kinds register themselves here (gate/kinds.py) when the registry first loads this
module through its entry point (`medrcube.kinds`, pyproject.toml), before any policy is
read or the suite makes its test functions. At
its top this module imports only what imports nothing of the gate back (kinds, policy,
metrics): the builders and collectors import the rest where they run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from medrcube.gate.kinds import BuildContext, KindEntry, entry_of, register
from medrcube.gate.policy import DECISION_KEYS
from medrcube.metrics import strata
from medrcube.metrics.clustered import cluster_counts, clustered_wilson, image_key
from medrcube.records import ATTRIBUTE_NAMES, UNKNOWN, GradedRecord, Outcome

if TYPE_CHECKING:  # imported where used (the module docstring)
    from medrcube.gate.checks import Check
    from medrcube.gate.criteria import Evidence

SECTION = "subgroups"
KEYS = ("by", "min_accuracy", "max_gap", "gap", "min_images", *DECISION_KEYS)
DEFAULT_MIN_IMAGES = 30
GAP_RULES = ("detect", "prove")  # the gap checks: harm detectors (the default), or required to pass


@dataclass(frozen=True, slots=True)
class SubgroupPolicy:
    by: tuple[str, ...]
    min_accuracy: float | None = None
    max_gap: float | None = None
    min_images: int = DEFAULT_MIN_IMAGES
    gap: str = "detect"  # GAP_RULES
    rule: str = "lower_bound"
    confidence: float = 0.95
    min_n: int = 30
    max_error_rate: float = 0.05
    required: bool = True
    source: str = SECTION


def read_policy(c: Any, key: str, value: Any) -> SubgroupPolicy:
    """The section, validated through the gate's Checker (errors name the key and the fix)."""
    d = c.mapping(key, value, KEYS)
    by = d.get("by")
    if isinstance(by, str):
        by = [by]
    if not isinstance(by, list) or not by:
        c.fail(f"{key}.by", "must be a list of attributes", by, f"write e.g. [sex, age_band, manufacturer] "
               f"(from {', '.join(ATTRIBUTE_NAMES)})")
    for name in by:
        if name not in ATTRIBUTE_NAMES:
            c.fail(f"{key}.by", f"unknown attribute {name!r}", name, f"use some of {', '.join(ATTRIBUTE_NAMES)}")
    if len(set(by)) != len(by):
        c.fail(f"{key}.by", "names an attribute twice", by, "list each attribute once")
    min_acc = c.prob(f"{key}.min_accuracy", d["min_accuracy"], "an accuracy") if d.get("min_accuracy") is not None \
        else None
    max_gap = c.prob(f"{key}.max_gap", d["max_gap"], "a gap") if d.get("max_gap") is not None else None
    if min_acc is None and max_gap is None:
        c.fail(key, "sets neither min_accuracy nor max_gap", None, "write `min_accuracy: 0.6`, `max_gap: 0.1` or both",
               show_value=False)
    min_images = c.count(f"{key}.min_images", d["min_images"]) if "min_images" in d else DEFAULT_MIN_IMAGES
    gap_rule = d.get("gap", "detect")
    if gap_rule not in GAP_RULES:
        c.fail(f"{key}.gap", "must be detect or prove", gap_rule, "write `gap: detect` (a gap shown above max_gap "
               "fails the gate; the default) or `gap: prove` (QUALIFIED also needs every gap shown below max_gap)")
    dec = c.decision(key, {x: d[x] for x in DECISION_KEYS if x in d})
    return SubgroupPolicy(tuple(by), min_acc, max_gap, min_images, gap_rule, dec.get("rule", "lower_bound"),
                          dec.get("confidence", 0.95), dec.get("min_n", 30), dec.get("max_error_rate", 0.05),
                          dec.get("required", True), key)


def _labels(attribute: str, value: str, kind: str) -> dict[str, str]:
    return {"part": "All parts", "modality": attribute, "task": value, "level": "subgroup", "severity": "critical",
            "kind": kind}


def not_required_reason(value: str, images: int, sp: SubgroupPolicy) -> str | None:
    """Why a stratum is reported, not required (None: it is required as the policy says)."""
    if value == UNKNOWN:
        return "the stratum of images whose source does not state the attribute"
    if images < sp.min_images:
        return f"stratum too small to decide: {images} images < {sp.source}.min_images={sp.min_images}"
    return None


def unpassable_reason(images: int, sp: SubgroupPolicy) -> str | None:
    """Why a stratum's accuracy check cannot pass on its images whatever the answers (None: it can).
    A model right on every item is credited with one independent answer per image: the most a
    stratum's items can show (more items of one image, all right, show no more), so a check
    called unpassable here is unpassable in the run."""
    if sp.min_accuracy is None or images <= 0:
        return None
    best = clustered_wilson([(1, 1)] * images, sp.confidence).lo
    if best > sp.min_accuracy:
        return None
    return (f"stratum too small to show {sp.source}.min_accuracy={sp.min_accuracy:g}: {images} images, a model right "
            f"on every item would reach a lower bound of {best:.3f} at most")


def detector_reason(sp: SubgroupPolicy) -> str:
    """Why a gap check is reported, not required, under `gap: detect`."""
    return (f"harm detector ({sp.source}.gap: detect): it fails the gate when the stratum's gap to the rest is shown "
            f"above {sp.source}.max_gap={sp.max_gap:g}, and is never required to pass")


def build(ctx: BuildContext) -> list[Check]:
    """One accuracy check and one gap check per stratum of each attribute of `by`."""
    from medrcube.gate.checks import Check

    sp = ctx.section(SECTION)
    found = getattr(ctx, "strata", None)
    if sp is None or not found:
        return []
    out: list[Check] = []
    for attribute in sp.by:
        values = found.get(attribute) or {}
        if len(values) < 2 and sp.min_accuracy is None:
            continue
        for value, images in sorted(values.items(), key=lambda kv: (kv[0] == UNKNOWN, kv[0])):
            why = not_required_reason(value, images, sp)
            params: dict[str, Any] = {"attribute": attribute, "value": value, "images": images}
            if why:
                params["not_required"] = why
            common = dict(part=None, modality=None, task=None, rule=sp.rule, confidence=sp.confidence,
                          min_n=sp.min_n, max_error_rate=sp.max_error_rate, required=sp.required and not why)
            if sp.min_accuracy is not None:  # required where it can pass at all (unpassable_reason)
                cant = None if why else unpassable_reason(images, sp)
                ap = {**params, "not_required": cant} if cant else dict(params)
                out.append(Check(id=f"subgroup/{attribute}/{value}", kind=SUBGROUP, metric="accuracy",
                                 bound=sp.min_accuracy, source=f"{sp.source}.min_accuracy", params=ap,
                                 labels=_labels(attribute, value, SUBGROUP),
                                 **{**common, "required": common["required"] and not cant}))
            if sp.max_gap is not None and len(values) >= 2:
                gp = {**params, "gap_rule": sp.gap}
                if sp.gap == "detect":  # params["detector"]: the gate's guarantee names these apart (gate/evaluate.py)
                    gp.update(not_required=why or detector_reason(sp), detector=True)
                out.append(Check(id=f"subgroup_gap/{attribute}/{value}", kind=SUBGROUP_GAP, metric="gap_to_rest",
                                 bound=sp.max_gap, source=f"{sp.source}.max_gap", params=gp,
                                 labels=_labels(attribute, value, SUBGROUP_GAP),
                                 **{**common, "required": common["required"] and sp.gap == "prove"}))
    return out


def _split(check: Check, records: list[GradedRecord]) -> tuple[list[GradedRecord], list[GradedRecord]]:
    """(the stratum's standard records, the rest's), over records that carry attributes."""
    attribute, value = check.params["attribute"], check.params["value"]
    if attribute not in ATTRIBUTE_NAMES:
        raise ValueError(f"unknown subgroup attribute {attribute!r}")
    mine: list[GradedRecord] = []
    rest: list[GradedRecord] = []
    for r in records:
        if r.variant == "standard" and r.attributes is not None:
            (mine if getattr(r.attributes, attribute) == value else rest).append(r)
    return mine, rest


def evidence(check: Check, records: list[GradedRecord]) -> Evidence:
    """The stratum's accuracy, as a site check's share of right answers is measured."""
    from medrcube.gate.evidence import collect_site

    mine, _ = _split(check, records)
    ev = collect_site(check, mine, lambda r: r.correct)
    attribute, value = check.params["attribute"], check.params["value"]
    details = {**ev.details, "attribute": attribute, "value": value, "images": len({image_key(r) for r in mine})}
    facts = f"{attribute} = {value}: " + (ev.facts or "no record of this stratum")
    return replace(ev, units="graded items", facts=facts, details=details)


def gap_evidence(check: Check, records: list[GradedRecord]) -> Evidence:
    """accuracy(rest) - accuracy(stratum), with Newcombe's interval (metrics/strata.py)."""
    from medrcube.gate.criteria import MAX_WORST, Criterion, Evidence, api_errors, ci_text
    from medrcube.gate.verdict import WorstItem

    mine, rest = _split(check, records)
    rate, err = api_errors(check, [r for r in mine if r.outcome is not Outcome.UNAVAILABLE])
    if err:
        return err
    g_mine, g_rest = [r for r in mine if r.graded], [r for r in rest if r.graded]
    c_mine = cluster_counts((image_key(r), r.correct) for r in g_mine)
    c_rest = cluster_counts((image_key(r), r.correct) for r in g_rest)
    attribute, value = check.params["attribute"], check.params["value"]
    bound = check.bound if check.bound is not None else 0.0
    g = strata.gap(c_rest, c_mine, check.confidence)
    details: dict[str, Any] = {
        "attribute": attribute, "value": value, "images": len(c_mine), "rest_images": len(c_rest),
        "stratum_accuracy": g.stratum.estimate, "stratum_interval": [g.stratum.lo, g.stratum.hi],
        "rest_accuracy": g.rest.estimate, "rest_interval": [g.rest.lo, g.rest.hi], "n_rest": len(g_rest),
        "rule": check.rule, "source": check.source, "gap_rule": check.params.get("gap_rule", "prove"),
    }
    if g.estimate is None:
        why = "no graded record in this stratum" if not g_mine else "no graded record outside this stratum"
        return Evidence(check, len(g_mine), "graded items", (), None, None, bound, None, rate, why, (), details,
                        strata.METHOD, note=why)
    p_pass = strata.p_gap_at_least(c_rest, c_mine, bound)
    p_fail = strata.p_gap_at_most(c_rest, c_mine, bound)
    n = len(g_mine)
    crit = Criterion("gap to the rest", g.estimate, bound, False, g.lo, g.hi, p_pass, p_fail,
                     g.se * (n ** 0.5) if n else 0.5)
    facts = (f"{attribute} = {value}: accuracy {g.stratum.estimate:.3f} on {n} items ({len(c_mine)} images) against "
             f"{g.rest.estimate:.3f} on the rest ({len(g_rest)} items, {len(c_rest)} images); gap "
             f"{g.estimate:.3f}{ci_text(check.confidence, (g.lo, g.hi))}")
    worst = tuple(WorstItem.of(r) for r in [r for r in g_mine if not r.correct][:MAX_WORST])
    return Evidence(check, n, "graded items", (crit,), g.estimate, (g.lo, g.hi), bound, None, rate, facts, worst,
                    details, strata.METHOD)


def _register(entry: KindEntry) -> str:
    """Register once per process: a test runner that drops and re-imports this module
    (pytester's in-process runs) finds its kinds registered already."""
    return (entry_of(entry.name) or register(entry)).name


SUBGROUP = _register(KindEntry(
    "subgroup", "accuracy per subgroup", "test_subgroup",
    "Accuracy within one stratum of a patient or device attribute (sex, age band, manufacturer...) reaches its bound.",
    off="subgroup checks need `subgroups: {by: [sex, age_band, manufacturer], min_accuracy: BOUND}` in the policy and "
    "a cube whose items carry attributes (docs/clinical.md)",
    epic="Subgroups", summary_line=True, observed="accuracy", prefix="subgroup/", section=SECTION,
    read_policy=read_policy, build=build, evidence=evidence, per_stratum=True, dossier="subgroup"))
SUBGROUP_GAP = _register(KindEntry(
    "subgroup_gap", "gap of a subgroup to the rest", "test_subgroup_gap",
    "No stratum of a patient or device attribute falls more than max_gap below the rest of the cube.",
    off="subgroup gap checks need `subgroups: {by: [...], max_gap: GAP}` in the policy and a cube whose items carry "
    "attributes with two values or more (docs/clinical.md)",
    epic="Subgroups", summary_line=True, observed="gap", prefix="subgroup_gap/", section=SECTION,
    read_policy=read_policy, build=None, evidence=gap_evidence, dossier="subgroup_gap"))
