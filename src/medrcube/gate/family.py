"""The family decision: every check's verdict, with the family's error rates controlled.

Pass claims, intersection-union (Berger 1982, Technometrics 24:295): a check passes when
each of its criteria is decisively met, i.e. its one-sided p-value of "not met" is at
most alpha = (1 - confidence) / 2. The gate's QUALIFIED is the conjunction of the
required checks' pass claims; by the intersection-union principle its probability, when
any required check's true value is worse than its bound, is at most alpha with no
multiplicity adjustment (the price is power: many small checks are hard to pass).

Fail claims, Holm (1979, Scand. J. Stat. 6:65): the one-sided p-values of "met" are
Holm-adjusted over one family (weighted Holm when a check states its share of the
family-wise level: the shipped policy gives the required overall credibility check half,
so that a shortcut can be shown at paper scale; the others split the rest), every check with evidence to weigh (required and
reported-only alike: a decided failure is evidence against the model wherever it is, and
makes the gate NOT QUALIFIED), so the probability that any check is called failed while
its true value meets its bound, and with it the probability of a false NOT QUALIFIED, is
at most alpha, whatever the dependence between checks. A check
with several criteria (position: circular accuracy and gap) fails when any criterion is
decisively missed: its p-value is the smallest, Bonferroni-multiplied by the number of
criteria.

The point rule (the `screening` profile) then lets a check that is not decided by the
evidence decide on its estimate from min_n units on: no statistical guarantee, and every
verdict it makes says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from medrcube.gate.criteria import Criterion, Evidence
from medrcube.gate.power import DEFAULT_POWER, normal_required_n, score_required_n
from medrcube.gate.verdict import NO_GUARANTEE, Status, Verdict

GUARANTEE_PASS = "pass claim at one-sided level {a:.3g} (intersection-union: QUALIFIED is wrong at most {a:.3g})"
GUARANTEE_FAIL = "fail claim at family-wise level {a:.3g} (Holm over {m} checks{w})"


def holm_adjust(p: Sequence[float], weights: Sequence[float] | None = None) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order; with `weights` (positive),
    the weighted Holm procedure (Holm 1979, section 5): hypotheses in the order of
    p / w, each adjusted p = p * (sum of the weights not yet rejected) / w, made
    monotone. Equal weights give Holm's procedure."""
    m = len(p)
    w = [1.0] * m if weights is None else [float(x) for x in weights]
    order = sorted(range(m), key=lambda i: (p[i] / w[i], i))
    out = [1.0] * m
    running = 0.0
    left = sum(w)
    for i in order:
        running = max(running, min(1.0, p[i] * left / w[i]))
        out[i] = running
        left -= w[i]
    return out


def fail_weights(shares: Sequence[float | None]) -> list[float]:
    """Weights of the fail claims' family: a check with a stated share of the family-wise
    level gets it, the others split the rest equally (all equal when none is stated, or
    when the stated shares leave nothing to the others)."""
    stated = [float(s) for s in shares if s is not None]
    rest = len(shares) - len(stated)
    if not stated or (rest and sum(stated) >= 1.0):
        return [1.0] * len(shares)
    each = (1.0 - sum(stated)) / rest if rest else 0.0
    return [each if s is None else float(s) for s in shares]


def pass_p(e: Evidence) -> float:
    """The check's p-value of "not met" (the largest of its criteria: intersection-union)."""
    return max((c.p_pass for c in e.criteria), default=1.0)


def fail_p(e: Evidence) -> float:
    """The check's p-value of "met" (the smallest of its criteria, Bonferroni over them)."""
    if not e.criteria:
        return 1.0
    return min(1.0, len(e.criteria) * min(c.p_fail for c in e.criteria))


def _needed(e: Evidence, alpha_pass: float, alpha_fail: float, power: float = DEFAULT_POWER) -> int | None:
    """Items that would decide the check with `power`: for each criterion, planning for
    its estimate when it is at least 0.05 from the bound, else for 0.10 from the bound
    on the estimate's side; the design effect observed so far is kept."""
    if not e.criteria:
        return None
    need = 0
    for c in e.criteria:
        est = c.estimate if c.estimate is not None else c.bound
        side_ok = c.point_ok
        dist = abs(est - c.bound)
        planned = est if dist >= 0.05 else (c.bound + (0.10 if side_ok == c.at_least else -0.10))
        planned = min(0.999, max(-0.999, planned))
        alpha = alpha_pass if side_ok else alpha_fail
        if c.name in ("accuracy", "circular accuracy") and 0.0 < c.bound < 1.0 and 0.0 <= planned <= 1.0:
            deff = (c.unit_sd**2) / max(planned * (1 - planned), 1e-4) if c.unit_sd else 1.0
            n = score_required_n(c.bound, planned, alpha, deff=max(1.0, deff), power=power)
        else:
            n = normal_required_n(c.unit_sd, abs(planned - c.bound), alpha, power=power)
        if n is None:
            return None
        need = max(need, n)
    return max(need, e.n + 1)


def _head(c: Criterion, confidence: float, decided: str) -> str:
    lo_hi = f"{_pct(c.confidence or confidence)} CI [{c.lo:.3f}, {c.hi:.3f}]"
    est = "n/a" if c.estimate is None else f"{c.estimate:.3f}"
    rel = ">=" if c.at_least else "<="
    return f"{c.name} {est} ({lo_hi}) against {rel} {c.bound:.3f}: {decided}"


def _pct(x: float) -> str:
    return f"{x * 100:g}%"


def _with_worst(message: str, worst: Sequence[Any]) -> str:
    if not worst:
        return message
    return message + "\n  worst items:\n" + "\n".join(f"    - {w.line()}" for w in worst)


def decide(evidences: Sequence[Evidence]) -> list[Verdict]:
    """The verdicts of a whole family of checks (in the input's order): one Holm family
    over every check with evidence to weigh, required or reported-only."""
    members = [i for i, e in enumerate(evidences) if e.error is None and e.criteria]
    weights = fail_weights([evidences[i].check.params.get("fail_share") for i in members])
    adj = holm_adjust([fail_p(evidences[i]) for i in members], weights)
    adjusted = dict(zip(members, adj, strict=True))
    family_size = {i: len(members) for i in members}
    return [_verdict(e, adjusted.get(i), family_size.get(i, 1)) for i, e in enumerate(evidences)]


def _verdict(e: Evidence, p_adj: float | None, m: int) -> Verdict:
    check = e.check
    alpha = check.alpha
    ref = f" [bound set at `{check.source}`]" if check.source else ""
    common: dict[str, Any] = dict(
        check_id=check.id, observed=e.observed, interval=e.interval, bound=e.bound, n=e.n, chance=e.chance,
        error_rate=e.error_rate, details=dict(e.details), required=check.required, rule=check.rule,
        method=e.method,
    )
    note = f" ({e.note})" if e.note else ""
    if check.params.get("not_required"):  # made optional before the run (gate/feasible.py): say so everywhere
        common["details"]["not_required"] = check.params["not_required"]
        note += f" [not required: {check.params['not_required']}]"
    if check.params.get("fail_power_at_chance") is not None:  # gate/feasible.py: can it fail blind guessing?
        common["details"]["fail_power_at_chance"] = check.params["fail_power_at_chance"]
    if e.error is not None:
        return Verdict(status=Status.ERROR, message=e.error, guarantee="not graded", **common)
    p_pass, p_fail = pass_p(e), fail_p(e)
    common.update(p_pass=p_pass, p_fail=p_fail, p_fail_adjusted=p_adj)
    common["details"].update(alpha=alpha, family_size=m)
    pass_alpha = check.pass_alpha
    if pass_alpha != alpha:
        common["details"]["pass_alpha"] = pass_alpha  # a later attempt on the cube (gate/attempts.py)
    if e.criteria and p_pass <= pass_alpha:
        heads = "; ".join(_head(c, check.confidence, "met") for c in e.criteria)
        g = GUARANTEE_PASS.format(a=pass_alpha)
        return Verdict(status=Status.PASS, message=f"{heads}{note}{ref}; decided by the confidence bound "
                       f"(p={p_pass:.3g} <= {pass_alpha:.3g}); {e.facts}", decided_by="confidence bound", guarantee=g,
                       **common)
    if e.criteria and p_adj is not None and p_adj <= alpha:
        # Name the criterion that decided (the smallest p of "met").
        worst = min(e.criteria, key=lambda c: c.p_fail)
        heads = _head(worst, check.confidence, "missed")
        share = check.params.get("fail_share")
        g = GUARANTEE_FAIL.format(a=alpha, m=m, w=f", weighted: this check's share {share:g}" if share else "")
        msg = (f"{heads}{note}{ref}; decided by the confidence bound (Holm-adjusted p={p_adj:.3g} <= {alpha:.3g} "
               f"over {m} checks)\n  {e.facts}")
        return Verdict(status=Status.FAIL, message=_with_worst(msg, e.worst), worst=e.worst,
                       decided_by="confidence bound", guarantee=g, **common)
    if check.rule == "point" and e.criteria and e.n >= check.min_n:
        ok = all(c.point_ok for c in e.criteria)
        heads = "; ".join(_head(c, check.confidence, "met" if c.point_ok else "missed") for c in e.criteria)
        msg = (f"{heads}{note}{ref}; decided by the point estimate (point rule, n={e.n} >= min_n={check.min_n}): "
               f"{NO_GUARANTEE}")
        if ok:
            return Verdict(status=Status.PASS, message=f"{msg}; {e.facts}", decided_by="point estimate",
                           guarantee=NO_GUARANTEE, **common)
        return Verdict(status=Status.FAIL, message=_with_worst(f"{msg}\n  {e.facts}", e.worst), worst=e.worst,
                       decided_by="point estimate", guarantee=NO_GUARANTEE, **common)
    needed = _needed(e, pass_alpha, alpha / max(m, 1))
    if not e.criteria:
        why = e.note or "nothing to measure"
    else:
        against = f"{pass_alpha:.3g} and {alpha:.3g}" if pass_alpha != alpha else f"{alpha:.3g}"
        why = (f"the evidence is not decisive (p={p_pass:.3g} for a pass, Holm-adjusted "
               f"p={p_adj if p_adj is not None else 1.0:.3g} for a fail, against {against})")
        if check.rule == "point" and e.n < check.min_n:
            why += f"; the point rule needs n >= min_n={check.min_n} {e.units} to decide on the estimate"
    plan = (f"; about {needed} {e.units} would decide it with {DEFAULT_POWER:.0%} power (design effect and "
            f"family of {m} checks included)" if needed is not None else "")
    heads = "; ".join(_head(c, check.confidence, "not decided") for c in e.criteria)
    nr = check.params.get("not_required")
    msg = f"undecided{f' [not required: {nr}]' if nr else ''}: {why}{plan}" + (f"\n  {heads}" if heads else "") + (f"{ref}\n  {e.facts}" if e.facts else "")
    return Verdict(status=Status.UNDECIDED, message=_with_worst(msg, e.worst), worst=e.worst,
                   guarantee="no decision", needed_n=needed, **common)

