"""Evaluate a check on graded records: pass, fail, skip (insufficient evidence) or error.

Order of decisions, the same for every kind:
1. API errors above the check's max_error_rate: error ("the evidence is incomplete;
   not graded"). Never a pass, never a fail: a failing endpoint says nothing about
   the model's accuracy.
2. Fewer than min_n units (graded items, pairs, shared items): skip, saying how many
   items the check would need (metrics.power).
3. The rule: `point` compares the estimate with the bound; `lower_bound` compares the
   lower end of the interval (cluster-aware Wilson for accuracies, Newcombe's paired
   interval for drops).

Messages carry what an engineer needs to act: observed value, interval, bound and
where it was set, n, chance level, and up to five worst items.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from medrcube.gate.checks import ACCURACY_KINDS, Check, CheckKind
from medrcube.gate.verdict import Status, Verdict, WorstItem
from medrcube.metrics.accuracy import accuracy, chance_level
from medrcube.metrics.clustered import clustered_accuracy, clustered_wilson, cluster_counts
from medrcube.metrics.comparison import regression
from medrcube.metrics.credibility import chain_pairs, credibility_of_pairs
from medrcube.metrics.power import needed_n_text
from medrcube.metrics.robustness import image_dependence, position_robustness
from medrcube.metrics.worst import worst_records
from medrcube.records import GradedRecord, Outcome

MAX_WORST = 5


def evaluate(check: Check, records: Iterable[GradedRecord], baseline: Iterable[GradedRecord] | None = None) -> Verdict:
    """The verdict of `check` on the run's records (all variants; the check selects its own).

    `baseline` holds the baseline run's records, needed by regression checks only.
    """
    records = [r for r in records if check.selects(r)]
    try:
        if check.kind in ACCURACY_KINDS:
            return _accuracy(check, records)
        if check.kind is CheckKind.CREDIBILITY:
            return _credibility(check, records)
        if check.kind is CheckKind.IMAGE_DEPENDENCE:
            return _image_dependence(check, records)
        if check.kind is CheckKind.POSITION:
            return _position(check, records)
        if check.kind is CheckKind.REGRESSION:
            return _regression(check, records, baseline)
    except ValueError as exc:  # inconsistent records (e.g. duplicates): say so, decide nothing
        return _verdict(check, Status.ERROR, f"cannot evaluate: {exc}", n=0, error_rate=0.0)
    raise ValueError(f"unknown check kind {check.kind!r}")


# --------------------------------------------------------------------------- shared pieces


def _verdict(check: Check, status: Status, message: str, **kw: Any) -> Verdict:
    kw.setdefault("observed", None)
    kw.setdefault("interval", None)
    kw.setdefault("chance", None)
    return Verdict(check_id=check.id, status=status, bound=kw.pop("bound", check.bound), message=message, **kw)


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _ci(check: Check, interval: tuple[float, float] | None) -> str:
    if interval is None:
        return ""
    return f", {_pct(check.confidence)} CI [{interval[0]:.3f}, {interval[1]:.3f}]"


def _bound_ref(check: Check) -> str:
    return f" [bound set at `{check.source}`]" if check.source else ""


def _errors_gate(check: Check, asked: Sequence[GradedRecord]) -> tuple[float, Verdict | None]:
    """The error rate over records that were asked, and an error verdict when above the bound."""
    considered = [r for r in asked if r.outcome is not Outcome.UNAVAILABLE]
    # A truncated answer was not graded either: it counts against the bound like an error.
    errors = [r for r in considered if r.outcome in (Outcome.ERROR, Outcome.TRUNCATED)]
    rate = len(errors) / len(considered) if considered else 0.0
    if errors and rate > check.max_error_rate:
        kinds = defaultdict(int)
        for r in errors:
            kinds[(r.error or "unknown error").split(":")[0][:60]] += 1
        top = "; ".join(f"{k} x{v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:3])
        msg = (
            f"{len(errors)} errors of {len(considered)} requests ({_pct(rate)} > max_error_rate "
            f"{_pct(check.max_error_rate)}): the evidence is incomplete; not graded. Errors: {top}. "
            "Fix the endpoint (or raise max_error_rate) and rerun: cached answers are kept."
        )
        return rate, _verdict(check, Status.ERROR, msg, n=len(considered) - len(errors), error_rate=rate,
                              details={"errors": len(errors), "asked": len(considered), "error_kinds": dict(kinds)})
    return rate, None


def _worst_wrong(records: Sequence[GradedRecord]) -> tuple[WorstItem, ...]:
    return tuple(WorstItem.of(r) for r in worst_records(records, MAX_WORST))


def _with_worst(message: str, worst: Sequence[WorstItem]) -> str:
    if not worst:
        return message
    return message + "\n  worst items:\n" + "\n".join(f"    - {w.line()}" for w in worst)


def _skip_text(check: Check, n: int, what: str = "graded items") -> str:
    return f"n={n} < min_n={check.min_n} {what}: insufficient evidence"


# --------------------------------------------------------------------------- accuracy


def _effective_bound(check: Check, chance: float | None) -> tuple[float, str]:
    """The bound after `above_chance`, and a note when it was raised."""
    if check.above_chance <= 0.0 or chance is None:
        return check.bound, ""
    floor = min(1.0, chance + check.above_chance)
    if floor <= check.bound:
        return check.bound, ""
    return floor, (
        f" (raised from {check.bound:.3f} to chance level {chance:.3f} + above_chance {check.above_chance:.2f}:"
        " these questions have few options)"
    )


def _accuracy(check: Check, records: list[GradedRecord]) -> Verdict:
    std = [r for r in records if r.variant == "standard"]
    rate, err = _errors_gate(check, std)
    if err:
        return err
    a = accuracy(std, check.confidence)
    ci = clustered_accuracy(std, check.confidence)
    chance = chance_level(std)
    bound, raised = _effective_bound(check, chance)
    details = {
        "correct": a.correct, "unparsed": a.unparsed, "refused": a.refused, "errors": a.errors,
        "unavailable": a.unavailable, "clusters": ci.clusters, "icc": ci.icc, "design_effect": ci.deff,
        "n_eff": ci.n_eff, "rule": check.rule, "confidence": check.confidence, "source": check.source,
        "wilson_unclustered": [a.lo, a.hi], "policy_bound": check.bound, "above_chance": check.above_chance,
    }
    common = dict(n=a.n, chance=chance, error_rate=rate, details=details, bound=bound)
    if a.n < check.min_n or a.acc is None:
        extra = f" ({a.unavailable} unavailable: restricted images)" if a.unavailable else ""
        if a.n and a.acc is not None:
            extra += f"; observed {a.correct}/{a.n} = {a.acc:.3f}"
        plan = needed_n_text(check.rule, bound, a.acc, check.confidence, min_n=check.min_n)
        return _verdict(check, Status.SKIP, f"{_skip_text(check, a.n)}{extra}; {plan}",
                        observed=a.acc, interval=(ci.lo, ci.hi), **common)
    interval = (ci.lo, ci.hi)
    decided = a.acc if check.rule == "point" else ci.lo
    ok = decided >= bound
    clustered = (
        f" (clustered by image: {ci.clusters} images, design effect {ci.deff:.2f})" if ci.deff > 1.0 + 1e-9 else ""
    )
    facts = (
        f"accuracy {a.acc:.3f} = {a.correct}/{a.n}{_ci(check, interval)}{clustered}; chance level "
        f"{_f(chance)}; not correct: {a.n - a.correct - a.unparsed - a.refused} wrong, {a.unparsed} unparsed, "
        f"{a.refused} refused; {a.errors} errors and {a.unavailable} unavailable excluded"
    )
    if check.rule == "point":
        head = f"accuracy {a.acc:.3f} {'>=' if ok else '<'} bound {bound:.3f}{raised} (point rule){_bound_ref(check)}"
    else:
        head = (
            f"lower {_pct(check.confidence)} bound {ci.lo:.3f} {'>=' if ok else '<'} bound {bound:.3f}{raised} "
            f"(lower_bound rule){_bound_ref(check)}"
        )
    if ok:
        return _verdict(check, Status.PASS, f"{head}; {facts}", observed=a.acc, interval=interval, **common)
    worst = _worst_wrong(std)
    if check.rule == "lower_bound" and a.acc >= bound:
        head += (
            f"; the estimate clears the bound but the evidence does not: "
            f"{needed_n_text(check.rule, bound, a.acc, check.confidence)}"
        )
    return _verdict(check, Status.FAIL, _with_worst(f"{head}\n  {facts}", worst), observed=a.acc,
                    interval=interval, worst=worst, **common)


# --------------------------------------------------------------------------- credibility


def _credibility(check: Check, records: list[GradedRecord]) -> Verdict:
    std = [r for r in records if r.variant == "standard"]
    rate, err = _errors_gate(check, std)
    if err:
        return err
    excluded = check.params.get("exclude_low_tasks", ("View Recognition",))
    pairs, dropped = chain_pairs(std, exclude_low_tasks=excluded)
    cred = credibility_of_pairs(pairs, dropped)
    # Pairs share images: intervals are clustered by image like accuracies.
    rat_ci = clustered_wilson(
        cluster_counts((p.image, p.low.correct) for p in pairs if p.high.correct), check.confidence
    )
    sc_ci = clustered_wilson(
        cluster_counts((p.image, p.high.correct) for p in pairs if not p.low.correct), check.confidence
    )
    max_sc = check.params.get("max_shortcut_prob")
    details = {**cred.to_dict(), "rationality_interval": [rat_ci.lo, rat_ci.hi],
               "shortcut_interval": [sc_ci.lo, sc_ci.hi], "max_shortcut_prob": max_sc,
               "exclude_low_tasks": list(excluded), "rule": check.rule, "source": check.source}
    rat_interval = (rat_ci.lo, rat_ci.hi) if cred.rationality is not None else None
    common = dict(n=cred.pairs, error_rate=rate, details=details, observed=cred.rationality, interval=rat_interval)
    groups = f"A={cred.A} B={cred.B} C={cred.C} D={cred.D} on {cred.images} images"
    if dropped:
        groups += f", {dropped} pairs dropped (an error or unavailable item on one side)"
    if cred.pairs < check.min_n:
        return _verdict(check, Status.SKIP, f"{_skip_text(check, cred.pairs, 'pairs')} ({groups}); "
                        "more images carrying both a high-level and a lower-level item are needed", **common)
    results: list[tuple[bool, str]] = []
    if check.bound is not None and cred.rationality is not None:
        val = cred.rationality if check.rule == "point" else rat_ci.lo
        what = "rationality" if check.rule == "point" else f"lower {_pct(check.confidence)} bound of rationality"
        ok = val >= check.bound
        results.append((ok, f"{what} {val:.3f} {'>=' if ok else '<'} {check.bound:.3f}"))
    if max_sc is not None and cred.shortcut_prob is not None:
        val = cred.shortcut_prob if check.rule == "point" else sc_ci.hi
        what = "shortcut probability" if check.rule == "point" else \
            f"upper {_pct(check.confidence)} bound of shortcut probability"
        ok = val <= max_sc
        results.append((ok, f"{what} {val:.3f} {'<=' if ok else '>'} {max_sc:.3f}"))
    facts = (
        f"rationality {_f(cred.rationality)}{_ci(check, rat_interval)}, luck rate {_f(cred.luck_rate)}, "
        f"shortcut probability {_f(cred.shortcut_prob)}; {groups}"
    )
    if not results:
        return _verdict(check, Status.SKIP, "nothing to decide: rationality needs a pair with the high-level "
                        f"item right (A+D>0), shortcut probability one with the low-level item wrong (C+D>0); {facts}",
                        **common)
    ok = all(r for r, _ in results)
    head = "; ".join(t for _, t in results) + _bound_ref(check)
    if ok:
        return _verdict(check, Status.PASS, f"{head}; {facts}", **common)
    # Worst: group D, the lower-level item missed while the diagnosis on the same image was right.
    seen: set[str] = set()
    worst: list[WorstItem] = []
    for p in sorted((p for p in pairs if p.group == "D"), key=lambda p: (p.image, p.low.item_id)):
        if p.image in seen or len(worst) >= MAX_WORST:
            continue
        seen.add(p.image)
        worst.append(WorstItem.of(p.low, note=f"yet {p.high.task} item {p.high.item_id} on the same image was right"))
    return _verdict(check, Status.FAIL, _with_worst(f"{head}\n  {facts}", worst), worst=tuple(worst), **common)


# --------------------------------------------------------------------------- image dependence


def _image_dependence(check: Check, records: list[GradedRecord]) -> Verdict:
    asked = [r for r in records if r.variant in ("standard", "blind")]
    rate, err = _errors_gate(check, asked)
    if err:
        return err
    d = image_dependence(asked, check.confidence)
    chance = chance_level(r for r in asked if r.variant == "blind")
    details = {**d.to_dict(), "rule": check.rule, "source": check.source}
    common = dict(n=d.counts.n, error_rate=rate, chance=chance, details=details, observed=d.drop,
                  interval=d.interval)
    if d.counts.n < check.min_n or d.drop is None:
        return _verdict(check, Status.SKIP, f"{_skip_text(check, d.counts.n, 'items graded in both variants')}; "
                        "run the blind variant on more items", **common)
    val = d.drop if check.rule == "point" else d.interval[0]
    ok = val >= check.bound
    what = "drop" if check.rule == "point" else f"lower {_pct(check.confidence)} bound of the drop"
    head = f"standard - blind accuracy: {what} {val:.3f} {'>=' if ok else '<'} {check.bound:.3f}{_bound_ref(check)}"
    facts = (
        f"standard {d.standard_acc:.3f}, blind {d.blind_acc:.3f} on {d.counts.n} shared items"
        f"{_ci(check, d.interval)}; blind chance level {_f(chance)}"
    )
    if ok:
        return _verdict(check, Status.PASS, f"{head}; {facts}", **common)
    blind_by_id = {r.item_id: r for r in asked if r.variant == "blind"}
    worst = tuple(
        WorstItem.of(blind_by_id[i], note="answered right without the image")
        for i in sorted(d.blind_right)[:MAX_WORST]
    )
    msg = f"{head}\n  {facts}: the answers barely depend on the image"
    return _verdict(check, Status.FAIL, _with_worst(msg, worst), worst=worst, **common)


# --------------------------------------------------------------------------- position robustness


def _position(check: Check, records: list[GradedRecord]) -> Verdict:
    asked = [r for r in records if r.variant in ("standard", "shuffled")]
    rate, err = _errors_gate(check, asked)
    if err:
        return err
    k = check.params.get("rotations")
    pr = position_robustness(asked, rotations=k, confidence=check.confidence)
    max_gap = check.params.get("max_gap")
    chance = chance_level((r for r in asked if r.variant == "standard"), power=pr.rotations + 1)
    ci = pr.circular_interval
    interval = (ci.lo, ci.hi) if pr.n else None
    details = {**pr.to_dict(), "max_gap": max_gap, "rule": check.rule, "source": check.source}
    common = dict(n=pr.n, error_rate=rate, chance=chance, details=details, observed=pr.circular_acc,
                  interval=interval)
    if pr.n < check.min_n or pr.circular_acc is None:
        return _verdict(check, Status.SKIP, f"{_skip_text(check, pr.n, 'items with every rotation graded')}"
                        f" ({pr.incomplete} incomplete)", **common)
    results: list[tuple[bool, str]] = []
    if check.bound is not None:
        val = pr.circular_acc if check.rule == "point" else ci.lo
        what = "circular accuracy" if check.rule == "point" else \
            f"lower {_pct(check.confidence)} bound of circular accuracy"
        ok = val >= check.bound
        results.append((ok, f"{what} {val:.3f} {'>=' if ok else '<'} {check.bound:.3f}"))
    if max_gap is not None:
        ok = pr.gap <= max_gap
        results.append((ok, f"gap to standard accuracy {pr.gap:.3f} {'<=' if ok else '>'} {max_gap:.3f}"))
    ok = all(r for r, _ in results)
    head = "; ".join(t for _, t in results) + _bound_ref(check)
    facts = (
        f"standard {pr.standard_acc:.3f}, circular {pr.circular_acc:.3f} over {pr.rotations} rotations on "
        f"{pr.n} items{_ci(check, interval)}; {pr.incomplete} incomplete items left out; chance level {_f(chance)}"
    )
    if ok:
        return _verdict(check, Status.PASS, f"{head}; {facts}", **common)
    shuffled: dict[str, list[GradedRecord]] = defaultdict(list)
    for r in asked:
        if r.variant == "shuffled":
            shuffled[r.item_id].append(r)
    worst = []
    for item_id in pr.inconsistent[:MAX_WORST]:
        bad = min((r for r in shuffled[item_id] if not r.correct), key=lambda r: r.rotation)
        worst.append(WorstItem.of(bad, note=f"right in the original order, wrong with options rotated by {bad.rotation}"))
    return _verdict(check, Status.FAIL, _with_worst(f"{head}\n  {facts}", worst), worst=tuple(worst), **common)


# --------------------------------------------------------------------------- regression


def _regression(check: Check, records: list[GradedRecord], baseline: Iterable[GradedRecord] | None) -> Verdict:
    if baseline is None:
        return _verdict(check, Status.ERROR, "a regression check needs the baseline's records: pass --baseline "
                        "(a previous run directory or a model spec)", n=0, error_rate=0.0)
    cand = [r for r in records if r.variant == "standard"]
    base = [r for r in baseline if r.variant == "standard" and check.selects(r)]
    rate, err = _errors_gate(check, cand)
    if err:
        return err
    reg = regression(cand, base, check.confidence)
    c = reg.counts
    alpha = check.params.get("alpha", 0.05)
    margin = check.params.get("margin", check.bound or 0.0)
    details = {**reg.to_dict(), "alpha": alpha, "margin": margin, "source": check.source,
               "baseline_errors": sum(r.outcome is Outcome.ERROR for r in base)}
    common = dict(n=c.n, error_rate=rate, details=details, observed=reg.drop, interval=reg.interval,
                  bound=margin)
    if c.n < check.min_n or reg.drop is None:
        return _verdict(check, Status.SKIP, f"{_skip_text(check, c.n, 'items graded by both models')} "
                        f"({c.dropped} dropped: not graded on one side; {c.first_only} only in this run, "
                        f"{c.second_only} only in the baseline)", **common)
    worse = reg.p_worse < alpha
    beyond = reg.drop > margin
    facts = (
        f"candidate {c.first_acc:.3f} vs baseline {c.second_acc:.3f} on {c.n} shared items: drop {reg.drop:+.3f}"
        f"{_ci(check, reg.interval)}; lost {c.c} items the baseline got right, gained {c.b}; "
        f"one-sided exact McNemar p={reg.p_worse:.4g} (two-sided {reg.test.p_two_sided:.4g})"
    )
    if not (worse and beyond):
        why = "not significantly worse" if not worse else f"drop within the margin {margin:.3f}"
        return _verdict(check, Status.PASS, f"no regression ({why}, alpha {alpha}){_bound_ref(check)}; {facts}",
                        **common)
    base_by_id = {r.item_id: r for r in base}
    lost = [r for r in cand if r.graded and not r.correct and base_by_id.get(r.item_id) is not None
            and base_by_id[r.item_id].correct]
    worst = tuple(
        WorstItem.of(r, note="the baseline answered it right")
        for r in sorted(lost, key=lambda r: r.item_id)[:MAX_WORST]
    )
    head = (
        f"regression: significantly worse (p={reg.p_worse:.4g} < alpha {alpha}) and the drop {reg.drop:.3f} "
        f"exceeds the margin {margin:.3f}{_bound_ref(check)}"
    )
    return _verdict(check, Status.FAIL, _with_worst(f"{head}\n  {facts}", worst), worst=worst, **common)
