"""Sequential qualification against the full run on the same answers, by repeated simulated runs.

    python -m benchmarks.sequential [--reps 100] [--near-reps 200] [--mid-reps 100] [--side-reps 20]
                                    [--driver-reps 10] [--cube DIR]

On the generated full-size cube (7,626 items, 3,000 images; `medrcube.testing.gencube`), a
simulated model (`simulate:accuracy=A,icc=0.3,seed=r`: every task at one accuracy, items
of one image correlated) is answered once per replicate, and the same answers are decided
twice: by the full run (every answerable item, `gate.evaluate.evaluate_gate`) and by the
sequential driver and decider the gate uses (`medrcube.sequential.SequentialDecider`, seed
r), whose `ask` hands back the replicate's answers for the items it asks. The records are
made from the simulation's own draws (`SimulatedAdapter.correct`) rather than through the
runner. The real driver takes seconds per run on a loaded machine, so the accuracy-only
policies run through its vectorised twin (benchmarks/sequential_sim.py: the same order,
answers, statistic, levels and decisions, checked against the driver run by run) and
the default policy, whose credibility checks have no twin, through the driver itself
with fewer replicates; the server benchmark
(benchmarks/sequential_server.py) runs the real gate on a few of the same cases and counts
the requests at the scripted server.

Three policies:
- `accuracy`: every cell, slice and overall check required, every bound 0.5 (no
  above_chance), so a model at A sits |A - 0.5| from every bound;
- `slices`: the same bounds, the cells optional (reported, not required): the 18 required
  checks are large enough for a full run to decide them, where many generated cells
  (5 to 30 answerable items) are too small for any run to decide;
- `default`: the shipped thresholds.yaml (standard variant: cells, slices, overall and
  credibility required; above_chance raises the bound of few-option cells). A model
  "d above" answers right with the largest effective accuracy bound of a required check
  plus d, and is grounded (`grounded=true`: a right perception goes with a right
  diagnosis, so credibility can pass); "d below" the smallest bound minus d, ungrounded.

Reported per policy and distance: the fraction of the full run's asks, the share of runs
whose gate verdict (QUALIFIED, NOT QUALIFIED, UNDECIDED) equals the full run's, and the
gate-level error rates with Monte Carlo standard errors: false QUALIFIED (the model is
below, or at, the bounds) and false NOT QUALIFIED (above, or at: at the bound every
required check meets its bound exactly, so a fail is false); plus the share of pass
claims that are false when the model is at or below the bounds (each stated at most 0.025).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DISTANCES = (0.0, 0.05, 0.1, 0.15, 0.25, 0.4)
POLICY = {
    "version": 1,
    "defaults": {"rule": "lower_bound", "confidence": 0.95, "min_n": 10, "above_chance": 0},
    "overall": {"bound": 0.5},
    "slices": {"part": {"default": {"bound": 0.5}}, "modality": {"default": {"bound": 0.5}},
               "task": {"default": {"bound": 0.5, "at_chance": True}}},
    # One bound 0.5 everywhere, so a model at A sits |A - 0.5| from every bound: at chance
    # on two-option tasks, which the gate refuses unless the entry says so.
    "cells": [{"match": "*/*/*", "bound": 0.5, "at_chance": True}],
}
# The same bounds with the cells reported but not required: the checks that decide the
# gate (5 part, 4 modality and 8 task slices, overall) are large enough for a full run
# to decide them at 0.1 from their bounds, where the generated cube's small cells are not.
SLICES_POLICY = {**POLICY, "cells": [{"match": "*/*/*", "bound": 0.5, "at_chance": True, "required": False}]}
SHIPPED = Path(__file__).resolve().parents[1] / "thresholds.yaml"


def cube_at(path: Path | None) -> Any:
    from medrcube.cube import load_cube
    from medrcube.testing.gencube import generate_release_cube

    if path is not None:  # a cube given (fixtures/mini): read as it is, never generated over
        return load_cube(path)
    path = Path(tempfile.gettempdir()) / "medrcube-bench-sequential-cube"
    if not (path / ".complete").is_file():
        generate_release_cube(path)
        (path / ".complete").write_text("ok\n")
    return load_cube(path)


def checks_of(cube: Any, policy: str = "accuracy") -> list[Any]:
    from medrcube.gate.checks import build_checks
    from medrcube.gate.thresholds import load_policy, policy_from_dict

    cells = {(it.part, it.modality, it.task) for it in cube.items}
    if policy in ("accuracy", "slices"):
        doc = POLICY if policy == "accuracy" else SLICES_POLICY
        return build_checks(cells, policy_from_dict(doc, source="benchmarks/sequential.py"))
    from medrcube.gate.feasible import assess

    offered: dict[tuple[str, str, str], set[str]] = {}
    for it in cube.items:
        offered.setdefault(it.cell, set()).update(it.options)
    shipped = load_policy(SHIPPED)
    # As the session builds them (plugin/session.py): assessed on the cube, so that the
    # checks this cube cannot decide are reported, not required, and hold no images.
    return assess(build_checks(cells, shipped, cell_options=offered), cube.items, shipped)


def bound_range(cube: Any, checks: Sequence[Any]) -> tuple[float, float]:
    """The smallest and largest effective bound of the required accuracy checks."""
    from medrcube.gate.checks import ACCURACY_KINDS
    from medrcube.gate.evidence import effective_bound
    from medrcube.metrics.accuracy import chance_level_of_options

    bounds = []
    for c in checks:
        if c.required and c.kind in ACCURACY_KINDS:
            items = [it for it in cube.items if c.selects(it) and cube.image_available(it)]
            if items:
                bounds.append(effective_bound(c, chance_level_of_options(len(it.options) for it in items))[0])
    return min(bounds), max(bounds)


def model_spec(policy: str, bounds: tuple[float, float], distance: float, side: int, seed: int) -> str:
    """The simulated model `distance` above (side +1) or below (-1) every required bound."""
    if policy != "default":
        acc = 0.5 + side * distance
    else:
        acc = bounds[1] + distance if side > 0 else bounds[0] - distance
    acc = min(max(acc, 0.02), 0.98)
    grounded = ",grounded=true" if policy == "default" and side > 0 else ""
    return f"simulate:accuracy={acc:.4f},icc=0.3,seed={seed}{grounded}"


def answers(cube: Any, spec: str) -> dict[str, Any]:
    """Every item's standard-variant record as the simulation answers it."""
    from medrcube.models.registry import load_adapter
    from medrcube.records import GradedRecord, Outcome

    sim = load_adapter(spec, cube=cube)
    out = {}
    for it in cube.items:
        n = len(it.options)
        if not cube.image_available(it):
            outcome, extracted = Outcome.UNAVAILABLE, None
        else:
            right = sim.correct(it.id, it.image, it.task)  # type: ignore[attr-defined]
            outcome, extracted = (Outcome.CORRECT, it.answer) if right else (Outcome.WRONG, (it.answer + 1) % n)
        out[it.id] = GradedRecord(
            item_id=it.id, dataset=it.dataset, task=it.task, modality=it.modality, part=it.part, image=it.image,
            image_digest=None, variant="standard", rotation=0, answer=it.answer, n_options=n, prompt_hash="",
            response=None if extracted is None else "ABCDEFGH"[extracted], extracted=extracted, how="simulated",
            outcome=outcome, options=tuple(it.options))
    return out


def one(cube: Any, checks: Sequence[Any], spec: str, seed: int) -> dict[str, Any]:
    from medrcube.gate.evaluate import evaluate_gate
    from medrcube.gate.verdict import gate_verdict
    from medrcube.sequential import SequentialDecider, SequentialPlan

    recs = answers(cube, spec)
    asked_by_full = sum(r.outcome.value != "unavailable" for r in recs.values())
    full = evaluate_gate(checks, recs.values())
    decider = SequentialDecider(SequentialPlan(seed=seed))

    async def ask(part: Any) -> list[Any]:
        return [recs[it.id] for it in part.items]

    asyncio.run(decider.ask(cube, checks, ask))
    assert decider.run is not None
    verdicts = decider.verdicts(checks, decider.run.records, None)
    gate = gate_verdict(v.to_dict() for v in verdicts.values())
    required = [v for v in verdicts.values() if v.required]
    return {
        "fraction": decider.run.items_asked / max(asked_by_full, 1),
        "full": full.gate.status.value, "sequential": gate.status.value,
        "passes": sum(v.status.value == "pass" for v in required), "required": len(required),
    }


def row(cube: Any, checks: Sequence[Any], policy: str, distance: float, side: int, reps: int) -> dict[str, Any]:
    """Replicates 1..reps of one case: through the vectorised driver for accuracy-only
    policies (benchmarks/sequential_sim.py), through the real one for the default policy
    (credibility has no vectorised twin)."""
    from benchmarks import sequential_sim
    from medrcube.sequential import SequentialPlan

    bounds = bound_range(cube, checks)
    specs = [(model_spec(policy, bounds, distance, side, seed), seed) for seed in range(1, reps + 1)]
    if policy == "default":
        res = [one(cube, checks, spec, seed) for spec, seed in specs]
    else:
        shape_list, keys, _ = sequential_sim.shapes(cube, checks, SequentialPlan())
        res = [sequential_sim.simulate(cube, shape_list, keys, sequential_sim.correct_of(cube, spec), seed)
               for spec, seed in specs]
    fr = sorted(r["fraction"] for r in res)
    below_or_at, above_or_at = side < 0 or distance == 0, side > 0 or distance == 0
    false_q = sum(r["sequential"] == "QUALIFIED" for r in res) / reps if below_or_at else None
    false_nq = sum(r["sequential"] == "NOT QUALIFIED" for r in res) / reps if above_or_at else None
    claims = sum(r["required"] for r in res)
    false_pass = sum(r["passes"] for r in res) / claims if below_or_at else None
    return {
        "policy": policy, "distance": distance, "side": "at" if distance == 0 else "above" if side > 0 else "below",
        "model": re.sub(r",seed=\d+", "", model_spec(policy, bounds, distance, side, 0)).removeprefix("simulate:"),
        "reps": reps, "fraction_median": fr[len(fr) // 2], "fraction_max": fr[-1],
        "agreement": sum(r["full"] == r["sequential"] for r in res) / reps,
        "full_verdicts": _counts(r["full"] for r in res), "sequential_verdicts": _counts(r["sequential"] for r in res),
        "false_qualified": false_q, "false_not_qualified": false_nq, "false_pass_claims": false_pass,
        "claims": claims, "engine": "driver" if policy == "default" else "vectorised",
    }


def _counts(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _se(p: float, n: int, stated: float = 0.025) -> float:
    return math.sqrt(max(p, stated) * (1 - max(p, stated)) / n)


def markdown(rows: list[dict[str, Any]], seconds: float) -> str:
    head = ("| policy | distance | model | runs | asks vs full run (median, max) | same gate verdict | full run's "
            "verdicts | false QUALIFIED (stated <= 0.025) | false NOT QUALIFIED (stated <= 0.025) | false pass claims "
            "(share, each stated <= 0.025) |\n|---|---|---|--:|--:|--:|---|--:|--:|--:|")
    lines = [head]
    for r in rows:
        fq = "-" if r["false_qualified"] is None else f"{r['false_qualified']:.3f} ± {_se(r['false_qualified'], r['reps']):.3f}"
        fnq = ("-" if r["false_not_qualified"] is None else
               f"{r['false_not_qualified']:.3f} ± {_se(r['false_not_qualified'], r['reps']):.3f}")
        fp = ("-" if r["false_pass_claims"] is None else
              f"{r['false_pass_claims']:.4f} ± {_se(r['false_pass_claims'], r['claims']):.4f}")
        full = ", ".join(f"{k} {v}" for k, v in sorted(r["full_verdicts"].items()))
        lines.append(f"| {r['policy']} | {r['distance']:.2f} {r['side']} | {r['model']} | {r['reps']} | "
                     f"{r['fraction_median']:.1%}, {r['fraction_max']:.1%} | {r['agreement']:.0%} | {full} | {fq} | "
                     f"{fnq} | {fp} |")
    return "\n".join(lines) + (f"\n\n± is one Monte Carlo standard error (at the stated level when the rate is "
                               f"below it); {seconds:.0f} s of CPU.\n")


PLAN = {  # (policy, distance): replicates per side ("reps", "near", "mid" or "side": the option of that name)
    ("accuracy", 0.0): "near", ("accuracy", 0.05): "near", ("accuracy", 0.1): "mid", ("accuracy", 0.15): "side",
    ("accuracy", 0.25): "reps", ("accuracy", 0.4): "side",
    ("slices", 0.1): "reps", ("slices", 0.25): "reps",
    ("default", 0.1): "driver", ("default", 0.25): "driver",
}


def run(reps: int = 100, cube_dir: Path | None = None, near_reps: int = 200, side_reps: int = 20,
        policies: Sequence[str] = ("accuracy", "slices", "default"), mid_reps: int = 100,
        driver_reps: int = 10) -> list[dict[str, Any]]:
    cube = cube_at(cube_dir)
    rows = []
    for policy in policies:
        checks = checks_of(cube, policy)
        for (p, d), which in PLAN.items():
            if p != policy:
                continue
            n = {"reps": reps, "near": near_reps, "side": side_reps, "mid": mid_reps, "driver": driver_reps}[which]
            if d == 0.05 and which == "near":
                n = max(near_reps // 2, 1)  # with the row at the bound: near_reps runs within 0.05 per error
            for side in ((+1,) if d == 0 else (+1, -1)):
                rows.append(row(cube, checks, policy, d, side, n))
                print(rows[-1], flush=True)
    return rows


def validation(cube: Any, seeds: int) -> str:
    """The vectorised twin against the real driver on the same answers and seeds."""
    from benchmarks.sequential_sim import check_against_driver

    lines = ["| policy | model | seed | gate verdict, driver / twin (full run / sequential) | asks, driver / twin |",
             "|---|---|--:|---|--:|"]
    same = total = 0
    for policy in ("accuracy", "slices"):
        checks = checks_of(cube, policy)
        specs = [(f"simulate:accuracy={a},icc=0.3,seed={seed}", seed) for a in ("0.75", "0.6", "0.5", "0.45")
                 for seed in range(1, seeds + 1)]
        for r in check_against_driver(cube, checks, specs):
            real, sim = r["real"], r["sim"]
            total += 1
            same += real["full"] == sim["full"] and real["sequential"] == sim["sequential"]
            lines.append(f"| {policy} | {r['spec'].split(',')[0].removeprefix('simulate:')} | {r['seed']} | "
                         f"{real['full']} / {real['sequential']}; {sim['full']} / {sim['sequential']} | "
                         f"{real['fraction']:.1%} / {sim['fraction']:.1%} |")
    return "\n".join(lines) + f"\n\nsame gate verdicts in {same} of {total} runs.\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sequential")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--near-reps", type=int, default=200)
    ap.add_argument("--side-reps", type=int, default=20)
    ap.add_argument("--mid-reps", type=int, default=100)
    ap.add_argument("--driver-reps", type=int, default=10, help="replicates of the default policy (real driver)")
    ap.add_argument("--policies", default="accuracy,slices,default")
    ap.add_argument("--validate", type=int, default=2, help="seeds of the twin-against-driver table (0: none)")
    ap.add_argument("--cube", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.process_time()
    if args.validate:
        print(validation(cube_at(args.cube), args.validate), flush=True)
    rows = run(args.reps, args.cube, args.near_reps, args.side_reps, args.policies.split(","), args.mid_reps,
               args.driver_reps)
    print(markdown(rows, time.process_time() - t0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
