"""Does the credibility rule catch shortcuts? Operating characteristics (RESULTS.md sections 21, 25, 28).

    .venv/bin/python -m benchmarks.credibility_oc [--reps 100] [--sweep-reps 60] [--bound-reps 400]
                                                  [--table-reps 2000] [--seed 0]
                                                  [--only gate,sweep,bounds,pvalue]

Reuses benchmarks.paper_oc: the shipped thresholds.yaml assessed on the cube as a pytest
run does (gate/feasible.py), its `simulate:`-equivalent models (latent image effects,
ICC 0.3; a grounded model's diagnoses share its perception's image effect with
correlation 0.6, a shortcut model's diagnoses are independent of its perception), and
the real `evaluate_gate`. Three parts:

- `gate`: shortcut models (diagnosis 0.95, independent of perception at 0.9 and at 0.75)
  and a grounded 0.95/0.95 model, on the bundled cube (fixtures/mini) and the paper-scale
  cube, through the whole gate (every check of the shipped policy, Holm over the family):
  how often credibility/overall passes and fails, how often every required credibility
  check passes, how often the gate says QUALIFIED.
- `sweep`: at fixed perception (0.75, 0.9), diagnosis from 0.5 to 0.95, grounded or not,
  on the paper-scale cube: P(credibility/overall passes) and P(every credibility check
  passes) (the credibility checks alone: a pass claim needs no family adjustment).
- `bounds`: the one-sided errors at the bounds, one credibility/overall check alone (its
  level 0.025 before any family adjustment): (i) the dependence route, a grounded model
  whose population odds ratio is both the pass and the fail bound (set at the odds ratio
  of pooled runs; its luck rate far above both luck bounds), false pass and false fail;
  (ii) the luck route under the shipped bounds: a shortcut whose luck rate is the pass
  bound 0.09 (false pass), and one whose luck rate is the fail bound 0.06 (false fail);
  on both cubes.
- `pvalue`: the odds ratio's p-value against its bound (metrics/dependence.py), the
  composite-null one the gate decides with beside the point-null one it replaced: on
  random clustered tables of 2 to 40 images, how often and by how much each is not
  monotone in the bound, and how often and by how much the composite one is larger at
  the shipped bounds (2 and 3); and on the `gate` part's models (pairs of
  credibility/overall), how often the two differ at those bounds.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from benchmarks.paper_oc import HIGH, ROOT, Model, paper_cube, simulate
from medrcube.cube.item import Item
from medrcube.gate.checks import Check, build_checks
from medrcube.gate.evaluate import evaluate_gate
from medrcube.gate.feasible import assess
from medrcube.gate.thresholds import load_policy
from medrcube.metrics.clustered import t_sf
from medrcube.metrics.credibility import chain_pairs
from medrcube.metrics.dependence import Dependence, dependence

OVERALL = "credibility/overall"


def mc(rate: float, reps: int) -> float:
    """Monte Carlo s.e. of a rate, floored at that of one event in `reps`."""
    return math.sqrt(max(rate * (1 - rate), 1.0 / reps) / reps)


def _checks(items: Sequence[Item]) -> list[Check]:
    policy = load_policy(str(ROOT / "thresholds.yaml"))
    return assess(build_checks(sorted({it.cell for it in items}), policy), items, policy)


def model(diagnosis: float, perception: float, grounded: bool) -> Model:
    kind = "grounded" if grounded else "shortcut"
    return Model(f"{kind} {diagnosis}/{perception}", {**{t: diagnosis for t in HIGH}, "*": perception},
                 grounded=grounded)


def gate_rates(items: Sequence[Item], m: Model, reps: int, rng: np.random.Generator) -> dict[str, Any]:
    checks = _checks(items)
    cred_required = [c.id for c in checks if c.kind.value == "credibility" and c.required]
    n = {"overall_pass": 0, "overall_fail": 0, "any_fail": 0, "all_required_pass": 0, "qualified": 0}
    for _ in range(reps):
        res = evaluate_gate(checks, simulate(rng, items, m))
        v = {x.check_id: x.status.value for x in res.verdicts}
        n["overall_pass"] += v.get(OVERALL) == "pass"
        n["overall_fail"] += v.get(OVERALL) == "fail"
        n["any_fail"] += any(s == "fail" for cid, s in v.items() if cid.startswith("credibility/"))
        n["all_required_pass"] += all(v[c] == "pass" for c in cred_required)
        n["qualified"] += res.gate.status.value == "QUALIFIED"
    return {k: x / reps for k, x in n.items()} | {"reps": reps, "required": len(cred_required)}


def sweep(items: Sequence[Item], reps: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    checks = [c for c in _checks(items) if c.kind.value == "credibility"]
    rows = []
    for perception in (0.75, 0.9):
        for grounded in (True, False):
            for diagnosis in (0.5, 0.7, 0.9, 0.95):
                m = model(diagnosis, perception, grounded)
                ov = every = 0
                for _ in range(reps):
                    v = {x.check_id: x.status.value for x in evaluate_gate(checks, simulate(rng, items, m)).verdicts}
                    ov += v[OVERALL] == "pass"
                    every += all(s == "pass" for s in v.values())
                rows.append({"perception": perception, "diagnosis": diagnosis, "grounded": grounded,
                             "overall_pass": ov / reps, "every_pass": every / reps, "reps": reps,
                             "checks": len(checks)})
    return rows


def population_odds_ratio(items: Sequence[Item], m: Model, runs: int, rng: np.random.Generator) -> float:
    """The pair-level odds ratio of a model, pooled over `runs` simulated runs."""
    a = b = c = d = 0
    for _ in range(runs):
        pairs, _ = chain_pairs(simulate(rng, items, m))
        dep = dependence((p.image, p.low.correct, p.high.correct) for p in pairs)
        a, b, c, d = a + dep.A, b + dep.B, c + dep.C, d + dep.D
    return a * c / (b * d)


def at_bound(items: Sequence[Item], m: Model, params: dict[str, Any], reps: int,
             rng: np.random.Generator) -> tuple[float, float]:
    """(false pass, false fail) of credibility/overall alone with the given bounds."""
    (base,) = [c for c in _checks(items) if c.id == OVERALL]
    check = replace(base, required=True, bound=params.get("min_odds_ratio", base.bound),
                    params={**base.params, **params})
    fp = ff = 0
    for _ in range(reps):
        (v,) = evaluate_gate([check], simulate(rng, items, m)).verdicts
        fp += v.status.value == "pass"
        ff += v.status.value == "fail"
    return fp / reps, ff / reps


def bounds(cubes: dict[str, list[Item]], reps: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """The one-sided errors at the bounds, credibility/overall alone (level 0.025; the pass
    side's odds-ratio route at its share, the fail side at the full level)."""
    rows = []
    for name, items in cubes.items():
        g = model(0.7, 0.75, True)
        theta = population_odds_ratio(items, g, 400 if name == "mini" else 600, rng)
        at = {"min_odds_ratio": theta, "max_luck_rate": 0.01, "shortcut_odds_ratio": theta, "shortcut_luck_rate": 0.01}
        fp, ff = at_bound(items, g, at, reps, rng)
        rows.append({"cube": name, "route": f"odds ratio at its pass and fail bound ({theta:.2f}; luck rate ~0.18, "
                     "its bounds 0.01)", "false_pass": fp, "false_fail": ff, "reps": reps})
        shipped = {"min_odds_ratio": 2.0, "max_luck_rate": 0.09, "shortcut_odds_ratio": 3.0, "shortcut_luck_rate": 0.06}
        fp, _ = at_bound(items, model(0.95, 0.91, False), shipped, reps, rng)
        _, ff = at_bound(items, model(0.95, 0.94, False), shipped, reps, rng)
        rows.append({"cube": name, "route": "luck rate at its pass bound 0.09 (false pass) and at its fail bound 0.06 "
                     "(false fail); odds ratio 1", "false_pass": fp, "false_fail": ff, "reps": reps})
    return rows


def random_table(rng: np.random.Generator, images: int) -> list[tuple[str, bool, bool]]:
    """Pairs on `images` images (1 to 8 each), each image with its own perception and
    diagnosis rates (uniform on [0.05, 0.95] and [0, 1]): clustered, any dependence."""
    rows: list[tuple[str, bool, bool]] = []
    for j in range(images):
        size = int(rng.integers(1, 9))
        low = rng.random(size) < rng.uniform(0.05, 0.95)
        high = rng.random(size) < rng.uniform(0.0, 1.0)
        rows += [(f"i{j}", bool(lo), bool(hi)) for lo, hi in zip(low, high, strict=True)]
    return rows


def _point(dep: Dependence, bound: float, at_most: bool) -> float:
    """The point-null p-value at the bound alone (what the gate decided with before)."""
    z = dep.z(bound)
    return t_sf(z if at_most else -z, dep.images - 1.0)


# The levels the shipped rule decides at: a pass by the odds ratio's route at 0.2 of the
# one-sided 0.025, a fail at credibility/overall's first Holm step (0.25 of 0.025).
PASS_LEVEL, FAIL_LEVEL = 0.005, 0.00625


def _changed(dep: Dependence) -> bool:
    """Would the point-null p-value have decided where the composite one does not (a pass
    at 2, or a fail at 3, at the shipped levels)?"""
    return ((_point(dep, 2.0, True) <= PASS_LEVEL < dep.p_at_most(2.0))
            or (_point(dep, 3.0, False) <= FAIL_LEVEL < dep.p_at_least(3.0)))


def p_values(rng: np.random.Generator, reps: int) -> list[dict[str, Any]]:
    """Monotonicity in the bound and the composite's cost, on random clustered tables."""
    rows = []
    grid = (0.5, 1.0, 2.0, 4.0)
    for images in (2, 3, 5, 10, 20, 30, 40):
        defined = 0
        turns = {"point": 0, "composite": 0}
        worst = {"point": 0.0, "composite": 0.0}
        moved = changed = 0
        moved_by = 0.0
        for _ in range(reps):
            dep = dependence(random_table(rng, images))
            if not dep.defined:
                continue
            defined += 1
            for name, ps in (("point", [_point(dep, b, True) for b in grid]),
                             ("composite", [dep.p_at_most(b) for b in grid])):
                drop = max(x - y for x, y in zip(ps, ps[1:], strict=False))
                turns[name] += drop > 1e-12
                worst[name] = max(worst[name], drop)
            gap = max(dep.p_at_most(2.0) - _point(dep, 2.0, True), dep.p_at_least(3.0) - _point(dep, 3.0, False))
            moved += gap > 1e-9
            moved_by = max(moved_by, gap)
            changed += _changed(dep)
        rows.append({"images": images, "tables": defined, "point_turns": turns["point"] / defined,
                     "point_worst": worst["point"], "composite_turns": turns["composite"] / defined,
                     "composite_worst": worst["composite"], "moved": moved / defined, "moved_by": moved_by,
                     "changed": changed / defined})
    return rows


def p_values_in_runs(cubes: dict[str, list[Item]], reps: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """On credibility/overall's pairs of the `gate` part's models: how often the composite
    p-value differs from the point one at the shipped bounds (2: a pass, 3: a fail)."""
    rows = []
    for name, items in cubes.items():
        for m in (model(0.95, 0.9, False), model(0.95, 0.75, False), model(0.95, 0.95, True), model(0.7, 0.75, True)):
            moved = changed = 0
            moved_by = 0.0
            for _ in range(reps):
                pairs, _ = chain_pairs(simulate(rng, items, m))
                dep = dependence((p.image, p.low.correct, p.high.correct) for p in pairs)
                if not dep.defined:
                    continue
                gap = max(dep.p_at_most(2.0) - _point(dep, 2.0, True), dep.p_at_least(3.0) - _point(dep, 3.0, False))
                moved += gap > 1e-9
                moved_by = max(moved_by, gap)
                changed += _changed(dep)
            rows.append({"cube": name, "model": m.name, "moved": moved / reps, "moved_by": moved_by,
                         "changed": changed / reps, "reps": reps})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.credibility_oc", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--sweep-reps", type=int, default=60)
    ap.add_argument("--bound-reps", type=int, default=400)
    ap.add_argument("--table-reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="gate,sweep,bounds,pvalue")
    ap.add_argument("--cubes", default="mini,paper")
    a = ap.parse_args(argv)
    from medrcube.cube import load_cube

    parts = a.only.split(",")
    rng = np.random.default_rng(a.seed)
    cubes = {"mini": list(load_cube(str(ROOT / "fixtures" / "mini")).items), "paper": paper_cube()}
    cubes = {k: v for k, v in cubes.items() if k in a.cubes.split(",")}
    if "gate" in parts:
        print("| cube | model | overall passes | overall fails | some credibility check fails | every required "
              "credibility check passes | QUALIFIED | reps |")
        print("|---|---|--:|--:|--:|--:|--:|--:|")
        for name, items in cubes.items():
            for m in (model(0.95, 0.9, False), model(0.95, 0.75, False), model(0.95, 0.95, True)):
                t0 = time.process_time()
                r = gate_rates(items, m, a.reps, rng)
                print(f"| {name} | {m.name} | {r['overall_pass']:.2f} | {r['overall_fail']:.2f} | {r['any_fail']:.2f} "
                      f"| {r['all_required_pass']:.2f} | {r['qualified']:.2f} | {r['reps']} | "
                      f"<!-- {time.process_time() - t0:.0f} s CPU -->", flush=True)
    if "sweep" in parts and "paper" in cubes:
        print("\n| perception | diagnosis | model | P(overall passes) | P(every credibility check passes) | reps |")
        print("|--:|--:|---|--:|--:|--:|")
        for r in sweep(cubes["paper"], a.sweep_reps, rng):
            print(f"| {r['perception']} | {r['diagnosis']} | {'grounded' if r['grounded'] else 'shortcut'} | "
                  f"{r['overall_pass']:.2f} | {r['every_pass']:.2f} | {r['reps']} |", flush=True)
    if "bounds" in parts:
        print("\n| cube | route at its bound | false pass | false fail | MC s.e. (worst) | reps |")
        print("|---|---|--:|--:|--:|--:|")
        for r in bounds(cubes, a.bound_reps, rng):
            worst = max(r["false_pass"], r["false_fail"])
            print(f"| {r['cube']} | {r['route']} | {r['false_pass']:.3f} | {r['false_fail']:.3f} | "
                  f"{mc(worst, r['reps']):.3f} | {r['reps']} |", flush=True)
    if "pvalue" in parts:
        print("\n| images | tables | point p not monotone | worst drop | composite p not monotone | worst drop | "
              "composite > point at 2 or 3 | by at most | a decision at 2 or 3 changed |")
        print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        for r in p_values(rng, a.table_reps):
            print(f"| {r['images']} | {r['tables']} | {r['point_turns']:.3f} | {r['point_worst']:.3f} | "
                  f"{r['composite_turns']:.3f} | {r['composite_worst']:.3f} | {r['moved']:.3f} | "
                  f"{r['moved_by']:.3f} | {r['changed']:.3f} |", flush=True)
        print("\n| cube | model | composite differs from point at 2 or 3 | by at most | a decision changed | reps |")
        print("|---|---|--:|--:|--:|--:|")
        for r in p_values_in_runs(cubes, a.reps, rng):
            print(f"| {r['cube']} | {r['model']} | {r['moved']:.2f} | {r['moved_by']:.2g} | {r['changed']:.2f} | "
                  f"{r['reps']} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
