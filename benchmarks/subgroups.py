"""Operating characteristics of the subgroup checks, and `medrcube plan`'s counts, by simulation.

    python -m benchmarks.subgroups [--reps 200] [--plan-reps 100] [--seed 1] [--json]

Every figure runs the gate's real decision core (gate.evaluate.evaluate_gate on
GradedRecords, with the checks gate.checks.build_checks makes from the policy and the
strata) on records of a simulated model: each image has a manufacturer (GE, Siemens,
Philips in shares 0.4, 0.35, 0.25) and a sex (half and half), two items per image, and an
item is right when sqrt(icc) u_image + sqrt(1 - icc) e_item < Phi^-1(p) with p the
accuracy of its image's stratum (icc 0.3), drawn with numpy.

1. Both directions of the subgroup policy `{by: [manufacturer, sex], min_accuracy: 0.7,
   max_gap: 0.1}` on 600 images beside a base policy (overall accuracy >= 0.7 only):
   - an even model (0.85 everywhere): QUALIFIED as often with the policy as without;
   - a model 0.25 worse on Siemens (0.60 there): NOT QUALIFIED with Siemens named, where
     the base policy qualifies it;
   - at the boundary (Siemens exactly max_gap = 0.1 below the rest, 0.85 elsewhere):
     QUALIFIED at most alpha = 2.5% of the time (the pass claim's level).
2. `medrcube plan` (gate/subgroup_plan.py) for the manufacturer mix above, a model 0.1 from
   each bound (planning accuracy 0.85): a collection with the planned images of one
   stratum (and the rest in the mix's proportions) decides that stratum's checks in the
   planned direction at least 80% of the time: its accuracy check for a model at
   min_accuracy +- 0.1, its gap check for a gap of max_gap -+ 0.1.

Each rate carries its Monte Carlo standard error; a figure is ok when within its level
plus two of them.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.stats import norm

from medrcube.gate.checks import build_checks
from medrcube.gate.evaluate import evaluate_gate
from medrcube.gate.subgroup_plan import plan_strata
from medrcube.gate.thresholds import policy_from_dict
from medrcube.gate.verdict import GateStatus, Status
from medrcube.records import Attributes, GradedRecord, Outcome

CELL = ("Chest", "X-Ray", "Disease Diagnosis")
VENDORS = ("GE", "Siemens", "Philips")
SHARES = (0.4, 0.35, 0.25)
ICC = 0.3
PER_IMAGE = 2
ALPHA = 0.025
SUBGROUPS = {"by": ["manufacturer", "sex"], "min_accuracy": 0.7, "max_gap": 0.1}


def policy(subgroups: Mapping[str, Any] | None) -> Any:
    doc: dict[str, Any] = {"version": 1, "defaults": {"rule": "lower_bound", "confidence": 0.95},
                           "overall": {"bound": 0.7, "above_chance": 0.0}}
    if subgroups:
        doc["subgroups"] = dict(subgroups)
    return policy_from_dict(doc, source="benchmarks.subgroups")


def layout(counts: Mapping[str, int], rng: np.random.Generator) -> tuple[list[str], list[str]]:
    """Per image: its manufacturer and sex."""
    vendors = [v for v, n in counts.items() for _ in range(n)]
    sexes = list(rng.choice(["female", "male"], size=len(vendors)))
    return vendors, [str(s) for s in sexes]


def records(rng: np.random.Generator, vendors: Sequence[str], sexes: Sequence[str],
            accuracy: Mapping[str, float]) -> list[GradedRecord]:
    n_img = len(vendors)
    p = np.repeat(np.array([accuracy.get(v, accuracy["*"]) for v in vendors]), PER_IMAGE)
    u = np.repeat(rng.standard_normal(n_img), PER_IMAGE)
    ok = (math.sqrt(ICC) * u + math.sqrt(1 - ICC) * rng.standard_normal(n_img * PER_IMAGE)) < norm.ppf(p)
    out = []
    attrs = [Attributes(sex=s, manufacturer=v) for v, s in zip(vendors, sexes, strict=True)]
    for i, good in enumerate(ok.tolist()):
        img = i // PER_IMAGE
        out.append(GradedRecord(
            item_id=f"i{i}", dataset="sim", task=CELL[2], modality=CELL[1], part=CELL[0], image=f"img{img}",
            image_digest=None, variant="standard", rotation=0, answer=0, n_options=4, prompt_hash="h",
            response=None, extracted=0 if good else 1, how="bare_letter",
            outcome=Outcome.CORRECT if good else Outcome.WRONG, attributes=attrs[img]))
    return out


def strata_of(vendors: Sequence[str], sexes: Sequence[str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {"manufacturer": {}, "sex": {}}
    for v, s in zip(vendors, sexes, strict=True):
        out["manufacturer"][v] = out["manufacturer"].get(v, 0) + 1
        out["sex"][s] = out["sex"].get(s, 0) + 1
    return out


def mc(rate: float, reps: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1.0 / reps) / reps)


def gate_rates(reps: int, seed: int, accuracy: Mapping[str, float], *, images: int = 600,
               subgroups: Mapping[str, Any] | None = SUBGROUPS, named: str = "") -> dict[str, float]:
    """The gate's verdict rates over `reps` simulated runs, and how often check `named` failed."""
    rng = np.random.default_rng(seed)
    counts = dict(zip(VENDORS, (round(images * s) for s in SHARES), strict=True))
    pol = policy(subgroups)
    tally = {s.value: 0 for s in GateStatus}
    hit = 0
    for _ in range(reps):
        vendors, sexes = layout(counts, rng)
        checks = build_checks([CELL], pol, strata=strata_of(vendors, sexes))
        res = evaluate_gate(checks, records(rng, vendors, sexes, accuracy))
        tally[res.gate.status.value] += 1
        hit += any(v.check_id == named and v.status is Status.FAIL for v in res.verdicts)
    out = {k: v / reps for k, v in tally.items()}
    out["named"] = hit / reps
    return out


def plan_rates(reps: int, seed: int, *, distance: float = 0.1, accuracy: float = 0.85,
               power: float = 0.8) -> list[dict[str, Any]]:
    """Per stratum and direction: how often the stratum's check decided as planned when the
    collection holds exactly the plan's images of that stratum (the rest in the mix)."""
    sub = {"by": ["manufacturer"], "min_accuracy": 0.7, "max_gap": 0.1}
    pol = policy(sub)
    sp = pol.sections["subgroups"]
    mix = {(("manufacturer", v),): s for v, s in zip(VENDORS, SHARES, strict=True)}
    family = build_checks([CELL], pol, strata={"manufacturer": {v: 10**6 for v in VENDORS}})
    plan = plan_strata(sp, mix, {}, distance=distance, accuracy=accuracy, power=power, items_per_image=PER_IMAGE,
                       icc=ICC, required_checks=sum(c.required for c in family))
    rng = np.random.default_rng(seed)
    rows = []
    for st in plan.strata:
        total = st.need / st.share
        counts = {v: (st.need if v == st.value else round(total * s)) for v, s in zip(VENDORS, SHARES, strict=True)}
        b, g = sp.min_accuracy, sp.max_gap
        scenarios = (
            ("accuracy", "pass", {st.value: b + distance, "*": accuracy}, st.need_accuracy),
            ("accuracy", "fail", {st.value: b - distance, "*": accuracy}, st.need_accuracy),
            ("gap", "pass", {st.value: accuracy - (g - distance), "*": accuracy}, st.need_gap),
            ("gap", "fail", {st.value: accuracy - (g + distance), "*": accuracy}, st.need_gap),
        )
        for kind, want, acc, need in scenarios:
            cid = f"subgroup{'_gap' if kind == 'gap' else ''}/manufacturer/{st.value}"
            decided = 0
            for _ in range(reps):
                vendors = [v for v, n in counts.items() for _ in range(n)]
                sexes = ["female"] * len(vendors)
                checks = build_checks([CELL], pol, strata=strata_of(vendors, sexes))
                res = evaluate_gate(checks, records(rng, vendors, sexes, acc))
                v = next(x for x in res.verdicts if x.check_id == cid)
                decided += v.status is (Status.PASS if want == "pass" else Status.FAIL)
            rate = decided / reps
            rows.append({"stratum": st.value, "check": kind, "direction": want, "images_of_stratum": st.need,
                         "planned_for_this_check": need, "collection_images": sum(counts.values()),
                         "decided": rate, "mc_se": mc(rate, reps), "reps": reps, "power": power,
                         "ok": rate + 2 * mc(rate, reps) >= power})
    return rows


def run(reps: int = 200, plan_reps: int = 100, seed: int = 1, *, only_plan: bool = False) -> dict[str, Any]:
    if only_plan:
        return {"reps": 0, "plan_reps": plan_reps, "seed": seed, "oc": {}, "plan": plan_rates(plan_reps, seed + 3)}
    even = {"*": 0.85}
    worse = {"*": 0.85, "Siemens": 0.60}
    boundary = {"*": 0.85, "Siemens": 0.75}
    name = "subgroup_gap/manufacturer/Siemens"
    oc = {
        "even_with_policy": gate_rates(reps, seed, even, named=name),
        "even_without_policy": gate_rates(reps, seed, even, subgroups=None),
        "worse_with_policy": gate_rates(reps, seed + 1, worse, named=name),
        "worse_without_policy": gate_rates(reps, seed + 1, worse, subgroups=None),
        "boundary_with_policy": gate_rates(reps, seed + 2, boundary, named=name),
        "even_with_policy_1200_images": gate_rates(reps, seed + 4, even, images=1200, named=name),
        "even_without_policy_1200_images": gate_rates(reps, seed + 4, even, images=1200, subgroups=None),
    }
    for v in oc.values():
        v["mc_se_qualified"] = mc(v["QUALIFIED"], reps)
    return {"reps": reps, "plan_reps": plan_reps, "seed": seed, "oc": oc, "plan": plan_rates(plan_reps, seed + 3)}


def markdown(res: Mapping[str, Any], seconds: float) -> str:
    lines = ["| model | policy | QUALIFIED | NOT QUALIFIED | UNDECIDED | Siemens gap failed | reps |",
             "|---|---|--:|--:|--:|--:|--:|"]
    for key, r in res["oc"].items():
        model, _, pol = key.partition("_")
        lines.append(f"| {model} | {pol.replace('_', ' ')} | {r['QUALIFIED']:.3f} ± {r['mc_se_qualified']:.3f} | "
                     f"{r['NOT QUALIFIED']:.3f} | {r['UNDECIDED']:.3f} | {r.get('named', 0):.3f} | {res['reps']} |")
    lines += ["", "| stratum | check | direction | images of the stratum (plan) | collection | decided as planned | "
              "MC s.e. | power | |", "|---|---|---|--:|--:|--:|--:|--:|---|"]
    for r in res["plan"]:
        lines.append(f"| {r['stratum']} | {r['check']} | {r['direction']} | {r['images_of_stratum']} "
                     f"({r['planned_for_this_check']}) | {r['collection_images']} | {r['decided']:.3f} | "
                     f"{r['mc_se']:.3f} | {r['power']:.2f} | {'ok' if r['ok'] else 'MISS'} |")
    lines.append(f"\n({seconds:.0f} s; `python -m benchmarks.subgroups`)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--plan-reps", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only-plan", action="store_true", help="the plan's figures only")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    res = run(args.reps, args.plan_reps, args.seed, only_plan=args.only_plan)
    print(json.dumps(res, indent=2) if args.json else markdown(res, time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
