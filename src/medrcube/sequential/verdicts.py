"""Every check's verdict after a sequential run, and what the run adds to the gate's
guarantee sentence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from medrcube.gate.checks import Check
from medrcube.gate.verdict import Status, Verdict
from medrcube.records import GradedRecord
from medrcube.run.order import SequentialPlan
from medrcube.sequential.driver import SequentialRun

SEQUENTIAL_GUARANTEE = (
    "anytime-valid: the pass claim holds at one-sided level {a:.3g}, and the fail claims of the {k} required "
    "sequential checks at family-wise {f:.3g} (closed testing with averaged e-values), whenever the run stopped "
    "(betting test, Ville's inequality)"
)


def guarantee_note(plan: SequentialPlan | None) -> str:
    """What a sequential run adds to the gate's guarantee sentence ("" for a full run)."""
    if plan is None:
        return ""
    return ("; sequential run: cell, slice, overall and regression checks decided by anytime-valid betting "
            "tests, their fail claims decided together by closed testing with averaged e-values (docs/guarantees.md)")


def sequential_verdicts(
    checks: Sequence[Check],
    run: SequentialRun,
    baseline: Sequence[GradedRecord] | None = None,
    *,
    baseline_error: str | None = None,
) -> dict[str, Verdict]:
    """Every check's verdict after a sequential run.

    A check with a sequence is decided by its betting test (its fixed-sample numbers on the
    images it used are kept as information: observed value, interval, worst items); an
    API-error verdict stays an error. Every other check is decided by its own fixed-sample
    rule on the items the run asked, and its message says so."""
    from medrcube.gate.evaluate import evaluate_gate

    fixed = evaluate_gate(checks, run.records, baseline, baseline_error=baseline_error).by_id()
    k = max(sum(1 for t in run.tracks.values() if t.family_weight > 0), 1)
    out: dict[str, Verdict] = {}
    for c in checks:
        v = fixed[c.id]
        track = run.tracks.get(c.id)
        if track is None:
            note = ("\n  sequential run: decided by its fixed-sample rule on its whole scope (a required check "
                    "without an anytime-valid test holds its items)" if c.required else
                    f"\n  sequential run: decided by its fixed-sample rule on the items the run asked ({run.items_asked} "
                    f"of {run.items_total}, chosen by the required checks' needs, not a random sample)")
            out[c.id] = replace(v, message=v.message + note)
            continue
        if v.status is Status.ERROR:
            out[c.id] = v
            continue
        decision = track.test.decision
        status = Status.PASS if decision == "pass" else Status.FAIL if decision == "fail" else Status.UNDECIDED
        need = track.still_needed()
        per_image = track.used_items / track.used_units if track.used_units else 1.0
        head = (f"sequential ({track.stop}): e-value for passing {track.test.e_pass:.3g} "
                f"(decides at {1 / track.test.alpha_pass:.3g}), for failing {track.test.e_fail:.3g} "
                f"(decides at {1 / track.test.alpha_fail:.3g}); {track.used_units} of {track.available_units} "
                f"images used ({track.used_items} items)")
        if status is Status.UNDECIDED:
            head += (f"; about {need} more images would decide" if need else
                     "; the estimate sits at the bound: no number of images is sure to decide")
        out[c.id] = replace(
            v,
            status=status,
            message=f"{head}\n  {v.message}",
            decided_by="anytime-valid betting test" if decision else "",
            guarantee=SEQUENTIAL_GUARANTEE.format(a=track.test.alpha_pass, f=track.test.alpha_fail, k=k),
            needed_n=None if status is not Status.UNDECIDED or need is None else round(need * per_image),
            details={**v.details, "sequential": run.check_summary(c.id)},
        )
    return out
