"""`medrcube plan`: how many images of each patient and device subgroup a site must collect.

    medrcube plan --thresholds thresholds.yaml --cube CUBE [--mix ARCHIVE.csv | --mix MIX.yaml]
                  [--distance 0.1] [--accuracy 0.85] [--power 0.8] [--icc 0.3] [--json]

With the policy's `subgroups` section (gate/subgroups.py) and the attribute mix of the
site's archive (`--mix`: a CSV with one row per image, or per group with a `count`
column, whose columns are attribute names; or a YAML/JSON of target shares per attribute,
`{sex: {female: 0.5, male: 0.5}, manufacturer: {GE: 0.6, Siemens: 0.4}}`, combined as
independent) or, without `--mix`, the cube's own mix, it says per stratum how many images
decide the subgroup checks with `--power` for a model `--distance` from each bound
(gate/subgroup_plan.py), how many the cube has, and per joint cell of the attributes what
to collect: "collect 34 more images of sex = female, age_band = 70-79, manufacturer = GE".
Per cell of the cube, the accuracy checks are planned as `medrcube power --thresholds`
does (gate/plan.py).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import sys
from pathlib import Path
from typing import Any

from medrcube.commands.power import _fraction


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--thresholds", required=True, help="the gate policy (with a `subgroups` section)")
    parser.add_argument("--profile", help="a profile of the policy")
    parser.add_argument("--cube", required=True, help="the cube as it is now (its items, images and attributes)")
    parser.add_argument("--mix", help="the archive's attribute mix (CSV) or target shares (YAML/JSON); default: the cube's")
    parser.add_argument("--distance", type=_fraction("--distance", open_interval=True), default=0.1,
                        help="plan for a model this far from each bound (default 0.1)")
    parser.add_argument("--accuracy", type=_fraction("--accuracy", open_interval=True), default=0.85,
                        help="the model's planning accuracy outside a stratum, for the gap checks (default 0.85)")
    parser.add_argument("--power", type=_fraction("--power", open_interval=True), default=0.8,
                        help="probability of deciding each check (default 0.8)")
    parser.add_argument("--icc", type=_fraction("--icc"), default=0.3,
                        help="assumed correlation of the items of one image (default 0.3)")
    parser.add_argument("--top", type=int, default=12, help="joint cells listed (default 12)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")


def _fail(message: str) -> int:
    print(f"medrcube plan: {message}", file=sys.stderr)
    return 2


def read_mix(path: str, by: tuple[str, ...]) -> dict[tuple[tuple[str, str], ...], float]:
    """Joint cells of `by` -> weight, from an archive CSV or a YAML/JSON of shares."""
    from medrcube.cube.attributes import normalise
    from medrcube.gate.subgroup_plan import joint_counts

    p = Path(path)
    if p.suffix.lower() == ".csv":
        with p.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [a for a in by if a not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(f"{path}: no column {', '.join(missing)}; the CSV needs a column per attribute of "
                                 f"subgroups.by ({', '.join(by)}) and optionally `count`")
            rows, weights = [], []
            for n, row in enumerate(reader, start=2):
                rows.append({a: normalise(a, row.get(a)) if a != "age_band" or not row.get(a, "").strip().isdigit()
                             else normalise(a, float(row[a])) for a in by})
                try:
                    weights.append(float(row.get("count") or 1))
                except ValueError:
                    raise ValueError(f"{path} line {n}: count {row.get('count')!r} is not a number") from None
        return joint_counts(rows, by, weights)
    from medrcube.yamlconf import YamlFileError, read_yaml_file

    try:
        data = read_yaml_file(p, missing_fix="give the path of the mix file")
    except YamlFileError as e:
        raise ValueError(str(e)) from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected {{attribute: {{value: share}}}}")
    axes = []
    for a in by:
        shares = data.get(a)
        if not isinstance(shares, dict) or not shares:
            raise ValueError(f"{path}: no shares for {a!r}; write e.g. `{a}: {{VALUE: 0.5, OTHER: 0.5}}`")
        total = sum(float(v) for v in shares.values())
        axes.append([(a, str(k), float(v) / total) for k, v in shares.items()])
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for combo in itertools.product(*axes):
        w = 1.0
        for _, _, s in combo:
            w *= s
        out[tuple((a, v) for a, v, _ in combo)] = w
    return out


def run(args: argparse.Namespace) -> int:
    from medrcube.cube import load_cube
    from medrcube.cube.item import CubeError
    from medrcube.gate.checks import build_checks
    from medrcube.gate.plan import PlanUnit, plan_checks
    from medrcube.gate.subgroup_plan import joint_counts, plan_strata
    from medrcube.gate.subgroups import SECTION
    from medrcube.gate.thresholds import ThresholdsError, load_policy

    try:
        policy = load_policy(args.thresholds, profile=args.profile)
    except ThresholdsError as e:
        return _fail(str(e))
    sp = policy.sections.get(SECTION)
    if sp is None:
        return _fail(f"{args.thresholds} has no `subgroups` section; add e.g. `subgroups: {{by: [sex, age_band, "
                     "manufacturer], min_accuracy: 0.7, max_gap: 0.1}}` (docs/clinical.md)")
    try:
        cube = load_cube(args.cube)
    except CubeError as e:
        return _fail(f"cannot load the cube: {e}")
    images: dict[str, Any] = {}
    for it in cube.items:
        if it.image:
            images.setdefault(it.image, it.attributes)
    rows = [{a: (attrs.get(a) if attrs is not None else "unknown") for a in sp.by} for attrs in images.values()]
    have = {k: int(v) for k, v in joint_counts(rows, sp.by).items()}
    try:
        mix = read_mix(args.mix, sp.by) if args.mix else {k: float(v) for k, v in have.items()}
    except (OSError, ValueError) as e:
        return _fail(str(e))
    per_image = sum(1 for it in cube.items if it.image) / max(1, len(images))
    units = [PlanUnit(it.cell, it.image, len(it.options)) for it in cube.items if it.image]
    # The family a fail claim is Holm-adjusted over: every check of the policy, required and
    # reported alike, on a collection with every stratum of the mix (each at its need).
    mix_strata = {a: {v: 10**6 for cell in mix for b, v in cell if b == a} for a in sp.by}
    family = build_checks(sorted({u.cell for u in units}), policy, strata=mix_strata)
    plan = plan_strata(sp, mix, have, distance=args.distance, accuracy=args.accuracy, power=args.power,
                       items_per_image=per_image, icc=args.icc, family_size=len(family))
    cell_plans = plan_checks(build_checks(sorted({u.cell for u in units}), policy), units, distance=args.distance,
                             icc=args.icc, power=args.power)
    if args.json:
        json.dump({"subgroups": plan.to_dict(), "checks": [p.to_dict() for p in cell_plans]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    mix_label = args.mix or "the cube's own"
    print(f"plan for {cube.source} under {args.thresholds}: {len(images)} images, {per_image:.2f} items per image "
          f"(design effect {plan.design_effect:.2f} at ICC {args.icc:g}); power {args.power:.0%} for a model "
          f"{args.distance:g} from each bound; mix: {mix_label}")
    gap_how = ("harm detectors (subgroups.gap: detect): planned to show a gap {d:g} above max_gap" if plan.gap_rule ==
               "detect" else "required (subgroups.gap: prove): planned to show a gap {d:g} below max_gap and one {d:g} "
               "above").format(d=args.distance)
    print(f"gap checks are {gap_how}; fail claims Holm-adjusted over the family of {plan.family_size} checks")
    print(f"{'stratum':<34} {'share':>6} {'have':>6} {'acc':>6} {'gap':>6} {'need':>6} {'lacking':>8}")
    for s in plan.strata:
        fmt = [str(x) if x is not None else "-" for x in (s.need_accuracy, s.need_gap)]
        print(f"{(s.attribute + ' = ' + s.value)[:34]:<34} {s.share:>6.1%} {s.have:>6} {fmt[0]:>6} {fmt[1]:>6} "
              f"{s.need:>6} {s.lacking:>8}")
    print(f"images needed in all, in the mix's proportions: {plan.total_images} (the cube has {len(images)})")
    short = [c for c in plan.cells if c.lacking][: args.top]
    for c in short:
        print(f"collect {c.lacking} more images of {c.label()} (target {c.target}, have {c.have})")
    if not short:
        print("the cube holds every stratum's need: nothing to collect for the subgroup checks")
    for note in plan.notes:
        print(f"note: {note}")
    lacking_cells = [p for p in cell_plans if not p.enough]
    print(f"cells: {len(cell_plans)} accuracy checks planned, {len(lacking_cells)} short of the items they need "
          f"(`medrcube power --thresholds {args.thresholds} --cube {args.cube}` lists them)")
    return 0
