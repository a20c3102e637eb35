"""The evidence of the clinical-depth and image-perturbation kinds, as criteria the family decides.

- robustness            drop = standard - perturbed accuracy on paired items <= margin
- robustness_agreement  share of items answered alike under the perturbation >= bound
- finding               sensitivity for a named finding >= bound (per cell, or pooled)
- calibration           debiased calibration error (or ECE) <= bound
- selective             utility under the deferral cost (abstain variant) >= bound, or
                        accuracy of the most confident fraction c >= bound

Each metric module gives an interval; the p-values here come from the very statistic
that interval inverts, so a decision and the interval shown never disagree:
- Tango's score Z(margin) for the drop (metrics.perturbation.tango_score): the interval
  is {delta: |Z(delta)| <= z}, so p_pass = Phi(Z(margin)), p_fail = 1 - Phi(Z(margin));
- the agreement's cluster-aware Wilson interval: its own score test (metrics.clustered);
- Wilson on the Kish effective n with the normal quantile (metrics.findings, the
  sensitivity and accuracy at coverage): the score test z = (p - b) / sqrt(b (1 - b) / n_eff);
- the debiased ce^2 with its bootstrap standard error (metrics.calibration: the interval
  is sqrt(max(0, ce2 -+ z se))): z = (ce2 - bound^2) / se on the squared scale;
- the ECE's percentile bootstrap interval: p = the share of replicates on the far side
  of the bound (the percentile interval excludes the bound exactly when that share is
  below alpha);
- the utility's normal interval u -+ z se (metrics.selective): z = (u - b) / se;
- the coverage at risk's percentile bootstrap interval: as the ECE's.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from statistics import NormalDist

from medrcube.gate.checks import Check, CheckKind
from medrcube.gate.criteria import MAX_WORST, Criterion, Evidence, api_errors, ci_text, fmt, prop_criterion, with_finite
from medrcube.gate.kinds import collects
from medrcube.gate.verdict import WorstItem, letter
from medrcube.metrics.calibration import calibration, confident_rows, scored_rows
from medrcube.metrics.clustered import METHOD as PROPORTION_METHOD
from medrcube.metrics.clustered import image_key
from medrcube.metrics.findings import Proportion, cell_findings, label_of
from medrcube.metrics.perturbation import perturbation_robustness, tango_score
from medrcube.metrics.selective import (
    DeferralCosts,
    accuracy_at_coverage,
    coverage_at_risk,
    coverage_at_risk_replicates,
    ranked,
    utility,
)
from medrcube.records import GradedRecord, Outcome

_N = NormalDist()
TANGO_METHOD = "Tango's paired score interval, score divided by sqrt(design effect over images)"
KISH_METHOD = "Wilson score on the Kish effective n (ANOVA ICC; images counted when not estimable)"
NO_CONFIDENCE = ("no graded record carries a confidence: ask an endpoint that returns logprobs (models.yaml "
                 "params `logprobs: true`, `top_logprobs: 20`), an hf: model (option logits), or "
                 "--template verbal (a stated confidence); docs/clinical.md")


@collects(CheckKind.SELECTIVE, reads=("standard", "abstain"))
def _selective(check: Check, records: list[GradedRecord]) -> Evidence:
    """A selective check's evidence, by its metric (records already in its scope)."""
    if check.metric == "utility":
        return _utility(check, records)
    if check.metric == "coverage_at_risk":
        return _coverage_at_risk(check, records)
    return _accuracy_at_coverage(check, records)


def _z_p(z: float) -> tuple[float, float]:
    """(P(Z > z), P(Z < z)) for a standard normal, infinite z included."""
    if math.isnan(z):
        return 0.5, 0.5
    return 1.0 - _N.cdf(z) if math.isfinite(z) else float(z < 0), _N.cdf(z) if math.isfinite(z) else float(z > 0)


def wilson_criterion(name: str, p: Proportion, bound: float) -> Criterion:
    """A proportion with a Wilson interval on n_eff = n / deff (normal quantile), and the
    score test that inverts it: z = (k/n - b) / sqrt(b (1 - b) / n_eff)."""
    est = p.value
    n_eff = p.n / p.deff if p.n else 0.0
    if est is None or n_eff <= 0:
        p_pass = p_fail = 1.0
    elif bound <= 0.0 or bound >= 1.0:  # as metrics.clustered: only a value strictly beyond decides
        p_pass = 0.0 if bound <= 0.0 and est > 0.0 else 1.0
        p_fail = 0.0 if bound >= 1.0 and est < 1.0 else 1.0
    else:
        p_pass, p_fail = _z_p((est - bound) / math.sqrt(bound * (1.0 - bound) / n_eff))
    v = est if est is not None and 0.0 < est < 1.0 else bound
    sd = math.sqrt(max(v * (1.0 - v), 1e-4) * p.deff)
    return Criterion(name, est, bound, True, p.lo, p.hi, p_pass, p_fail, sd)


def _facts_ci(check: Check, lo: float, hi: float) -> str:
    return ci_text(check.confidence, (lo, hi))


# --------------------------------------------------------------------------- robustness (image perturbations)


@collects(CheckKind.ROBUSTNESS)
@collects(CheckKind.ROBUSTNESS_AGREEMENT)
def _robustness(check: Check, records: list[GradedRecord]) -> Evidence:
    variant = str(check.params["variant"])
    asked = [r for r in records if r.variant in ("standard", variant)]
    perturbed = [r for r in asked if r.variant == variant]
    rate, err = api_errors(check, perturbed)  # an outage of the perturbed asks is not evidence
    if err:
        return err
    res = perturbation_robustness(asked, variant, scope=check.id, confidence=check.confidence)
    d, ag = res.drop, res.agreement
    details = {**res.to_dict(), "rule": check.rule, "source": check.source, "margin": check.params.get("margin")}
    facts = (
        f"standard {fmt(d.standard_acc)}, {variant} {fmt(d.perturbed_acc)} on {d.n} items graded in both "
        f"({d.clusters} images): drop {fmt(d.drop)}{_facts_ci(check, d.lo, d.hi)} (design effect {d.deff:.2f}); "
        f"answers unchanged {fmt(ag.estimate)}{_facts_ci(check, ag.lo, ag.hi)}; lost {d.b}, gained {d.c}; "
        f"{res.not_graded} items not graded in one of the two"
    )
    by_id = {r.item_id: r for r in asked if r.variant == "standard"}
    agreement = check.kind is CheckKind.ROBUSTNESS_AGREEMENT
    worst: list[WorstItem] = []
    for p in sorted(perturbed, key=lambda r: r.item_id):
        s = by_id.get(p.item_id)
        if s is None or not (s.graded and p.graded) or len(worst) >= MAX_WORST:
            continue
        if agreement and s.extracted != p.extracted:
            worst.append(WorstItem.of(p, note=f"answered {letter(s.extracted) or 'nothing'} on the standard image"))
        elif not agreement and s.correct and not p.correct:
            worst.append(WorstItem.of(p, note=f"right on the standard image, wrong under {variant}"))
    if d.n == 0:
        why = (f"{variant} was not asked on any item of this scope" if not perturbed
               else f"no item graded in both standard and {variant}")
        return Evidence(check, 0, "items graded in both variants", bound=check.bound, error_rate=rate, facts=facts,
                        details=details, method=TANGO_METHOD, note=why)
    if agreement:
        crit = prop_criterion("answer agreement", ag, float(check.bound or 0.0))
        return Evidence(check, ag.n, "items graded in both variants", (crit,), ag.estimate, (ag.lo, ag.hi),
                        check.bound, None, rate, facts, tuple(worst), details, PROPORTION_METHOD)
    margin = float(check.params.get("margin", check.bound or 0.0))
    z = tango_score(d.b, d.c, d.n, margin, d.deff)
    p_fail, p_pass = _z_p(z)  # Z decreases in delta: Z(margin) << 0 means the drop is decisively within
    sd = math.sqrt(d.deff * max((d.b + d.c) / d.n, margin, 1e-3))
    crit = Criterion(f"accuracy drop under {variant}", d.drop, margin, False, d.lo, d.hi, p_pass, p_fail, sd)
    ev = Evidence(check, d.n, "items graded in both variants", (crit,), d.drop, (d.lo, d.hi), margin, None, rate,
                  facts, tuple(worst), details, TANGO_METHOD)
    return with_finite(ev, _drops(asked, variant), paired=True)


def _drops(asked: list[GradedRecord], variant: str) -> list[tuple[str, float]]:
    """(image, standard - perturbed correctness) of the items graded in both variants."""
    std = {r.item_id: r for r in asked if r.variant == "standard" and r.graded}
    return [(image_key(s), float(s.correct) - float(p.correct)) for p in asked
            if p.variant == variant and p.graded and (s := std.get(p.item_id)) is not None]


# --------------------------------------------------------------------------- findings (clinical depth)


def _in_cells(r: GradedRecord, patterns: Sequence[str]) -> bool:
    return any(all(fnmatch.fnmatchcase(v, q) for v, q in zip(r.cell, p.split("/"), strict=True)) for p in patterns)


@collects(CheckKind.FINDING, reads=("standard",))
def _finding(check: Check, records: list[GradedRecord]) -> Evidence:
    finding = str(check.params["finding"])
    std = [r for r in records if r.variant == "standard" and _in_cells(r, check.params.get("cells") or ["*/*/*"])]
    rate, err = api_errors(check, std)
    if err:
        return err
    prevalence = check.params.get("prevalence")
    cell = (check.part or "*", check.modality or "*", check.task or "*")
    cf = cell_findings(std, cell, {finding: prevalence} if prevalence else None, check.confidence)
    stats = cf.findings.get(finding)
    bound = float(check.bound or 0.0)
    details = {"finding": finding, "cell": list(cell), "n": cf.n, "skipped": cf.skipped, "confusion": cf.confusion,
               "balanced_accuracy": cf.balanced_accuracy, "stats": stats.to_dict() if stats else None,
               "site_prevalence": prevalence, "rule": check.rule, "source": check.source}
    if stats is None or stats.sensitivity.n == 0:
        why = f"no graded item has {finding!r} as its answer"
        if cf.skipped:
            why += f" ({cf.skipped} records carry no option texts: written before they were kept)"
        return Evidence(check, 0, "items with the finding", bound=bound, error_rate=rate, details=details,
                        method=KISH_METHOD, note=why, facts=f"{cf.n} graded items with option texts in scope")
    se, sp = stats.sensitivity, stats.specificity
    facts = (
        f"sensitivity for {finding} {fmt(se.value)} = {se.k}/{se.n}{_facts_ci(check, se.lo, se.hi)} "
        f"({se.clusters} images, design effect {se.deff:.2f}); specificity {fmt(sp.value)} = {sp.k}/{sp.n}; "
        f"PPV {fmt(stats.ppv.value)}, NPV {fmt(stats.npv.value)} at this cube's prevalence {fmt(stats.prevalence)}"
    )
    if stats.site:
        facts += (f"; at the site's prevalence {stats.site['prevalence']:g}: PPV {fmt(stats.site['ppv'])}, "
                  f"NPV {fmt(stats.site['npv'])}")
    missed = [r for r in std if r.graded and r.options and 0 <= r.answer < len(r.options)
              and label_of(r.options[r.answer]) == finding and not r.correct]
    worst = tuple(WorstItem.of(r, note=f"{finding} missed") for r in sorted(missed, key=lambda r: r.item_id)[:MAX_WORST])
    crit = wilson_criterion(f"sensitivity for {finding}", se, bound)
    ev = Evidence(check, se.n, "items with the finding", (crit,), se.value, (se.lo, se.hi), bound, None, rate,
                  facts, worst, details, KISH_METHOD)
    positives = [r for r in std if r.graded and r.options and 0 <= r.answer < len(r.options)
                 and label_of(r.options[r.answer]) == finding]
    return with_finite(ev, ((image_key(r), float(r.correct)) for r in positives))


# --------------------------------------------------------------------------- calibration (clinical depth)


@collects(CheckKind.CALIBRATION, reads=("standard",))
def _calibration(check: Check, records: list[GradedRecord]) -> Evidence:
    std = [r for r in records if r.variant == "standard"]
    rate, err = api_errors(check, std)
    if err:
        return err
    bound = float(check.bound or 0.0)
    statistic = str(check.params.get("statistic", "ce"))
    rows, missing = confident_rows(std)
    if not rows:  # decided without numpy: most runs send no log-probabilities (run/metering.AFTER_ANSWERS)
        return Evidence(check, 0, "graded items with a confidence", bound=bound, error_rate=rate,
                        details={"missing": missing, "statistic": statistic}, note=NO_CONFIDENCE,
                        facts=f"{missing} graded items, none with a confidence")
    s = scored_rows(rows, missing)
    cal = calibration(s, int(check.params.get("n_bins", 10)), int(check.params.get("n_boot", 400)), 0,
                      check.confidence)
    details = {**cal.to_dict(), "statistic": statistic, "rule": check.rule, "source": check.source}
    if statistic == "ce":
        value, (lo, hi) = cal.ce, cal.ce_ci95
        se = cal.ce2_se if cal.ce2_se is not None else math.inf
        ce2 = cal.ce2 if cal.ce2 is not None else 0.0
        z = (ce2 - bound * bound) / se if se > 0 else math.copysign(math.inf, ce2 - bound * bound)
        p_fail, p_pass = _z_p(z)  # on the squared scale, where the interval is symmetric
        sd = (se / (2.0 * max(value or 0.0, bound, 1e-3))) * math.sqrt(s.n) if math.isfinite(se) else 1.0
        name, method = "calibration error (debiased RMS)", "debiased ce^2 +- z x cluster-bootstrap se, square root"
    else:
        value, (lo, hi) = cal.ece, cal.ece_ci95
        reps = cal.ece_replicates
        p_pass = sum(x >= bound for x in reps) / len(reps) if reps else 1.0
        p_fail = sum(x <= bound for x in reps) / len(reps) if reps else 1.0
        sd = 0.5
        name, method = "expected calibration error", "cluster-bootstrap percentile interval of ECE"
    facts = (
        f"{name} {fmt(value)}{_facts_ci(check, lo, hi)} over {cal.n} items on {cal.clusters} images "
        f"({cal.n_bins} equal-mass bins); ECE {fmt(cal.ece)}; mean confidence {fmt(cal.mean_confidence)}, "
        f"accuracy {fmt(cal.accuracy)}; {cal.missing} graded items without a confidence left out"
    )
    wrong = sorted((r for r in std if r.graded and not r.correct and r.confidence_value is not None),
                   key=lambda r: (-(r.confidence_value or 0.0), r.item_id))
    worst = tuple(WorstItem.of(r, note=f"wrong at confidence {r.confidence_value:.2f}") for r in wrong[:MAX_WORST])
    crit = Criterion(name, value, bound, False, lo, hi, p_pass, p_fail, sd)
    return Evidence(check, cal.n, "graded items with a confidence", (crit,), value, (lo, hi), bound, None, rate,
                    facts, worst, details, method)


# --------------------------------------------------------------------------- selective prediction (clinical depth)


def _utility(check: Check, records: list[GradedRecord]) -> Evidence:
    ab = [r for r in records if r.variant == "abstain"]
    rate, err = api_errors(check, ab)
    if err:
        return err
    costs = DeferralCosts(error=1.0, deferral=float(check.params.get("deferral_cost", 0.1)))
    u = utility(ab, costs, check.confidence)
    bound = float(check.bound or 0.0)
    details = {**u.to_dict(), "rule": check.rule, "source": check.source}
    if u.utility is None:
        return Evidence(check, 0, "items of the abstain variant", bound=bound, error_rate=rate, details=details,
                        note="no graded record of the abstain variant in this scope", method="ratio estimator")
    z = (u.utility - bound) / u.se if u.se > 0 else math.copysign(math.inf, u.utility - bound)
    p_pass, p_fail = _z_p(z)
    sd = u.se * math.sqrt(u.n) if math.isfinite(u.se) else 1.0
    facts = (
        f"utility {fmt(u.utility)}{_facts_ci(check, *u.ci95)} over {u.n} items on {u.clusters} images, a deferral "
        f"costing {costs.deferral:g} of an error: {u.correct} right, {u.errors} wrong/unparsed/refused, "
        f"{u.deferred} deferred (rate {fmt(u.deferral_rate)}); accuracy of the answers given {fmt(u.accuracy_answered)}"
    )
    wrong = sorted((r for r in ab if r.graded and not r.correct), key=lambda r: r.item_id)
    worst = tuple(WorstItem.of(r, note="answered wrong instead of deferring") for r in wrong[:MAX_WORST])
    crit = Criterion("utility", u.utility, bound, True, u.ci95[0], u.ci95[1], p_pass, p_fail, sd)
    return Evidence(check, u.n, "items of the abstain variant", (crit,), u.utility, u.ci95, bound, None, rate, facts,
                    worst, details, "cluster-robust ratio estimator, normal interval")


def _accuracy_at_coverage(check: Check, records: list[GradedRecord]) -> Evidence:
    std = [r for r in records if r.variant == "standard"]
    rate, err = api_errors(check, std)
    if err:
        return err
    coverage = float(check.params["coverage"])
    rk = ranked(std)
    bound = float(check.bound or 0.0)
    if rk.n == 0:
        return Evidence(check, 0, "answers kept", bound=bound, error_rate=rate, note=NO_CONFIDENCE,
                        details={"missing": rk.missing, "coverage": coverage})
    p = accuracy_at_coverage(rk, coverage, check.confidence)
    facts = (f"accuracy of the {p.n} most confident answers of {rk.n} (coverage {coverage:g}) {fmt(p.value)}"
             f"{_facts_ci(check, p.lo, p.hi)} on {p.clusters} images; {rk.missing} graded items without a confidence")
    details = {**p.to_dict(), "coverage": coverage, "ranked": rk.n, "missing": rk.missing, "rule": check.rule,
               "source": check.source}
    crit = wilson_criterion(f"accuracy at coverage {coverage:g}", p, bound)
    confident_wrong = sorted((r for r in std if r.outcome is Outcome.WRONG and r.confidence_value is not None),
                             key=lambda r: (-(r.confidence_value or 0.0), r.item_id))
    worst = tuple(WorstItem.of(r, note=f"wrong at confidence {r.confidence_value:.2f}")
                  for r in confident_wrong[:MAX_WORST])
    return Evidence(check, p.n, "answers kept", (crit,), p.value, (p.lo, p.hi), bound, None, rate, facts, worst,
                    details, KISH_METHOD)


def _coverage_at_risk(check: Check, records: list[GradedRecord]) -> Evidence:
    std = [r for r in records if r.variant == "standard"]
    rate, err = api_errors(check, std)
    if err:
        return err
    risk = float(check.params["risk"])
    rk = ranked(std)
    bound = float(check.bound or 0.0)
    if rk.n == 0:
        return Evidence(check, 0, "graded items with a confidence", bound=bound, error_rate=rate, note=NO_CONFIDENCE,
                        details={"missing": rk.missing, "risk": risk})
    c = coverage_at_risk(rk, risk, confidence=check.confidence)
    reps = coverage_at_risk_replicates(rk, risk)
    # The percentile interval excludes the bound exactly when fewer than alpha of the
    # replicates lie on its far side: that share is the p-value.
    p_pass = float((reps <= bound).mean()) if reps.size else 1.0
    p_fail = float((reps >= bound).mean()) if reps.size else 1.0
    lo, hi = c["ci95"]
    facts = (f"coverage at risk {risk:g}: {fmt(c['coverage'])}{_facts_ci(check, lo, hi)} of {rk.n} answers with a "
             f"confidence (the largest most-confident fraction at most {risk:.0%} wrong); {rk.missing} without one")
    crit = Criterion(f"coverage at risk {risk:g}", c["coverage"], bound, True, lo, hi, p_pass, p_fail, 0.5)
    return Evidence(check, rk.n, "graded items with a confidence", (crit,), c["coverage"], (lo, hi), bound, None,
                    rate, facts, (), {**c, "missing": rk.missing, "rule": check.rule, "source": check.source},
                    "cluster-bootstrap percentile interval over images")
