"""`medrcube power`: how likely a check is to pass, and how many items it needs.

    medrcube power --rule lower_bound --confidence 0.95 --bound 0.6 --accuracy 0.7 [--n 50]
                   [--deff 1.6 | --icc 0.3 --items-per-image 3] [--checks 40]
    medrcube power --thresholds thresholds.yaml --cube CUBE [--profile NAME] [--distance 0.1] [--icc 0.3]

The first form: one check. The exact binomial figures assume independent items; with
--deff (or --icc and --items-per-image) it also prints the items needed when several
questions share an image (Kish's design effect), and with --checks M what a gate of M
required checks of this kind needs for all of them to pass with the target power.

The second form (planning a site cube): per accuracy check of the policy on the cube,
the items it has and the items it needs to decide with 80% power for a model
--distance away from its bound, with the cube's own items per image and the assumed
--icc (gate/plan.py).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable

from medrcube.commands.numbers import whole_number
from medrcube.gate.power import DEFAULT_POWER, RULES, clustered_power, power_report, score_required_n


def _fraction(name: str, *, open_interval: bool = False) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number between 0 and 1, got {text!r}") from None
        if open_interval and not 0.0 < value < 1.0:
            raise argparse.ArgumentTypeError(f"{name} must be strictly between 0 and 1, got {text}")
        if not 0.0 <= value <= 1.0:
            hint = f" (write {value / 100:g} for {value:g}%)" if 1 < value <= 100 else ""
            raise argparse.ArgumentTypeError(f"{name} must be between 0 and 1, got {text}{hint}")
        return value

    return parse


def _at_least_one(name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number >= 1, got {text!r}") from None
        if not math.isfinite(value) or value < 1.0:  # NaN would pass `< 1` and be read as 1
            raise argparse.ArgumentTypeError(f"{name} must be a finite number >= 1, got {text} (e.g. {name} 1.6)")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rule", choices=RULES, default="lower_bound",
                        help="decision rule of the check (default: lower_bound)")
    parser.add_argument("--confidence", type=_fraction("--confidence", open_interval=True), default=0.95,
                        help="confidence of the interval whose lower end lower_bound uses (default: 0.95)")
    parser.add_argument("--bound", type=_fraction("--bound"), default=None, help="the check's bound, e.g. 0.6")
    parser.add_argument("--accuracy", type=_fraction("--accuracy"), default=None,
                        help="the model's assumed true accuracy, e.g. 0.7")
    parser.add_argument("--deff", type=_at_least_one("--deff"), default=None, help="design effect of the items (>= 1)")
    parser.add_argument("--icc", type=_fraction("--icc"), default=None,
                        help="intra-image correlation (with --items-per-image; planning mode default 0.3)")
    parser.add_argument("--items-per-image", type=_at_least_one("--items-per-image"), default=None,
                        help="size-weighted mean items per image, sum(m^2)/n")
    parser.add_argument("--checks", type=whole_number("--checks", minimum=1, example="3"), default=1, help="required checks of this kind in the gate")
    parser.add_argument("--thresholds", default=None, help="planning mode: the policy file")
    parser.add_argument("--cube", default=None, help="planning mode: the cube to plan")
    parser.add_argument("--profile", default=None, help="planning mode: a profile of the policy")
    parser.add_argument("--distance", type=_fraction("--distance"), default=0.1,
                        help="planning mode: the model's distance from each bound (default 0.1)")
    parser.add_argument("--n", type=whole_number("--n", minimum=1, example="400"), default=None, help="number of items: also print P(pass) at this n")
    parser.add_argument("--power", type=_fraction("--power", open_interval=True), default=DEFAULT_POWER,
                        help="target probability of passing (default: 0.8)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")


def run(args: argparse.Namespace) -> int:
    if args.thresholds or args.cube:
        return _plan(args)
    if args.bound is None or args.accuracy is None:
        print("medrcube power: give --bound and --accuracy (one check), or --thresholds and --cube (a plan)",
              file=sys.stderr)
        return 2
    report = power_report(args.rule, args.bound, args.accuracy, n=args.n, confidence=args.confidence,
                          power=args.power)
    deff = _deff(args)
    alpha = (1.0 - args.confidence) / 2.0
    # All of M required checks must pass: each needs power^(1/M).
    per_check = args.power ** (1.0 / args.checks)
    clustered_n = score_required_n(args.bound, args.accuracy, alpha, deff=deff, power=args.power) \
        if args.accuracy > args.bound else None
    family_n = score_required_n(args.bound, args.accuracy, alpha, deff=deff, power=per_check) \
        if args.accuracy > args.bound else None
    clustered_p = clustered_power(args.bound, args.accuracy, args.n, alpha, deff=deff) if args.n else None
    if args.json:
        json.dump({
            "rule": report.rule, "confidence": report.confidence, "bound": report.bound,
            "accuracy": report.accuracy, "n": report.n, "pass_probability": report.probability,
            "power": report.power, "required_n": report.required_n, "stable_n": report.stable_n,
            "design_effect": deff, "checks": args.checks, "required_n_clustered": clustered_n,
            "required_n_family": family_n, "pass_probability_clustered": clustered_p,
        }, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(report.text())
    if deff > 1.0 or args.checks > 1:
        what = f"design effect {deff:.2f}" + (f", {args.checks} required checks" if args.checks > 1 else "")
        print(f"with {what} (normal approximation of the score test at one-sided {alpha:.3g}):")
        if clustered_p is not None:
            print(f"  P(decides: pass) with n={args.n}: {clustered_p:.3f}")
        print(f"  n for {args.power:.0%} power per check: {clustered_n if clustered_n else 'unreachable'}")
        if args.checks > 1:
            print(f"  n per check for all {args.checks} to pass with {args.power:.0%}: "
                  f"{family_n if family_n else 'unreachable'} (each at power {per_check:.3f})")
    return 0


def _deff(args: argparse.Namespace) -> float:
    if args.deff is not None:
        return max(1.0, float(args.deff))
    if args.icc is not None and args.items_per_image is not None:
        return 1.0 + (max(1.0, float(args.items_per_image)) - 1.0) * float(args.icc)
    return 1.0


def _plan(args: argparse.Namespace) -> int:
    from medrcube.cube import load_cube
    from medrcube.gate.checks import build_checks
    from medrcube.gate.plan import PlanUnit, plan_checks
    from medrcube.gate.thresholds import ThresholdsError, load_policy

    if not (args.thresholds and args.cube):
        print("medrcube power: planning needs both --thresholds FILE and --cube CUBE", file=sys.stderr)
        return 2
    try:
        policy = load_policy(args.thresholds, profile=args.profile)
    except ThresholdsError as e:
        print(f"medrcube power: {e}", file=sys.stderr)
        return 2
    cube = load_cube(args.cube)
    units = [PlanUnit(it.cell, cube.image_of(it) or f"item:{it.id}", len(it.options)) for it in cube.items if it.image]
    checks = build_checks(sorted({u.cell for u in units}), policy)
    icc = 0.3 if args.icc is None else args.icc
    plans = plan_checks(checks, units, distance=args.distance, icc=icc, power=args.power)
    if args.json:
        json.dump([p.to_dict() for p in plans], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    m = sum(c.required for c in checks)
    print(f"plan for {cube.source} under {args.thresholds}" + (f" (profile {args.profile})" if args.profile else "")
          + f": model {args.distance:g} from each bound, ICC {icc:g}, {m} required checks")
    print(f"{'check':<48} {'bound':>5} {'have':>5} {'m_w':>5} {'pass':>6} {'fail':>6} {'all':>6}")
    for p in plans:
        cells = [str(x) if x is not None else "-" for x in (p.need_pass, p.need_fail, p.need_all)]
        mark = "" if p.enough else "  short"
        print(f"{p.check_id[:48]:<48} {p.bound:>5.2f} {p.have:>5} {p.mean_cluster_size:>5.2f} "
              f"{cells[0]:>6} {cells[1]:>6} {cells[2]:>6}{mark}")
    print("pass: items for 80% power to pass a model above the bound; fail: to fail one below it (Holm worst case); "
          "all: per check, for every required check to pass together with 80%")
    return 0
