"""Sequential qualification against the full run, by repeated simulated runs.

    python -m benchmarks.sequential [--reps 20] [--near-reps 100] [--cube DIR]

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
- how often a sequential verdict is wrong: a pass when the model is below the bounds
  (false pass, stated: at most 0.025 per check), a fail when it is above (false fail,
  stated: at most 0.025 for the family: runs with any false fail), and both at the bound
  itself (0.5, where every claim is false), with Monte Carlo standard errors; undecided
  checks are counted apart (no guess is made). The rows at and within 0.05 of the bounds
  take `--near-reps` runs (default 100) for the sake of those rates.

Requests counted at the scripted server through the real openai client and the gate
itself: benchmarks/sequential_server.py (the same cube with its questions tagged by item,
the server answering as this simulation would).
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

DISTANCES = (0.0, 0.05, 0.1, 0.15, 0.25, 0.4)
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
    false_pass = sum(v == "pass" for v in seq_v.values()) if accuracy <= 0.5 else 0
    false_fail = sum(v == "fail" for v in seq_v.values()) if accuracy >= 0.5 else 0
    return {
        "fraction": asked / max(full.asked, 1),
        "agree": all(full_v[c] == seq_v[c] for c in both),
        "false_pass": false_pass,
        "any_false_fail": false_fail > 0,
        "undecided": sum(v == "undecided" for v in seq_v.values()),
        "checks": len(seq_v),
    }


def run(reps: int = 20, cube_dir: Path | None = None, near_reps: int = 100) -> list[dict[str, Any]]:
    cube = cube_at(cube_dir)
    checks = checks_of(cube)
    rows = []
    for d in DISTANCES:
        for sign in ((+1,) if d == 0 else (+1, -1)):
            acc = 0.5 + sign * d
            n = near_reps if d <= 0.05 else reps
            res = [asyncio.run(one(cube, checks, acc, seed)) for seed in range(1, n + 1)]
            fr = sorted(r["fraction"] for r in res)
            checks_seen = sum(r["checks"] for r in res)
            pass_rate = sum(r["false_pass"] for r in res) / checks_seen
            fail_rate = sum(r["any_false_fail"] for r in res) / n
            rows.append({
                "distance": d, "side": "at" if d == 0 else "above" if sign > 0 else "below", "accuracy": acc,
                "reps": n, "fraction_median": fr[len(fr) // 2], "fraction_max": fr[-1],
                "agreement": sum(r["agree"] for r in res) / n,
                "false_pass_rate": pass_rate, "false_pass_se": math.sqrt(max(pass_rate, 0.025) * 0.975 / checks_seen),
                "false_fail_runs": fail_rate, "false_fail_se": math.sqrt(max(fail_rate, 0.025) * 0.975 / n),
                "undecided_share": sum(r["undecided"] for r in res) / checks_seen,
                "checks": res[0]["checks"],
            })
    return rows


def markdown(rows: list[dict[str, Any]], seconds: float) -> str:
    head = ("| distance from every bound | model | runs | asks vs full run (median, max) | runs where decided "
            "verdicts agree | false passes (share of checks, stated <= 0.025) | runs with a false fail (stated <= 0.025) "
            "| undecided checks |\n|---|---|--:|--:|--:|--:|--:|--:|")
    lines = [head]
    for r in rows:
        fp = f"{r['false_pass_rate']:.4f} ± {r['false_pass_se']:.4f}" if r["side"] != "above" else "-"
        ff = f"{r['false_fail_runs']:.3f} ± {r['false_fail_se']:.3f}" if r["side"] != "below" else "-"
        lines.append(
            f"| {r['distance']:.2f} {r['side']} | {r['accuracy']:.2f} | {r['reps']} | {r['fraction_median']:.1%}, "
            f"{r['fraction_max']:.1%} | {r['agreement']:.0%} | {fp} | {ff} | {r['undecided_share']:.1%} |")
    return "\n".join(lines) + (f"\n\n{rows[0]['checks']} checks per run; ± is one Monte Carlo standard error "
                               f"(at the stated level when none was seen); {seconds:.0f} s.\n")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sequential")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--near-reps", type=int, default=100)
    ap.add_argument("--cube", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = run(args.reps, args.cube, args.near_reps)
    print(markdown(rows, time.time() - t0))
    return 0 if all(math.isfinite(r["fraction_median"]) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
