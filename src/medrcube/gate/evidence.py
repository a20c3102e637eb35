"""What each kind of check measures, as criteria the family decision can weigh.

A check's evidence is one or more criteria (accuracy against its bound; circular
accuracy and the gap; grounding; a drop against a margin), each with its estimate,
its interval and two one-sided p-values from the same statistic:
    p_pass   of "the bound is not met" (small: the bound is decisively met)
    p_fail   of "the bound is met"     (small: the bound is decisively missed)
gate/family.py turns them into verdicts for the whole family of checks at once.

API errors above the check's max_error_rate make an error verdict here already: a
failing endpoint says nothing about the model.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import replace

import medrcube.gate.evidence_clinical  # noqa: F401  (its kinds register their evidence)
from medrcube.gate.checks import Check, CheckKind
from medrcube.gate.criteria import (
    MAX_WORST,
    Criterion,
    Evidence,
    few_images_method,
    finite_criterion_of_images,
    summed_units,
    with_finite,
    with_finite_images,
)
from medrcube.gate.criteria import api_errors as _errors
from medrcube.gate.criteria import ci_text as _ci
from medrcube.gate.criteria import diff_criterion as _diff_criterion
from medrcube.gate.criteria import fmt as _f
from medrcube.gate.criteria import prop_criterion as _prop_criterion
from medrcube.gate.kinds import collects, entry_of
from medrcube.gate.standard_counts import StandardCounts
from medrcube.gate.verdict import WorstItem
from medrcube.metrics.accuracy import accuracy_of_counts, chance_level, chance_level_of_counts
from medrcube.metrics.clustered import METHOD as PROPORTION_METHOD
from medrcube.metrics.clustered import (
    cluster_counts,
    clustered_wilson,
    image_key,
    t_quantile,
)
from medrcube.metrics.comparison import paired_records, regression
from medrcube.metrics.credibility import chain_pairs, credibility_of_pairs, grounding, luck_rate, luck_shares
from medrcube.metrics.dependence import CAP, Dependence, dependence
from medrcube.metrics.paired import clustered_mean_difference
from medrcube.metrics.robustness import rotated_items
from medrcube.metrics.worst import worst_of_cells
from medrcube.records import GradedRecord, Outcome

STANDARD = ("standard",)  # the variants read by a kind that reads the standard answers only


class ByScope:
    """The run's records by (part, modality, task, variant), so that the family's checks do not
    each test every record: a check takes the groups its scope covers (`Check.selects` asked
    of one record per group), of the variants its kind reads (KindEntry.reads), in the run's
    order."""

    def __init__(self, records: Iterable[GradedRecord]) -> None:
        self.records = list(records)
        # Grouped by variant too: the checks that read one or two variants (the accuracy checks'
        # counts, credibility, calibration: the standard answers) pass over their records only,
        # not over the other variants' (four records in five with blind and three rotations).
        self._groups: dict[tuple[str, str, str, str], list[int]] = {}
        groups = self._groups
        for i, r in enumerate(self.records):
            key = (r.part, r.modality, r.task, r.variant)
            group = groups.get(key)
            if group is None:
                group = groups[key] = []
            group.append(i)
        self._selected: dict[tuple[str | None, str | None, str | None, tuple[str, ...] | None],
                             list[GradedRecord]] = {}
        self._counts: dict[tuple[str, str, str], StandardCounts] | None = None

    def groups(self) -> list[tuple[GradedRecord, int]]:
        """Each (part, modality, task, variant) group's first record and its number of records."""
        return [(self.records[at[0]], len(at)) for at in self._groups.values()]

    def standard_counts(self, check: Check) -> StandardCounts:
        """The standard records' counts of the check's scope: the sum of its cells' counts,
        each cell counted once for the family."""
        if self._counts is None:
            self._counts = {key[:3]: StandardCounts.of(self.records[i] for i in at)
                            for key, at in self._groups.items() if key[3] == "standard"}
        return StandardCounts.merged(counts for cell, counts in self._counts.items()
                                     if check.selects(self.records[self._groups[(*cell, "standard")][0]]))

    def select(self, check: Check, variants: tuple[str, ...] | None = None) -> list[GradedRecord]:
        """The records of the check's scope, of `variants` only (None: every variant), in the run's order."""
        scope = (check.part, check.modality, check.task, variants)
        hit = self._selected.get(scope)
        if hit is None:
            wanted = [at for key, at in self._groups.items()
                      if (variants is None or key[3] in variants) and check.selects(self.records[at[0]])]
            order = wanted[0] if len(wanted) == 1 else sorted(i for at in wanted for i in at)
            hit = self._selected[scope] = [self.records[i] for i in order]
        return list(hit)


def collect(
    check: Check,
    records: Iterable[GradedRecord] | ByScope,
    baseline: Iterable[GradedRecord] | None = None,
    *,
    baseline_error: str | None = None,
) -> Evidence:
    """The evidence of `check` on the run's records (all variants; the check selects its
    own), given as they are or grouped by scope (`ByScope`, for a family of checks)."""
    entry = entry_of(check.kind)  # each kind collects its own (gate/kinds.py; the built-in ones below)
    if entry is None or entry.evidence is None:
        raise ValueError(f"unknown check kind {check.kind!r}")
    if isinstance(records, ByScope) and entry.evidence is _accuracy:
        # The family's accuracy checks: each cell's standard records counted once, a scope's
        # counts summed from its cells' (the same evidence as from the scope's records).
        counted = records.standard_counts(check)
        return _accuracy_of_counts(check, counted, records.select(check, STANDARD) if counted.unanswered else ())
    selected = records.select(check, entry.reads) if isinstance(records, ByScope) else \
        [r for r in records if check.selects(r)]
    try:
        found = entry.evidence(check, selected, baseline, baseline_error) if entry.needs_baseline else entry.evidence(check, selected)
    except ValueError as exc:  # inconsistent records (e.g. duplicates): say so, decide nothing
        return Evidence(check, 0, "items", error=f"cannot evaluate: {exc}")
    if not isinstance(found, Evidence):  # a site's kind: its collector must return the gate's Evidence
        raise TypeError(f"check {check.id!r}: the evidence collector of kind {check.kind!r} returned "
                        f"{type(found).__name__}; expected a medrcube.gate.criteria.Evidence")
    return found


# --------------------------------------------------------------------------- accuracy


def effective_bound(check: Check, chance: float | None) -> tuple[float, str]:
    """The bound after `above_chance`, and a note when it was raised."""
    bound = check.bound if check.bound is not None else 0.0
    if check.above_chance <= 0.0 or chance is None:
        return bound, ""
    floor = min(1.0, chance + check.above_chance)
    if floor <= bound:
        return bound, ""
    return floor, (
        f"bound raised from {bound:.3f} to chance level {chance:.3f} + above_chance {check.above_chance:.2f}:"
        " these questions have few options"
    )


@collects(CheckKind.OVERALL)
@collects(CheckKind.SLICE)
@collects(CheckKind.CELL)
def _accuracy(check: Check, records: list[GradedRecord]) -> Evidence:
    # One pass over the standard records counts everything the check decides on: the same
    # numbers as accuracy(), clustered_accuracy(), chance_level() and worst_records() of those
    # records, read from one count (gate/standard_counts.py). Grouped by scope, the counts are
    # summed from each cell's (ByScope.standard_counts).
    return _accuracy_of_counts(check, StandardCounts.of(records), records)


def _accuracy_of_counts(check: Check, counted: StandardCounts, records: Iterable[GradedRecord]) -> Evidence:
    """An accuracy check's evidence from its standard records' counts; `records` (the scope's)
    are read only to describe API errors, when there are some."""
    rate = 0.0
    if counted.unanswered:
        rate, err = _errors(check, [r for r in records if r.variant == "standard"])
        if err:
            return err
    counts, per_image = counted.outcomes, counted.images
    a = accuracy_of_counts(counts, check.confidence)
    clusters = [(k, m) for _, (k, m) in sorted(per_image.items())]  # by image key, as cluster_counts
    ci = clustered_wilson(clusters, check.confidence)
    chance = chance_level_of_counts(counted.options)
    bound, raised = effective_bound(check, chance)
    details = {
        "correct": a.correct, "unparsed": a.unparsed, "refused": a.refused, "errors": a.errors,
        "unavailable": a.unavailable, "clustered": ci.to_dict(), "clusters": ci.clusters, "icc": ci.icc,
        "design_effect": ci.deff, "n_eff": ci.n_eff, "rule": check.rule, "confidence": check.confidence,
        "source": check.source, "wilson_unclustered": [a.lo, a.hi], "policy_bound": check.bound,
        "above_chance": check.above_chance,
    }
    clustered = (
        f" (clustered by image: {ci.clusters} images, design effect {ci.deff:.2f}"
        + ("" if ci.icc_estimated else ", ICC not estimable: counted by image")
        + ")" if ci.deff > 1.0 + 1e-9 else ""
    )
    if a.acc is None:
        facts = "nothing graded" + (f" ({a.unavailable} unavailable: restricted images)" if a.unavailable else "")
        return Evidence(check, 0, "graded items", (), None, None, bound, chance, rate, facts, (), details,
                        PROPORTION_METHOD, note="no graded item: nothing to decide on")
    facts = (
        f"accuracy {a.acc:.3f} = {a.correct}/{a.n}{_ci(check.confidence, (ci.lo, ci.hi))}{clustered}; chance "
        f"level {_f(chance)}; not correct: {a.n - a.correct - a.unparsed - a.refused} wrong, {a.unparsed} unparsed, "
        f"{a.refused} refused; {a.errors} errors and {a.unavailable} unavailable excluded"
    )
    cells = {cell: (t.right, t.graded, t.missed) for cell, t in counted.cells.items()}
    worst = tuple(WorstItem.of(r) for r in worst_of_cells(cells, MAX_WORST))
    ev = Evidence(check, a.n, "graded items", (_prop_criterion("accuracy", ci, bound),), a.acc, (ci.lo, ci.hi),
                  bound, chance, rate, facts, worst, details, PROPORTION_METHOD, note=raised)
    return with_finite_images(ev, clusters)


# --------------------------------------------------------------------------- a site's own check


def collect_site(check: Check, records: Iterable[GradedRecord], hit: Callable[[GradedRecord], bool]) -> Evidence:
    """The evidence of a site check (plugin/site.py): the share of graded records that
    `hit` counts, with the same interval, clustered by image, as a built-in accuracy
    check (and the finite-sample one with few images)."""
    asked = [r for r in records if r.outcome is not Outcome.UNAVAILABLE]
    rate, err = _errors(check, asked)
    if err:
        return err
    graded = [r for r in asked if r.outcome not in (Outcome.ERROR, Outcome.TRUNCATED)]
    units = [(image_key(r), bool(hit(r))) for r in graded]
    ci = clustered_wilson(cluster_counts(units), check.confidence)
    bound = check.bound if check.bound is not None else 0.0
    hits = sum(ok for _, ok in units)
    details = {"hits": hits, "errors": len(asked) - len(graded), "clustered": ci.to_dict(), "clusters": ci.clusters,
               "design_effect": ci.deff, "rule": check.rule, "source": check.source}
    misses = [r for r in graded if not hit(r)][:MAX_WORST]
    worst = tuple(WorstItem.of(r) for r in misses)
    if not graded:
        return Evidence(check, 0, "records", (), None, None, bound, None, rate, "nothing graded", (), details,
                        PROPORTION_METHOD, note="no graded record: nothing to decide on")
    facts = (f"{check.metric} {hits}/{len(graded)} = {hits / len(graded):.3f}{_ci(check.confidence, (ci.lo, ci.hi))}"
             f" (clustered by image: {ci.clusters} images, design effect {ci.deff:.2f})")
    ev = Evidence(check, len(graded), "records", (_prop_criterion(check.metric, ci, bound),), ci.estimate,
                  (ci.lo, ci.hi), bound, None, rate, facts, worst, details, PROPORTION_METHOD)
    return with_finite(ev, ((k, float(ok)) for k, ok in units))


# --------------------------------------------------------------------------- credibility


@collects(CheckKind.CREDIBILITY, reads=STANDARD)
def _credibility(check: Check, records: list[GradedRecord]) -> Evidence:
    std = [r for r in records if r.variant == "standard"]
    rate, err = _errors(check, std)
    if err:
        return err
    excluded = check.params.get("exclude_low_tasks", ("View Recognition",))
    pairs, dropped = chain_pairs(std, exclude_low_tasks=excluded)
    cred = credibility_of_pairs(pairs, dropped)
    g = grounding(pairs, check.confidence)
    max_luck = check.params.get("max_luck_rate", check.bound if check.metric == "luck_rate" else None)
    min_odds = check.params.get("min_odds_ratio", check.bound if check.metric == "dependence" else None)
    min_grounding = check.params.get("min_grounding", check.bound if check.metric == "grounding" else None)
    # Two routes to a pass (dependence shown, or too few right diagnoses over a wrong
    # perception to matter), sharing the one-sided level (Bonferroni with weights: the odds
    # ratio's route `odds_ratio_share` of it, the luck rate's the rest), so each route's
    # interval is at its own share; one route alone keeps the check's level. A fail needs
    # a shortcut shown: the odds ratio below `shortcut_odds_ratio` and the luck rate above
    # `shortcut_luck_rate` (the pass bounds when not set), each at the full level.
    both = max_luck is not None and min_odds is not None
    share = float(check.params.get("odds_ratio_share") or 0.5) if both else 1.0
    alpha2 = 1.0 - check.confidence  # two-sided
    or_conf, luck_conf = 1.0 - alpha2 * share, 1.0 - alpha2 * (1.0 - share if both else 1.0)
    fail_odds = check.params.get("shortcut_odds_ratio") or min_odds
    fail_luck = check.params.get("shortcut_luck_rate")
    fail_luck = max_luck if fail_luck is None else float(fail_luck)
    # The luck rate (one unit per right diagnosis), and the paper's shortcut probability
    # with its clustered interval (reported, not gated).
    luck_units = luck_shares(pairs)
    luck_md = luck_rate(luck_units, luck_conf)
    dep = dependence(((p.image, p.low_right, p.high_right) for p in pairs), or_conf)
    sc_ci = clustered_wilson(cluster_counts((p.image, p.high_right) for p in pairs if not p.low_right),
                             check.confidence)
    crits: list[Criterion] = []
    notes: list[str] = []
    routes: list[Criterion] = []
    luck_why = None
    if max_luck is not None:
        if luck_md.estimate is not None:
            est = luck_md.estimate
            sd = math.sqrt(max(est * (1.0 - est), 1e-4) * luck_md.deff)
            luck_c = Criterion("luck rate", est, max_luck, False, luck_md.lo, luck_md.hi, luck_md.p_at_least(max_luck),
                               luck_md.p_at_most(max_luck), sd, luck_conf)
            sums, sizes, binary = summed_units(luck_units)  # read by both bounds' criteria
            luck_c, luck_why = finite_criterion_of_images(luck_c, sums, sizes, luck_conf, binary=binary)
            if fail_luck is not None and fail_luck != max_luck:  # the fail claim's p at the shortcut bound
                at_fail = replace(luck_c, bound=fail_luck, p_pass=luck_md.p_at_least(fail_luck),
                                  p_fail=luck_md.p_at_most(fail_luck))
                luck_c = replace(luck_c, p_fail=finite_criterion_of_images(
                    at_fail, sums, sizes, luck_conf, binary=binary, interval=False)[0].p_fail)
            routes.append(luck_c)
        elif min_odds is None:
            notes.append("the luck rate needs pairs whose diagnosis is right")
    if min_odds is not None:
        dep_c = _odds_criterion(dep, min_odds, or_conf, fail_odds)
        if dep_c is not None:
            routes.insert(0, dep_c)
        elif max_luck is None:
            notes.append("the odds ratio needs pairs with the perception right and wrong, and diagnoses right and "
                         "wrong")
    if len(routes) == 2:
        crits.append(_either(routes[0], routes[1], share))
    elif routes and (not both or routes[0].name == "luck rate"):
        # One route measurable: alone it decides a pass (at its share of the level); with
        # the other route unmeasurable a fail claim needs both, so it cannot fail here.
        only = routes[0]
        own = (share if only.name == "odds ratio" else 1.0 - share) if both else 1.0
        crits.append(replace(only, p_pass=min(1.0, only.p_pass / own), p_fail=1.0 if both else only.p_fail))
    elif both:
        notes.append("neither the odds ratio nor the luck rate can be measured on these pairs")
    if min_grounding is not None:
        if g.difference is not None:
            sd = g.se * math.sqrt(g.pairs) if math.isfinite(g.se) else 1.0
            crits.append(Criterion("grounding", g.difference, min_grounding, True, g.lo, g.hi,
                                   g.p_at_most(min_grounding), g.p_at_least(min_grounding), sd))
        else:
            notes.append("grounding needs pairs with the perception right and pairs with it wrong")
    if notes:  # a criterion that cannot be measured leaves the whole check undecided
        crits = []
    primary = crits[0] if crits else None
    details = {**cred.to_dict(), "grounding": g.to_dict(), "dependence": dep.to_dict(),
               "expected_D_independent": g.expected_D,
               "luck_rate_interval": [luck_md.lo, luck_md.hi], "luck_rate_confidence": luck_conf,
               "odds_ratio_confidence": or_conf, "shortcut_odds_ratio": fail_odds, "shortcut_luck_rate": fail_luck,
               "rationality_interval": [1.0 - luck_md.hi, 1.0 - luck_md.lo], "shortcut_interval": [sc_ci.lo, sc_ci.hi],
               "max_luck_rate": max_luck, "min_odds_ratio": min_odds, "min_grounding": min_grounding,
               "decided_on": primary.name if primary else None,
               "exclude_low_tasks": list(excluded), "rule": check.rule, "source": check.source}
    if luck_why is not None:
        luck_c = next(c for c in routes if c.name == "luck rate")
        details.update(luck_rate_interval=[luck_c.lo, luck_c.hi], interval_method=few_images_method(luck_why),
                       rationality_interval=[1.0 - luck_c.hi, 1.0 - luck_c.lo],
                       cluster_robust_interval=[luck_md.lo, luck_md.hi])
    luck_lo, luck_hi = details["luck_rate_interval"]
    groups = f"A={cred.A} B={cred.B} C={cred.C} D={cred.D} on {cred.images} images"
    if g.expected_D is not None:
        groups += f" (D expected under independence: {g.expected_D:.1f})"
    if dropped:
        groups += f", {dropped} pairs dropped (an error or unavailable item on one side)"
    rc, lc = f"{or_conf * 100:g}% CI", f"{luck_conf * 100:g}% CI"
    facts = (
        f"odds ratio of a right diagnosis on a right perception = {_f(dep.odds_ratio)}"
        f"{f' ({rc} [{dep.lo:.3f}, {dep.hi:.3f}])' if dep.defined else ''}; "
        f"luck rate P(not L|H) per right diagnosis = {_f(luck_md.estimate)}"
        f"{f' ({lc} [{luck_lo:.3f}, {luck_hi:.3f}])' if luck_md.estimate is not None else ''}"
        f" over {len(luck_units)} right diagnoses{f' ({luck_why})' if luck_why else ''}; "
        f"grounding P(H|L) - P(H|not L) = {_f(g.p_h_given_l)} - {_f(g.p_h_given_not_l)} = {_f(g.difference)}"
        f"{_ci(check.confidence, (g.lo, g.hi))}; paper's numbers: rationality "
        f"{_f(cred.rationality)}, luck rate {_f(cred.luck_rate)}, shortcut probability {_f(cred.shortcut_prob)} "
        f"(not a bound: it equals diagnostic accuracy when the two are independent); {groups}"
    )
    seen: set[str] = set()
    worst: list[WorstItem] = []
    for p in sorted((p for p in pairs if p.group == "D"), key=lambda p: (p.image, p.low.item_id)):
        if p.image in seen or len(worst) >= MAX_WORST:
            continue
        seen.add(p.image)
        worst.append(WorstItem.of(p.low, note=f"yet {p.high.task} item {p.high.item_id} on the same image was right"))
    methods = []
    if min_odds is not None:
        methods.append(f"odds ratio: {dep.method}")
    if max_luck is not None:
        methods.append(f"luck rate: {few_images_method(luck_why) if luck_why else luck_md.method}")
    if both:
        methods.append(f"passes when either route passes (the odds ratio at {share:g} of the one-sided level, the "
                       f"luck rate at {1 - share:g}: Bonferroni), fails when a shortcut is shown: odds ratio below "
                       f"{fail_odds:g} and luck rate above {fail_luck:g}, each at the full level (intersection-union)")
    if min_grounding is not None:
        methods.append(f"grounding: {g.method}")
    return Evidence(check, cred.pairs, "pairs", tuple(crits), primary.estimate if primary else None,
                    (primary.lo, primary.hi) if primary else None, primary.bound if primary else None, None, rate,
                    facts, tuple(worst), details, "; ".join(methods), note="; ".join(notes))


def _odds_criterion(dep: Dependence, bound: float, confidence: float,
                    fail_bound: float | None = None) -> Criterion | None:
    """The dependence route: the odds ratio must reach `bound` (None: not measurable); its
    p of "met" is taken at `fail_bound` (the shortcut bound) when given. Right diagnoses
    with the perception never right (no pair with L right, some with H right over L
    wrong) rest on no right perception at all: the route is missed."""
    if dep.A + dep.B == 0 and dep.D > 0:
        return Criterion("odds ratio", None, bound, True, 0.0, CAP, 1.0, 0.0, 1.0, confidence)
    if not dep.defined or dep.odds_ratio is None:
        return None
    # sd of one pair on the odds-ratio scale (for planning only): the delta method on the
    # log scale, from the interval's width.
    q = t_quantile(0.5 + confidence / 2.0, max(1.0, dep.images - 1.0))
    se_log = (math.log(dep.hi) - math.log(dep.lo)) / (2.0 * q) if dep.lo > 0 and math.isfinite(q) else 1.0
    sd = dep.odds_ratio * se_log * math.sqrt(max(1, dep.pairs))
    return Criterion("odds ratio", dep.odds_ratio, bound, True, dep.lo, dep.hi, dep.p_at_most(bound),
                     dep.p_at_least(fail_bound if fail_bound is not None else bound), sd, confidence)


def _either(first: Criterion, second: Criterion, share: float = 0.5) -> Criterion:
    """One criterion met when either route is (the first at `share` of the level, the
    second at the rest: each p-value divided by its share) and missed when both are (the
    larger p-value); it shows the route closer to a pass, with that route's own estimate,
    interval and bound."""
    p1, p2 = min(1.0, first.p_pass / share), min(1.0, second.p_pass / (1.0 - share))
    shown = first if p1 <= p2 else second
    return replace(shown, p_pass=min(p1, p2), p_fail=max(first.p_fail, second.p_fail))


# --------------------------------------------------------------------------- image dependence


@collects(CheckKind.IMAGE_DEPENDENCE, reads=("standard", "blind"))
def _image_dependence(check: Check, records: list[GradedRecord]) -> Evidence:
    asked = [r for r in records if r.variant in ("standard", "blind")]
    rate, err = _errors(check, asked)
    if err:
        return err
    standard = [r for r in asked if r.variant == "standard"]
    blind = [r for r in asked if r.variant == "blind"]
    pairs, counts = paired_records(standard, blind)
    correct = Outcome.CORRECT
    units = [(image_key(s), float(s.outcome is correct) - float(b.outcome is correct)) for s, b in pairs]  # both intervals
    md = clustered_mean_difference(units, check.confidence)
    chance = chance_level(blind)
    bound = check.bound if check.bound is not None else 0.0
    details = {"counts": counts.to_dict(), "standard_acc": counts.first_acc, "blind_acc": counts.second_acc,
               "drop": md.estimate, "clustered": md.to_dict(), "rule": check.rule, "source": check.source}
    facts = (
        f"standard {_f(counts.first_acc)}, blind {_f(counts.second_acc)} on {counts.n} shared items: drop "
        f"{_f(md.estimate)}{_ci(check.confidence, (md.lo, md.hi))}; blind chance level {_f(chance)}"
    )
    # The first MAX_WORST in item order, made only for those (every pair right without the image would be thousands).
    first = heapq.nsmallest(MAX_WORST, (sb for sb in pairs if sb[1].correct), key=lambda sb: sb[0].item_id)
    worst = tuple(WorstItem.of(b, note="answered right without the image") for _, b in first)
    crits = () if md.estimate is None else (_diff_criterion("standard - blind accuracy", md, bound, True),)
    ev = Evidence(check, md.n, "items graded in both variants", crits, md.estimate, (md.lo, md.hi), bound, chance,
                  rate, facts, worst, details, md.method, note="" if crits else "no item graded in both variants")
    return with_finite(ev, units, paired=True)


# --------------------------------------------------------------------------- position robustness


@collects(CheckKind.POSITION, reads=("standard", "shuffled"))
def _position(check: Check, records: list[GradedRecord]) -> Evidence:
    asked = [r for r in records if r.variant in ("standard", "shuffled")]
    rate, err = _errors(check, asked)
    if err:
        return err
    items, incomplete, expected = rotated_items(asked, check.params.get("rotations"))
    # Each item's image, standard answer and circular answer read once (the units below read all three).
    keyed = [(image_key(it.standard), it.standard.correct, it.circular) for it in items]
    circ_units = [(key, circular) for key, _, circular in keyed]
    gap_units = [(key, float(right) - float(circular)) for key, right, circular in keyed]
    worst: list[WorstItem] = []
    for it, (_, right, circular) in zip(items, keyed, strict=True):
        if right and not circular:
            bad = min((r for r in it.rotations if not r.correct), key=lambda r: r.rotation)
            worst.append(WorstItem.of(bad, note=f"right in the original order, wrong with options rotated by "
                                                f"{bad.rotation}"))
            if len(worst) == MAX_WORST:
                break
    ci = clustered_wilson(cluster_counts(circ_units), check.confidence)
    gap = clustered_mean_difference(gap_units, check.confidence)
    chance = chance_level((r for r in asked if r.variant == "standard"), power=expected + 1)
    max_gap = check.params.get("max_gap")
    crits: list[Criterion] = []
    if ci.n and check.bound is not None:
        crits.append(_prop_criterion("circular accuracy", ci, check.bound))
    if gap.n and max_gap is not None:
        crits.append(_diff_criterion("gap to standard accuracy", gap, max_gap, False))
    std_acc = sum(right for _, right, _ in keyed) / len(items) if items else None
    details = {"n": ci.n, "circular_acc": ci.estimate, "standard_acc": std_acc, "gap": gap.estimate,
               "circular_interval": ci.to_dict(), "gap_clustered": gap.to_dict(), "incomplete": incomplete,
               "rotations": expected, "max_gap": max_gap, "rule": check.rule, "source": check.source}
    facts = (
        f"standard {_f(std_acc)}, circular {_f(ci.estimate)}{_ci(check.confidence, (ci.lo, ci.hi))}, gap "
        f"{_f(gap.estimate)}{_ci(check.confidence, (gap.lo, gap.hi))} over {expected} rotations on {ci.n} items; "
        f"{incomplete} incomplete items left out; chance level {_f(chance)}"
    )
    interval = (ci.lo, ci.hi) if ci.n else None
    return Evidence(check, ci.n, "items with every rotation graded", tuple(crits), ci.estimate, interval,
                    check.bound, chance, rate, facts, tuple(worst), details,
                    f"{PROPORTION_METHOD}; gap: {gap.method}", note="" if crits else "no complete item")


# --------------------------------------------------------------------------- regression


@collects(CheckKind.REGRESSION)
def _regression(
    check: Check, records: list[GradedRecord], baseline: Iterable[GradedRecord] | None, missing: str | None = None
) -> Evidence:
    if baseline is None:
        return Evidence(check, 0, "items", error=missing or "a regression check needs the baseline's records: pass "
                        "--baseline (a previous run directory or a model spec)")
    cand = [r for r in records if r.variant == "standard"]
    base = [r for r in baseline if r.variant == "standard" and check.selects(r)]
    rate, err = _errors(check, cand)
    if err:
        return err
    reg = regression(cand, base, check.confidence)
    c = reg.counts
    md = reg.clustered
    assert md is not None
    margin = float(check.params.get("margin", check.bound or 0.0))
    details = {**reg.to_dict(), "margin": margin, "source": check.source,
               "baseline_errors": sum(r.outcome is Outcome.ERROR for r in base)}
    facts = (
        f"candidate {_f(c.first_acc)} vs baseline {_f(c.second_acc)} on {c.n} shared items: drop "
        f"{_f(md.estimate)}{_ci(check.confidence, (md.lo, md.hi))} (clustered by image, {md.clusters} images); "
        f"lost {c.c} items the baseline got right, gained {c.b}; {c.dropped} dropped, {c.first_only} only in this "
        f"run, {c.second_only} only in the baseline; exact McNemar one-sided p={reg.p_worse:.4g} (reference only)"
    )
    base_by_id = {r.item_id: r for r in base}
    lost = [r for r in cand if r.graded and not r.correct and base_by_id.get(r.item_id) is not None
            and base_by_id[r.item_id].correct]
    worst = tuple(WorstItem.of(r, note="the baseline answered it right")
                  for r in sorted(lost, key=lambda r: r.item_id)[:MAX_WORST])
    crits = () if md.estimate is None else (_diff_criterion("drop against the baseline", md, margin, False),)
    ev = Evidence(check, md.n, "items graded by both models", crits, md.estimate, (md.lo, md.hi), margin, None,
                  rate, facts, worst, details, md.method, note="" if crits else "no item graded by both models")
    pairs, _ = paired_records(cand, base)
    return with_finite(ev, ((image_key(c), float(b.correct) - float(c.correct)) for c, b in pairs), paired=True)
