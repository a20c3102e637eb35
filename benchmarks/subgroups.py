"""Operating characteristics of the subgroup checks, and `medrcube plan`'s counts, by simulation.

    python -m benchmarks.subgroups [--reps 200] [--plan-reps 100] [--seed 1] [--json]

Every figure runs the gate's real decision core (gate.evaluate.evaluate_gate on
GradedRecords, with the checks gate.checks.build_checks makes from the policy and the
strata) on records of a simulated model: each image has a manufacturer (GE, Siemens,
Philips in shares 0.4, 0.35, 0.25), a sex (half and half) and an age band (50-59, 60-69,
70-79 in shares 0.3, 0.4, 0.3), each in exact shares, crossed at random; two items per image; an item is right
when sqrt(icc) u_image + sqrt(1 - icc) e_item < Phi^-1(p), p the accuracy of the image's
stratum (icc 0.3), drawn with numpy.

1. Both directions of the subgroup policy `{by: [manufacturer, sex, age_band],
   min_accuracy: 0.7, max_gap: 0.1}` (16 subgroup checks) beside a base policy (overall
   accuracy >= 0.7 only), on 600 images (strata of 150 to 300 images) and 1,200:
   - an even model (0.85 everywhere): QUALIFIED as often with the section as without,
     under the default rule (`gap: detect`, the gap checks harm detectors) and, for
     comparison, under `gap: prove` (every gap shown below max_gap); never NOT QUALIFIED
     beyond the level;
   - a model 0.25 worse on Siemens, or on the age band 70-79 (0.60 there): NOT QUALIFIED
     with that stratum named, where the base policy qualifies it;
   - a stratum 0.15, 0.20 or 0.25 below an excellent rest (0.95) yet at or above
     min_accuracy: only the gap detector can stop it (its power);
   - at the boundary (Siemens exactly max_gap below the rest): NOT QUALIFIED at most the
     fail claim's level 2.5% (the gap is not above max_gap), and under `gap: prove`
     QUALIFIED at most 2.5% (its pass claim).
2. `medrcube plan` (gate/subgroup_plan.py) for the manufacturer mix above, a model 0.1 from
   each bound (planning accuracy 0.85), under the default `gap: detect`: a collection with
   the planned images of one stratum (and the rest in the mix's proportions) decides that
   stratum's checks in the planned direction at least 80% of the time: its accuracy check
   for a model at min_accuracy +- 0.1, its gap detector for a gap of max_gap + 0.1; and
   under `gap: prove` also its gap check's pass for a gap of max_gap - 0.1.

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
AGES = ("50-59", "60-69", "70-79")
AGE_SHARES = (0.3, 0.4, 0.3)
ICC = 0.3
PER_IMAGE = 2
ALPHA = 0.025
BY = ("manufacturer", "sex", "age_band")
SUBGROUPS = {"by": list(BY), "min_accuracy": 0.7, "max_gap": 0.1}

Accuracy = Mapping[str, float]  # "*": everywhere else; "VALUE": the images of that stratum (any attribute)


def policy(subgroups: Mapping[str, Any] | None) -> Any:
    doc: dict[str, Any] = {"version": 1, "defaults": {"rule": "lower_bound", "confidence": 0.95},
                           "overall": {"bound": 0.7, "above_chance": 0.0}}
    if subgroups:
        doc["subgroups"] = dict(subgroups)
    return policy_from_dict(doc, source="benchmarks.subgroups")


def layout(counts: Mapping[str, int], rng: np.random.Generator) -> list[Attributes]:
    """Per image: its manufacturer, sex and age band, each in its exact shares, sex and age band
    assigned to the images at random (so the three attributes cross at random)."""
    vendors = [v for v, n in counts.items() for _ in range(n)]
    n = len(vendors)
    sexes = rng.permutation(np.array(["female", "male"] * (n // 2) + ["female"] * (n % 2)))
    k = [round(n * s) for s in AGE_SHARES[:-1]]
    ages = rng.permutation(np.array([a for a, m in zip(AGES, [*k, n - sum(k)], strict=True) for _ in range(m)]))
    return [Attributes(sex=str(s), age_band=str(a), manufacturer=v) for v, s, a in zip(vendors, sexes, ages, strict=True)]


def _accuracy_of(a: Attributes, accuracy: Accuracy) -> float:
    for name in BY:
        if a.get(name) in accuracy:
            return accuracy[a.get(name)]
    return accuracy["*"]


def records(rng: np.random.Generator, attrs: Sequence[Attributes], accuracy: Accuracy) -> list[GradedRecord]:
    n_img = len(attrs)
    p = np.repeat(np.array([_accuracy_of(a, accuracy) for a in attrs]), PER_IMAGE)
    u = np.repeat(rng.standard_normal(n_img), PER_IMAGE)
    ok = (math.sqrt(ICC) * u + math.sqrt(1 - ICC) * rng.standard_normal(n_img * PER_IMAGE)) < norm.ppf(p)
    out = []
    for i, good in enumerate(ok.tolist()):
        img = i // PER_IMAGE
        out.append(GradedRecord(
            item_id=f"i{i}", dataset="sim", task=CELL[2], modality=CELL[1], part=CELL[0], image=f"img{img}",
            image_digest=None, variant="standard", rotation=0, answer=0, n_options=4, prompt_hash="h",
            response=None, extracted=0 if good else 1, how="bare_letter",
            outcome=Outcome.CORRECT if good else Outcome.WRONG, attributes=attrs[img]))
    return out


def strata_of(attrs: Sequence[Attributes], by: Sequence[str] = BY) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {a: {} for a in by}
    for at in attrs:
        for name in by:
            v = at.get(name)
            out[name][v] = out[name].get(v, 0) + 1
    return out


def mc(rate: float, reps: int) -> float:
    """The Monte Carlo standard error of a rate (at least that of one run in `reps`)."""
    return math.sqrt(max(rate * (1 - rate), 1.0 / reps) / reps)


def gate_rates(reps: int, seed: int, accuracy: Accuracy, *, images: int = 600,
               subgroups: Mapping[str, Any] | None = SUBGROUPS, stratum: str = "") -> dict[str, Any]:
    """The gate's verdict rates over `reps` simulated runs; with `stratum` ("manufacturer/Siemens"):
    how often a check of that stratum failed (`named`), how often a check of another stratum
    failed (`other_named`), and which of its two checks failed."""
    rng = np.random.default_rng(seed)
    counts = dict(zip(VENDORS, (round(images * s) for s in SHARES), strict=True))
    pol = policy(subgroups)
    tally = {s.value: 0 for s in GateStatus}
    named = other = acc_failed = gap_failed = 0
    sizes: list[int] = []
    for _ in range(reps):
        attrs = layout(counts, rng)
        st = strata_of(attrs)
        sizes += [n for a in BY for n in st[a].values()]
        res = evaluate_gate(build_checks([CELL], pol, strata=st), records(rng, attrs, accuracy))
        tally[res.gate.status.value] += 1
        failed = [v.check_id for v in res.verdicts if v.status is Status.FAIL and v.check_id.startswith("subgroup")]
        mine = [c for c in failed if stratum and c.endswith("/" + stratum)]
        named += bool(mine)
        other += any(c not in mine for c in failed)
        acc_failed += f"subgroup/{stratum}" in mine
        gap_failed += f"subgroup_gap/{stratum}" in mine
    out: dict[str, Any] = {k: v / reps for k, v in tally.items()}
    out.update(named=named / reps, other_named=other / reps, accuracy_failed=acc_failed / reps,
               gap_failed=gap_failed / reps, strata_images=[min(sizes), max(sizes)], reps=reps,
               mc_se_qualified=mc(tally["QUALIFIED"] / reps, reps),
               mc_se_not_qualified=mc(tally["NOT QUALIFIED"] / reps, reps))
    return out


def plan_rates(reps: int, seed: int, *, distance: float = 0.1, accuracy: float = 0.85,
               power: float = 0.8, gap: str = "detect",
               only: Sequence[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """Per stratum and planned direction: how often the stratum's check decided as planned when
    the collection holds exactly the plan's images of that stratum (the rest in the mix).
    `gap`: the policy's rule; under `prove` the gap check's pass direction is planned too.
    `only`: the (check, direction) rows to simulate (default all the rule plans)."""
    sub = {"by": ["manufacturer"], "min_accuracy": 0.7, "max_gap": 0.1, "gap": gap}
    pol = policy(sub)
    sp = pol.sections["subgroups"]
    mix = {(("manufacturer", v),): s for v, s in zip(VENDORS, SHARES, strict=True)}
    family = build_checks([CELL], pol, strata={"manufacturer": {v: 10**6 for v in VENDORS}})
    plan = plan_strata(sp, mix, {}, distance=distance, accuracy=accuracy, power=power, items_per_image=PER_IMAGE,
                       icc=ICC, family_size=len(family))
    rng = np.random.default_rng(seed)
    rows = []
    for st in plan.strata:
        total = st.need / st.share
        counts = {v: (st.need if v == st.value else round(total * s)) for v, s in zip(VENDORS, SHARES, strict=True)}
        attrs = [Attributes(manufacturer=v) for v, n in counts.items() for _ in range(n)]
        checks = build_checks([CELL], pol, strata=strata_of(attrs, ("manufacturer",)))
        b, g = sp.min_accuracy, sp.max_gap
        scenarios = [  # gap: detect plans the detector's fail direction only
            ("accuracy", "pass", {st.value: b + distance, "*": accuracy}, st.need_accuracy),
            ("accuracy", "fail", {st.value: b - distance, "*": accuracy}, st.need_accuracy),
            ("gap", "fail", {st.value: accuracy - (g + distance), "*": accuracy}, st.need_gap),
        ]
        if gap == "prove":
            scenarios.append(("gap", "pass", {st.value: accuracy - (g - distance), "*": accuracy}, st.need_gap))
        for kind, want, acc, need in scenarios:
            if only is not None and (kind, want) not in only:
                continue
            cid = f"subgroup{'_gap' if kind == 'gap' else ''}/manufacturer/{st.value}"
            decided = 0
            for _ in range(reps):
                res = evaluate_gate(checks, records(rng, attrs, acc))
                v = res.by_id()[cid]
                decided += v.status is (Status.PASS if want == "pass" else Status.FAIL)
            rate = decided / reps
            rows.append({"rule": gap, "stratum": st.value, "check": kind, "direction": want, "images_of_stratum": st.need,
                         "planned_for_this_check": need, "collection_images": sum(counts.values()),
                         "decided": rate, "mc_se": mc(rate, reps), "reps": reps, "power": power,
                         "family_size": plan.family_size, "ok": rate + 2 * mc(rate, reps) >= power})
    return rows


EVEN = {"*": 0.85}
SCENARIOS: tuple[tuple[str, str, Accuracy, dict[str, Any]], ...] = (
    # (name, the stratum to name, accuracies, gate_rates keywords)
    ("even, detect", "", EVEN, {}),
    ("even, prove", "", EVEN, {"subgroups": {**SUBGROUPS, "gap": "prove"}}),
    ("even, without the section", "", EVEN, {"subgroups": None}),
    ("even, detect, 1200 images", "", EVEN, {"images": 1200}),
    ("even, without the section, 1200 images", "", EVEN, {"images": 1200, "subgroups": None}),
    ("Siemens 0.25 worse, detect", "manufacturer/Siemens", {"*": 0.85, "Siemens": 0.60}, {}),
    ("Siemens 0.25 worse, without the section", "manufacturer/Siemens", {"*": 0.85, "Siemens": 0.60},
     {"subgroups": None}),
    ("age 70-79 0.25 worse, detect", "age_band/70-79", {"*": 0.85, "70-79": 0.60}, {}),
    ("age 70-79 0.25 worse, without the section", "age_band/70-79", {"*": 0.85, "70-79": 0.60},
     {"subgroups": None}),
    ("age 70-79 0.25 worse, detect, 1200 images", "age_band/70-79", {"*": 0.85, "70-79": 0.60}, {"images": 1200}),
    ("Siemens gap 0.15 above min_accuracy, detect", "manufacturer/Siemens", {"*": 0.95, "Siemens": 0.80}, {}),
    ("Siemens gap 0.20 above min_accuracy, detect", "manufacturer/Siemens", {"*": 0.95, "Siemens": 0.75}, {}),
    ("Siemens gap 0.25 at min_accuracy, detect", "manufacturer/Siemens", {"*": 0.95, "Siemens": 0.70}, {}),
    ("age 70-79 gap 0.25 at min_accuracy, detect", "age_band/70-79", {"*": 0.95, "70-79": 0.70}, {}),
    ("boundary: Siemens gap = max_gap, detect", "manufacturer/Siemens", {"*": 0.85, "Siemens": 0.75}, {}),
    ("boundary: Siemens gap = max_gap, prove", "manufacturer/Siemens", {"*": 0.85, "Siemens": 0.75},
     {"subgroups": {**SUBGROUPS, "gap": "prove"}}),
)


def run(reps: int = 200, plan_reps: int = 100, seed: int = 1, *, only_plan: bool = False) -> dict[str, Any]:
    plan = plan_rates(plan_reps, seed + 100) + plan_rates(plan_reps, seed + 200, gap="prove", only=[("gap", "pass")])
    if only_plan:
        return {"reps": 0, "plan_reps": plan_reps, "seed": seed, "oc": {}, "plan": plan}
    oc = {}
    for name, stratum, acc, kw in SCENARIOS:
        # The arms of one comparison share a seed: the same images and answers, decided under each policy.
        base = name.split(",")[0]
        oc[name] = {"stratum": stratum, **gate_rates(reps, seed + hash_seed(base), acc, stratum=stratum, **kw)}
    return {"reps": reps, "plan_reps": plan_reps, "seed": seed, "oc": oc, "plan": plan}


def hash_seed(text: str) -> int:
    """A stable small offset per scenario family (Python's hash() is salted per process)."""
    return sum((i + 1) * ord(ch) for i, ch in enumerate(text)) % 10_007


def markdown(res: Mapping[str, Any], seconds: float) -> str:
    lines = ["| model, policy | images per stratum | QUALIFIED | NOT QUALIFIED | UNDECIDED | stratum named "
             "(its accuracy / gap check failed) | another stratum named | reps |",
             "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for key, r in res["oc"].items():
        lo, hi = r["strata_images"]
        named = (f"{r['named']:.3f} ({r['accuracy_failed']:.2f} / {r['gap_failed']:.2f})" if r["stratum"] else "-")
        lines.append(f"| {key} | {lo}-{hi} | {r['QUALIFIED']:.3f} ± {r['mc_se_qualified']:.3f} | "
                     f"{r['NOT QUALIFIED']:.3f} ± {r['mc_se_not_qualified']:.3f} | {r['UNDECIDED']:.3f} | {named} | "
                     f"{r['other_named']:.3f} | {r['reps']} |")
    lines += ["", "| gap rule | stratum | check | direction | images of the stratum (plan) | collection | "
              "decided as planned | MC s.e. | power | |", "|---|---|---|---|--:|--:|--:|--:|--:|---|"]
    for r in res["plan"]:
        lines.append(f"| {r.get('rule', 'detect')} | {r['stratum']} | {r['check']} | {r['direction']} | {r['images_of_stratum']} "
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
