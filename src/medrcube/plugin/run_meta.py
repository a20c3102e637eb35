"""What gate.json and run.json say about a gate run: its identity (a spec, never a key),
the usage of every model, the guarantee on this policy, the provenance of its answers
and the policy on record. Built by the controller (plugin/summary.GateReport.finish).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def served_model(served: Mapping[str, str | None], spec: str) -> str | None:
    """The model name the candidate's endpoint reported in the pre-flight (None for a local baseline)."""
    return served.get(spec)


def gate_meta(session: Any, entries: Mapping[str, Any]) -> dict[str, Any]:
    """What gate.json and the summary need to state the gate's verdict: its guarantee on
    this policy, and the required checks of the run that produced no verdict."""
    from medrcube.gate.evaluate import guarantee_text

    not_run = [c.id for c in session.checks if c.required and c.id not in entries]
    scope = session.policy.scope.describe()
    guarantee = guarantee_text(session.checks, scope) + session.decider.guarantee_note()
    return {"guarantee": guarantee, "not_run": not_run, "site_policy": site_policy(session), "scope": scope,
            "coverage_input": coverage_input(session)}


def site_policy(session: Any) -> dict[str, Any]:
    """The site's case mix and deferral cost from the gate's policy: metrics_summary.json's (rundir/files.summary_arguments)."""
    findings = getattr(session.policy, "findings", None)
    return {"prevalence": dict(findings.prevalence) if findings else {},
            "deferral_cost": session.policy.selective.deferral_cost}


def coverage_input(session: Any) -> dict[str, Any]:
    """What the coverage of the verdict is stated over (gate/coverage.py): the values of the
    cube asked, per axis and in the taxonomy's order, those a scope left outside, and the
    values `coverage.require` names."""
    from medrcube.taxonomy import MODALITIES, PARTS, TASK_NAMES

    canonical = {"part": PARTS, "modality": MODALITIES, "task": TASK_NAMES}
    asked = {it.cell for it in session.cube.items}  # the cube's cells, read once: the axes' values are theirs
    axes = {}
    for i, (axis, order) in enumerate(canonical.items()):
        rank = {v: k for k, v in enumerate(order)}
        axes[axis] = sorted({cell[i] for cell in asked}, key=lambda v: (rank.get(v, len(rank)), v))
    if session.policy.coverage.cells:  # per cell on request: every cube cell, in the axes' order
        pos = [{v: k for k, v in enumerate(axes[a])} for a in ("part", "modality", "task")]
        cells = sorted(asked, key=lambda c: tuple(pos[i][c[i]] for i in range(3)))
        axes["cell"] = ["/".join(c) for c in cells]
    return {"axes": axes, "outside": dict(session.outside), "require": session.policy.coverage.required()}


def run_meta(session: Any, run_id: str, result: Any, handovers: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The run's identity, for gate.json and run.json (a spec, never a key)."""
    from medrcube.plugin.costs import priced
    from medrcube.plugin.handover import merged_usage
    from medrcube.rundir.files import redact_spec, versions

    opts = session.options
    usage = priced(merged_usage(handovers), session, result)
    return {
        "run_id": run_id,
        "model": redact_spec(opts.model),
        "model_given": opts.model_given,  # False: no --model, the random baseline ran
        "model_fingerprint": session.adapter.fingerprint,
        "served_model": served_model(session.served, session.adapter.spec),
        "model_engine": dict(session.adapter.engine) if session.adapter.engine else None,
        # The model each answer names, as its endpoint said, and those naming another model than asked.
        "requested_model": session.adapter.model,
        "served_models": result.info.get("served_models") if result is not None else None,
        "served_model_mismatches": result.info.get("served_model_mismatches") if result is not None else None,
        "cube": {"source": session.cube.source, "fingerprint": session.cube.fingerprint, "items": len(session.cube)},
        "thresholds": session.thresholds_label,
        "profile": opts.profile,
        "variants": opts.variants,
        "baseline": opts.baseline,
        "judge": redact_spec(opts.judge),
        "medrcube_version": versions().get("medrcube"),
        "requests_sent": result.requests_sent if result is not None else None,
        "requests_by_process": result.info.get("requests_by_process") if result is not None else None,
        "usage": usage,
        # How a --sequential run sampled (every process takes the same decisions: the first says it).
        "sampling": next((h["sampling"] for h in handovers if h.get("sampling")), None),
        # Where the answers came from, whether stored answers were refused, the policy on record.
        "provenance": result.info.get("provenance") if result is not None else None,
        "fresh": session.fresh,
        "policy": session.policy_record or None,
    }
