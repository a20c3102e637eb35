"""Operating characteristics of the gate, estimated by repeated simulated runs.

    .venv/bin/python -m benchmarks.oc [--reps 200] [--seed 1]

Each figure runs the gate's real decision core (medrcube.gate.evaluate.evaluate_gate on
GradedRecords, the same code the pytest gate runs) on records of a simulated model:
item outcomes are 1{sqrt(icc) u_image + sqrt(1 - icc) e_item < Phi^-1(p)} (marginal
accuracy p, latent image correlation icc), drawn with numpy. Coverage figures use
medrcube.metrics.clustered.clustered_wilson directly. Every figure carries its Monte
Carlo standard error, and the check compares it with the stated level plus 2 MC errors.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import norm

from medrcube.gate.checks import build_checks
from medrcube.gate.evaluate import evaluate_gate
from medrcube.gate.thresholds import policy_from_dict
from medrcube.gate.verdict import GateStatus, Status
from medrcube.metrics.clustered import clustered_wilson
from medrcube.records import GradedRecord, Outcome

ALPHA = 0.025
TASKS = ("Disease Diagnosis", "Abnormality Diagnosis", "Modality Recognition", "Organ Recognition", "ROI Grounding")
PARTS = ("Chest", "Brain")
CELLS = [(p, "X-Ray", t) for p in PARTS for t in TASKS]  # 10 cells
BOUND = 0.5


def policy(rule: str = "lower_bound") -> Any:
    return policy_from_dict({
        "version": 1,
        "defaults": {"rule": rule, "confidence": 0.95, "above_chance": 0.0, "min_n": 10},
        "overall": {"bound": BOUND},
        "cells": [{"match": "*/*/*", "bound": BOUND}],
        "regression": {"alpha": ALPHA, "margin": 0.05, "per_cell": True, "cells_required": True},
    }, source="oc")


def outcomes(rng: np.random.Generator, p: np.ndarray, images: np.ndarray, icc: float,
             u: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Correlated binary outcomes with marginals p; returns (outcomes, image effects)."""
    if u is None:
        u = rng.standard_normal(images.max() + 1)
    e = rng.standard_normal(len(p))
    latent = math.sqrt(icc) * u[images] + math.sqrt(1 - icc) * e
    return latent < norm.ppf(p), u


def records(ok: np.ndarray, cells: Sequence[tuple[str, str, str]], cell_of: np.ndarray, images: np.ndarray,
            prefix: str = "") -> list[GradedRecord]:
    out = []
    for i, (good, c, img) in enumerate(zip(ok.tolist(), cell_of.tolist(), images.tolist(), strict=True)):
        part, mod, task = cells[c]
        out.append(GradedRecord(
            item_id=f"{prefix}i{i}", dataset="oc", task=task, modality=mod, part=part, image=f"img{img}",
            image_digest=None, variant="standard", rotation=0, answer=0, n_options=4, prompt_hash="h",
            response="A" if good else "B", extracted=0 if good else 1, how="bare_letter",
            outcome=Outcome.CORRECT if good else Outcome.WRONG))
    return out


def layout(items_per_cell: int, per_image: int) -> tuple[np.ndarray, np.ndarray]:
    cell_of = np.repeat(np.arange(len(CELLS)), items_per_cell)
    images = np.arange(len(cell_of)) // per_image  # images never span two cells
    return cell_of, images


def mc(rate: float, reps: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1.0 / reps) / reps)


def gate_rates(reps: int, seed: int, cell_acc: np.ndarray, *, items: int = 40, per_image: int = 2,
               icc: float = 0.3, rule: str = "lower_bound") -> dict[str, float]:
    """Rates of the gate's three verdicts over `reps` runs, and `cell_pass`: the mean
    share of cell checks that pass (the power of one check)."""
    rng = np.random.default_rng(seed)
    cell_of, images = layout(items, per_image)
    checks = [c for c in build_checks(CELLS, policy(rule)) if c.kind == "cell" or c.kind == "overall"]
    counts = {s: 0 for s in GateStatus}
    cell_pass = 0.0
    for _ in range(reps):
        ok, _ = outcomes(rng, cell_acc[cell_of], images, icc)
        res = evaluate_gate(checks, records(ok, CELLS, cell_of, images))
        counts[res.gate.status] += 1
        cells = [v for v in res.verdicts if v.check_id != "overall"]
        cell_pass += sum(v.status is Status.PASS for v in cells) / len(cells)
    out = {s.value: counts[s] / reps for s in GateStatus}
    out["cell_pass"] = cell_pass / reps
    return out


def regression_fwer(reps: int, seed: int, *, items: int = 40, per_image: int = 2, icc: float = 0.3,
                    acc: float = 0.7, drop: float = 0.0) -> tuple[float, float]:
    """P(any regression check fails) for candidate == baseline in distribution (same image
    effects, independent item noise), and P(the overall one passes)."""
    rng = np.random.default_rng(seed)
    cell_of, images = layout(items, per_image)
    checks = [c for c in build_checks(CELLS, policy(), has_baseline=True) if c.kind == "regression"]
    p = np.full(len(cell_of), acc)
    any_fail = overall_pass = 0
    for _ in range(reps):
        base_ok, u = outcomes(rng, p, images, icc)
        cand_ok, _ = outcomes(rng, p - drop, images, icc, u)
        res = evaluate_gate(checks, records(cand_ok, CELLS, cell_of, images),
                            records(base_ok, CELLS, cell_of, images))
        any_fail += any(v.status is Status.FAIL for v in res.verdicts)
        overall_pass += res.by_id()["regression/overall"].status is Status.PASS
    return any_fail / reps, overall_pass / reps


def coverage(reps: int, seed: int, sizes: Sequence[int], p: float, icc: float) -> tuple[float, float]:
    """One-sided (true >= lower end) and two-sided coverage of the clustered interval."""
    rng = np.random.default_rng(seed)
    images = np.repeat(np.arange(len(sizes)), sizes)
    lo_ok = both = 0
    for _ in range(reps):
        ok, _ = outcomes(rng, np.full(len(images), p), images, icc)
        k = np.bincount(images, weights=ok, minlength=len(sizes)).astype(int)
        ci = clustered_wilson(list(zip(k.tolist(), list(sizes), strict=True)), 0.95)
        lo_ok += ci.lo <= p
        both += ci.lo <= p <= ci.hi
    return lo_ok / reps, both / reps


GRID: dict[str, tuple[list[int], float, float]] = {
    "one image of 20 items among 30 singles, p=0.7, icc=0.3": ([20] + [1] * 30, 0.7, 0.3),
    "50 images of 4 items, p=0.7, icc=0.3": ([4] * 50, 0.7, 0.3),
    "5 images of 6 items (few images), p=0.6, icc=0.3": ([6] * 5, 0.6, 0.3),
    "12 items on one image (ICC not estimable), p=0.8, icc=0.5": ([12], 0.8, 0.5),
    "unequal sizes 1..10 over 20 images, p=0.75, icc=0.5": ([1 + (i % 10) for i in range(20)], 0.75, 0.5),
    "40 independent items, p=0.9": ([1] * 40, 0.9, 0.0),
    "30 images of 3 items, p=0.9, icc=0.3": ([3] * 30, 0.9, 0.3),
    "10 images of 10 items, p=0.5, icc=0.5": ([10] * 10, 0.5, 0.5),
}


def run(reps: int = 200, seed: int = 1) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(key: str, label: str, value: float, level: float | None, op: str, n: int) -> None:
        err = mc(value, n)
        ok = None if level is None else (value <= level + 2 * err if op == "<=" else value >= level - 2 * err)
        rows.append({"id": key, "label": label, "value": value, "mc_se": err, "level": level, "op": op,
                     "reps": n, "ok": ok})

    near = np.full(len(CELLS), 0.8)
    near[0] = BOUND  # one cell exactly at its bound (the worst case of "just worse")
    r = gate_rates(reps, seed, near)
    add("oc.false_qualified", "false QUALIFIED: one cell at its bound, the rest at 0.8 (10 cells x 40 items)",
        r["QUALIFIED"], ALPHA, "<=", reps)
    r = gate_rates(reps, seed + 5, np.full(len(CELLS), BOUND))
    add("oc.false_not_qualified_at_bound", "false NOT QUALIFIED, worst case: every cell exactly at its bound "
        "(Holm over 11 checks)", r["NOT QUALIFIED"], ALPHA, "<=", reps)
    r = gate_rates(reps, seed + 1, np.full(len(CELLS), BOUND + 0.1))
    add("oc.false_not_qualified", "false NOT QUALIFIED: every cell 0.1 above its bound", r["NOT QUALIFIED"], ALPHA,
        "<=", reps)
    add("oc.power_margin", "  P(QUALIFIED) for that model (power at the margin, 40 items per cell)", r["QUALIFIED"],
        None, ">=", reps)
    add("oc.power_cell", "  P(one cell check passes) for that model, 40 items per cell", r["cell_pass"], None, ">=",
        reps)
    r = gate_rates(reps, seed + 2, np.full(len(CELLS), BOUND + 0.1), items=150)
    add("oc.power_margin_150", "  P(QUALIFIED) at the margin with 150 items per cell", r["QUALIFIED"], None, ">=",
        reps)
    add("oc.power_cell_150", "  P(one cell check passes) at the margin, 150 items per cell", r["cell_pass"], None,
        ">=", reps)
    r = gate_rates(reps, seed + 4, np.full(len(CELLS), 0.55), items=15, rule="point")
    add("oc.point_rule_nq", "point rule (screening, no guarantee): P(NOT QUALIFIED), every cell at 0.55 > 0.5, "
        "15 items per cell", r["NOT QUALIFIED"], None, "<=", reps)
    fw, ov = regression_fwer(reps, seed + 3)
    add("oc.regression_fwer", "regression: P(any of 11 checks fails), candidate == baseline", fw, ALPHA, "<=", reps)
    add("oc.regression_pass", "  P(regression/overall passes) for that candidate (margin 0.05, 400 items)", ov, None,
        ">=", reps)
    fw, _ = regression_fwer(reps, seed + 6, drop=0.15)
    add("oc.regression_power", "regression: P(some check fails) for a true 15-point drop everywhere", fw, None, ">=",
        reps)
    cov_reps = max(reps * 5, 500)
    for i, (label, (sizes, p, icc)) in enumerate(GRID.items()):
        one, two = coverage(cov_reps, seed + 10 + i, sizes, p, icc)
        add(f"oc.cov1_{i}", f"coverage, lower bound (target 0.975): {label}", one, 0.975, ">=", cov_reps)
        add(f"oc.cov2_{i}", f"coverage, two-sided (target 0.95): {label}", two, 0.95, ">=", cov_reps)
    return rows


def markdown(rows: list[dict[str, Any]], seconds: float) -> str:
    lines = ["| figure | estimate | MC s.e. | stated level | reps | |", "|---|--:|--:|---|--:|---|"]
    for r in rows:
        level = "" if r["level"] is None else f"{r['op']} {r['level']:g}"
        mark = "" if r["ok"] is None else ("ok" if r["ok"] else "MISS")
        lines.append(f"| {r['label']} | {r['value']:.3f} | {r['mc_se']:.3f} | {level} | {r['reps']} | {mark} |")
    lines.append(f"\n({seconds:.0f} s; `python -m benchmarks.oc`; a figure is ok when within its level plus "
                 "2 Monte Carlo standard errors)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = run(args.reps, args.seed)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(markdown(rows, time.perf_counter() - t0))
    return 0 if all(r["ok"] is not False for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
