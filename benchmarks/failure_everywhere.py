"""A failure is evidence everywhere: the false NOT QUALIFIED rate over the enlarged family,
and the gate catching a good model that is bad on one part, modality or task
(RESULTS.md section 23b).

    .venv/bin/python -m benchmarks.failure_everywhere [--reps 400] [--seed 0]

The gate is NOT QUALIFIED when any check fails, required or reported-only, so a false
NOT QUALIFIED is a fail claim on any check whose true value meets its bound. The fail
claims are Holm-adjusted over one family, every check with evidence (gate/family.py),
which bounds that probability by alpha = 0.025 whatever the dependence.

1. At the bounds: on the bundled cube under the shipped policy (checks assessed by
   feasibility as a pytest run does), every item's true accuracy is the largest bound of
   the accuracy checks over it (cells, slices, overall; each check's bound as the gate
   applies it, chance raised by `above_chance` included), so every accuracy check's true
   value meets its bound and the cells whose bound is the largest sit exactly at it. Item
   outcomes are drawn with a latent image effect (ICC 0 or 0.3) and decided by the real
   `evaluate_gate`. A run is a false NOT QUALIFIED when any check fails. The family is the
   accuracy checks (credibility is left out: its truth under such answers is not at
   a known place against its bound).
2. Power: a simulated model right with probability 0.95 everywhere (ICC 0.3) but at chance
   (or at 0) on one whole part, modality or task: the rate of NOT QUALIFIED, the failures
   reported-only checks alone decided, and the rate under the former rule (only required
   checks' failures count, with the two families apart) computed from the same runs.

Monte Carlo s.e. of a rate r over R runs is sqrt(r(1-r)/R); the upper 95% Clopper-Pearson
bound is given for the error rates.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import beta, norm

from benchmarks.paper_oc import records_of
from medrcube.cube.item import Item
from medrcube.gate.checks import ACCURACY_KINDS, Check, build_checks
from medrcube.gate.evaluate import evaluate_gate
from medrcube.gate.family import fail_p, holm_adjust
from medrcube.gate.feasible import assess, perfect_records
from medrcube.gate.thresholds import load_policy
from medrcube.records import GradedRecord, Outcome

ROOT = Path(__file__).resolve().parents[1]
ALPHA = 0.025


def bundled() -> tuple[list[Item], list[Check]]:
    from medrcube.cube import load_cube

    items = list(load_cube(str(ROOT / "fixtures" / "mini")).items)
    policy = load_policy(str(ROOT / "thresholds.yaml"))
    return items, assess(build_checks(sorted({it.cell for it in items}), policy), items, policy)


def draw(rng: np.random.Generator, items: Sequence[Item], p: np.ndarray, icc: float) -> list[GradedRecord]:
    """Records with item i right with probability p[i], items on one image correlated (ICC)."""
    keys = sorted({it.image or it.id for it in items})
    index = {k: i for i, k in enumerate(keys)}
    img = np.array([index[it.image or it.id] for it in items])
    latent = math.sqrt(icc) * rng.standard_normal(len(keys))[img] + math.sqrt(1 - icc) * rng.standard_normal(len(items))
    ok = latent < norm.ppf(np.clip(p, 1e-12, 1 - 1e-12))
    ok = np.where(p >= 1.0, True, np.where(p <= 0.0, False, ok))
    return records_of(items, ok)


def at_the_bounds(items: Sequence[Item], checks: Sequence[Check]) -> np.ndarray:
    """Per item, the largest applied bound of the accuracy checks over it."""
    applied = {v.check_id: v.bound for v in evaluate_gate(checks, perfect_records(items)).verdicts}
    p = np.zeros(len(items))
    for i, it in enumerate(items):
        rec = GradedRecord(item_id=it.id, dataset=it.dataset, task=it.task, modality=it.modality, part=it.part,
                           image=it.image, image_digest=None, variant="standard", rotation=0, answer=0,
                           n_options=len(it.options), prompt_hash="", response=None, extracted=0, how="",
                           outcome=Outcome.CORRECT)
        p[i] = max((applied[c.id] or 0.0) for c in checks if c.selects(rec))
    return p


def mc(r: float, n: int) -> float:
    return math.sqrt(max(r * (1 - r), 0.0) / n)


def upper(k: int, n: int) -> float:
    return 1.0 if k == n else float(beta.ppf(0.95, k + 1, n - k))


def false_not_qualified(items: Sequence[Item], checks: Sequence[Check], reps: int, seed: int,
                        icc: float) -> dict[str, Any]:
    family = [c for c in checks if c.kind in ACCURACY_KINDS]
    p = at_the_bounds(items, family)
    rng = np.random.default_rng(seed)
    any_fail = required_fail = reported_fail = 0
    for _ in range(reps):
        verdicts = evaluate_gate(family, draw(rng, items, p, icc)).verdicts
        failed = [v for v in verdicts if v.status.value == "fail"]
        any_fail += bool(failed)
        required_fail += any(v.required for v in failed)
        reported_fail += any(not v.required for v in failed)
    return {"icc": icc, "reps": reps, "checks": len(family), "required": sum(c.required for c in family),
            "rate": any_fail / reps, "k": any_fail, "required_rate": required_fail / reps,
            "reported_rate": reported_fail / reps, "mean_p": float(p.mean())}


def power(items: Sequence[Item], checks: Sequence[Check], axis: str, value: str, level: str, reps: int,
          seed: int) -> dict[str, Any]:
    """NOT QUALIFIED rate of a 0.95 model at chance (or 0) on one value, and under the former rule."""
    p = np.array([(1.0 / len(it.options) if level == "chance" else 0.0) if getattr(it, axis) == value else 0.95
                  for it in items])
    rng = np.random.default_rng(seed)
    now = before = by_reported = 0
    for _ in range(reps):
        res = evaluate_gate(checks, draw(rng, items, p, 0.3))
        now += res.gate.status.value == "NOT QUALIFIED"
        by_reported += bool(res.gate.failed_reported) and not (set(res.gate.failed) - set(res.gate.failed_reported))
        # The former rule: required checks' failures only, Holm over the required family alone.
        req = [e for e in res.evidences if e.check.required and e.error is None and e.criteria]
        adj = holm_adjust([fail_p(e) for e in req])
        before += any(a <= e.check.alpha for a, e in zip(adj, req, strict=True))
    return {"axis": axis, "value": value, "level": level, "reps": reps, "now": now / reps, "before": before / reps,
            "by_reported": by_reported / reps}


POWER_CASES = (("task", "ROI Grounding", "chance"), ("task", "View Recognition", "0"), ("part", "Shoulder", "0"),
               ("part", "Brain", "chance"), ("part", "Lungs", "0"), ("modality", "US", "chance"),
               ("modality", "CT", "0"), ("task", "Severity Grading", "chance"))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.failure_everywhere", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--power-reps", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    items, checks = bundled()
    print("| ICC | runs | accuracy checks (required) | false NOT QUALIFIED | MC s.e. | upper 95% | "
          "by a required check | by a reported-only check |")
    print("|--:|--:|--:|--:|--:|--:|--:|--:|")
    for icc in (0.0, 0.3):
        t0 = time.process_time()
        r = false_not_qualified(items, checks, a.reps, a.seed, icc)
        print(f"| {icc} | {r['reps']} | {r['checks']} ({r['required']}) | {r['rate']:.4f} | {mc(r['rate'], r['reps']):.4f} "
              f"| {upper(r['k'], r['reps']):.4f} | {r['required_rate']:.4f} | {r['reported_rate']:.4f} | "
              f"<!-- {time.process_time() - t0:.0f} s CPU -->", flush=True)
    print("\n| 0.95 everywhere but | at | runs | NOT QUALIFIED now | MC s.e. | by reported-only checks alone | "
          "NOT QUALIFIED under the former rule |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for axis, value, level in POWER_CASES:
        t0 = time.process_time()
        r = power(items, checks, axis, value, level, a.power_reps, a.seed)
        print(f"| {axis} {value} | {level} | {r['reps']} | {r['now']:.2f} | {mc(r['now'], r['reps']):.2f} | "
              f"{r['by_reported']:.2f} | {r['before']:.2f} | <!-- {time.process_time() - t0:.0f} s CPU -->", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
