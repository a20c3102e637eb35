"""Power where the evidence exists: the shipped policy at paper scale (RESULTS.md section 13).

    .venv/bin/python -m benchmarks.paper_power [--reps 30] [--bound-reps 100] [--seed 0]

Reuses benchmarks.paper_oc (the paper-scale cube, the shipped thresholds.yaml assessed as
a pytest run does, the `simulate:`-equivalent grounded model with ICC 0.3, the real
`evaluate_gate`). Every required accuracy check's bound is read as the gate applies it
(raised to chance + above_chance: the evidence of a model right on every item says it);
a task's accuracy is set at the largest bound of the required checks that hold its items
plus a margin, so that the model is at least that margin above every required accuracy
bound. Figures:
- P(QUALIFIED) of a grounded model 0.15 (and 0.10) above every required bound, `--reps` runs;
- false QUALIFIED at the bounds: the same model with one task (the most frequent,
  Disease Diagnosis, and the least, View Recognition) exactly at its largest bound,
  `--bound-reps` runs each: its binding check is at its bound, the rest far above.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from typing import Any

import numpy as np

from benchmarks.paper_oc import ABBREV, ROOT, Model, paper_cube, simulate
from medrcube.cube.item import Item
from medrcube.gate.checks import ACCURACY_KINDS, Check, build_checks
from medrcube.gate.evaluate import evaluate_gate
from medrcube.gate.evidence import collect
from medrcube.gate.feasible import assess, perfect_records
from medrcube.gate.thresholds import load_policy


def task_bounds(items: list[Item], checks: list[Check], own: bool = False) -> dict[str, float]:
    """Per task (abbreviation): the largest applied bound of the required accuracy checks
    that hold items of that task (`own`: only the checks within the task, its cells and
    slice, so that a task at that bound puts a check of its own at its bound)."""
    perfect = perfect_records(items)
    out: dict[str, float] = {}
    for c in checks:
        if not c.required or c.kind not in ACCURACY_KINDS or (own and c.task is None):
            continue
        mine = [r for r in perfect if c.selects(r)]
        bound = collect(c, mine).bound
        if bound is None:
            continue
        for task in {r.task for r in mine}:
            abbr = next(a for a, n in ABBREV.items() if n == task)
            out[abbr] = max(out.get(abbr, 0.0), float(bound))
    return out


def qualified_rate(items: list[Item], checks: list[Check], m: Model, reps: int,
                   rng: np.random.Generator) -> tuple[float, list[tuple[str, int]]]:
    q = 0
    blockers: Counter[str] = Counter()
    for _ in range(reps):
        res = evaluate_gate(checks, simulate(rng, items, m))
        q += res.gate.status.value == "QUALIFIED"
        for cid in (*res.gate.failed, *res.gate.undecided):
            blockers[cid] += 1
    return q / reps, blockers.most_common(3)


def mc(rate: float, reps: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1.0 / reps) / reps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.paper_power", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--bound-reps", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    items = paper_cube()
    policy = load_policy(str(ROOT / "thresholds.yaml"))
    checks = assess(build_checks(sorted({it.cell for it in items}), policy), items, policy)
    bounds = task_bounds(items, checks)
    print("largest required bound per task: " + ", ".join(f"{t} {b:.3f}" for t, b in sorted(bounds.items())))
    rng = np.random.default_rng(a.seed)
    rows: list[dict[str, Any]] = []
    for margin in (0.15, 0.10):
        acc = {t: min(0.999, b + margin) for t, b in bounds.items()}
        t0 = time.process_time()
        rate, blockers = qualified_rate(items, checks, Model(f"grounded +{margin}", acc, grounded=True), a.reps, rng)
        rows.append({"figure": f"grounded, {margin} above every required bound: QUALIFIED", "rate": rate,
                     "reps": a.reps, "blockers": blockers, "cpu": time.process_time() - t0})
    own = task_bounds(items, checks, own=True)
    print("largest required bound of a task's own checks: " + ", ".join(f"{t} {b:.3f}" for t, b in sorted(own.items())))
    for task in ("DD", "VR"):
        acc = {t: min(0.999, b + 0.15) for t, b in bounds.items()} | {task: own[task]}
        t0 = time.process_time()
        rate, blockers = qualified_rate(items, checks, Model(f"{task} at its bound", acc, grounded=True),
                                        a.bound_reps, rng)
        rows.append({"figure": f"{ABBREV[task]} at its bound ({own[task]:.3f}), the rest 0.15 above: "
                               "QUALIFIED (false)", "rate": rate, "reps": a.bound_reps, "blockers": blockers,
                     "cpu": time.process_time() - t0})
    print("| figure | rate | MC s.e. | reps | most frequent blockers (runs) |")
    print("|---|--:|--:|--:|---|")
    for r in rows:
        blockers = ", ".join(f"{c} ({n})" for c, n in r["blockers"]) or "-"
        print(f"| {r['figure']} | {r['rate']:.3f} | {mc(r['rate'], r['reps']):.3f} | {r['reps']} | {blockers} | "
              f"<!-- {r['cpu']:.0f} s CPU -->")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
