"""Sequential qualification against the full run, by repeated simulated runs.

    python -m benchmarks.sequential [--reps 20] [--cube DIR]

On the generated full-size cube (7,626 items, 3,000 images; `medrcube.testing.gencube`),
a simulated model (`simulate:accuracy=...,icc=0.3,seed=r`: every task at one accuracy,
items of one image correlated) meets a policy whose every bound is 0.5, so the distance
of every cell, slice and overall check from its bound is |accuracy - 0.5|. For each
distance and replicate the same model is run twice through the real runner: the full
run (every item, decided by the fixed-sample rules) and the sequential one (`--sequential`:
the same driver and decisions as the gate, seed r). Reported per distance:

- the asks of the sequential run as a fraction of the full run's;
- agreement: the share of runs where every check decided by both runs got the same
  verdict;
- for models at 0.05 from the bounds, how often a sequential verdict is wrong: a pass
  when the model is below (false pass), a fail when it is above (false fail), against the
  stated one-sided level; undecided checks are counted apart (no guess is made).

Requests counted at the scripted server through the real openai client are measured in
tests/plugin/test_plugin_sequential.py, on a cube whose questions are unique: the
generated cube repeats its question texts across images, so a server answering by prompt
cannot stand in for a simulated model that answers item by item.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DISTANCES = (0.05, 0.1, 0.15, 0.25, 0.4)
POLICY = {
    "version": 1,
    "defaults": {"rule": "lower_bound", "confidence": 0.95, "min_n": 10, "above_chance": 0},
    "overall": {"bound": 0.5},
    "slices": {"part": {"default": {"bound": 0.5}}, "modality": {"default": {"bound": 0.5}},
               "task": {"default": {"bound": 0.5}}},
    "cells": [{"match": "*/*/*", "bound": 0.5}],
}


def cube_at(path: Path | None) -> Any:
    from medrcube.cube import load_cube
    from medrcube.testing.gencube import generate_release_cube

    if path is None:
        path = Path(tempfile.gettempdir()) / "medrcube-bench-sequential-cube"
    if not (path / ".complete").is_file():
        generate_release_cube(path)
        (path / ".complete").write_text("ok\n")
    return load_cube(path)


def checks_of(cube: Any) -> list[Any]:
    from medrcube.gate.checks import CheckKind, build_checks
    from medrcube.gate.thresholds import policy_from_dict

    policy = policy_from_dict(POLICY, source="benchmarks/sequential.py")
    cells = {(it.part, it.modality, it.task) for it in cube.items}
    # Accuracy checks only: credibility has its own fixed-sample rule and holds no items.
    return [c for c in build_checks(cells, policy) if c.kind in (CheckKind.CELL, CheckKind.SLICE, CheckKind.OVERALL)]


async def one(cube: Any, checks: Sequence[Any], accuracy: float, seed: int) -> dict[str, Any]:
    from medrcube.gate.evaluate import evaluate_gate
    from medrcube.models.registry import load_adapter
    from medrcube.run.order import SequentialPlan
    from medrcube.run.runner import run_cube_async
    from medrcube.sequential import run_sequential, sequential_verdicts

    spec = f"simulate:accuracy={accuracy:.4f},icc=0.3,seed={seed}"
    full = await run_cube_async(cube, load_adapter(spec, cube=cube))
    full_v = {v.check_id: v.status.value for v in evaluate_gate(checks, full.records).verdicts}
    adapter = load_adapter(spec, cube=cube)
    asked = 0

    async def ask(part: Any) -> list[Any]:
        nonlocal asked
        r = await run_cube_async(part, adapter)
        asked += r.asked
        return r.records

    seq = await run_sequential(cube, checks, SequentialPlan(seed=seed), ask)
    seq_v = {cid: v.status.value for cid, v in sequential_verdicts(checks, seq).items()}
    both = [cid for cid in full_v if full_v[cid] in ("pass", "fail") and seq_v[cid] in ("pass", "fail")]
    wrong = "fail" if accuracy > 0.5 else "pass"
    return {
        "fraction": asked / max(full.asked, 1),
        "agree": all(full_v[c] == seq_v[c] for c in both),
        "wrong": sum(v == wrong for v in seq_v.values()),
        "undecided": sum(v == "undecided" for v in seq_v.values()),
        "checks": len(seq_v),
        "any_wrong": any(v == wrong for v in seq_v.values()),
    }


def run(reps: int = 20, cube_dir: Path | None = None) -> list[dict[str, Any]]:
    cube = cube_at(cube_dir)
    checks = checks_of(cube)
    rows = []
    for d in DISTANCES:
        for sign in (+1, -1):
            acc = 0.5 + sign * d
            res = [asyncio.run(one(cube, checks, acc, seed)) for seed in range(1, reps + 1)]
            fr = sorted(r["fraction"] for r in res)
            rows.append({
                "distance": d, "side": "above" if sign > 0 else "below", "accuracy": acc, "reps": reps,
                "fraction_median": fr[len(fr) // 2], "fraction_max": fr[-1],
                "agreement": sum(r["agree"] for r in res) / reps,
                "wrong_rate": sum(r["wrong"] for r in res) / sum(r["checks"] for r in res),
                "runs_with_a_wrong_verdict": sum(r["any_wrong"] for r in res) / reps,
                "undecided_share": sum(r["undecided"] for r in res) / sum(r["checks"] for r in res),
                "checks": res[0]["checks"],
            })
    return rows


def markdown(rows: list[dict[str, Any]], seconds: float) -> str:
    head = ("| distance from every bound | model | asks vs full run (median, max) | runs where decided verdicts agree "
            "| wrong verdicts (share of checks) | runs with a wrong verdict | undecided checks |\n"
            "|---|---|--:|--:|--:|--:|--:|")
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['distance']:.2f} {r['side']} | {r['accuracy']:.2f} | {r['fraction_median']:.1%}, "
            f"{r['fraction_max']:.1%} | {r['agreement']:.0%} | {r['wrong_rate']:.4f} | "
            f"{r['runs_with_a_wrong_verdict']:.2f} | {r['undecided_share']:.1%} |")
    return "\n".join(lines) + f"\n\n{rows[0]['reps']} runs per row, {rows[0]['checks']} checks per run, {seconds:.0f} s.\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sequential")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--cube", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = run(args.reps, args.cube)
    print(markdown(rows, time.time() - t0))
    return 0 if all(math.isfinite(r["fraction_median"]) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
