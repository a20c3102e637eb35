"""`medrcube power`: how likely a check is to pass, and how many items it needs.

    medrcube power --rule lower_bound --confidence 0.95 --bound 0.6 --accuracy 0.7 [--n 50]

Assumes independent items (see medrcube.metrics.power); the gate's skip messages
quote the same numbers.
"""

from __future__ import annotations

import argparse
import json
import sys

from medrcube.metrics.power import DEFAULT_POWER, RULES, power_report


def _fraction(name: str, *, open_interval: bool = False):
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


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--n must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--n must be at least 1, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rule", choices=RULES, default="lower_bound",
                        help="decision rule of the check (default: lower_bound)")
    parser.add_argument("--confidence", type=_fraction("--confidence", open_interval=True), default=0.95,
                        help="confidence of the interval whose lower end lower_bound uses (default: 0.95)")
    parser.add_argument("--bound", type=_fraction("--bound"), required=True, help="the check's bound, e.g. 0.6")
    parser.add_argument("--accuracy", type=_fraction("--accuracy"), required=True,
                        help="the model's assumed true accuracy, e.g. 0.7")
    parser.add_argument("--n", type=_positive, default=None, help="number of items: also print P(pass) at this n")
    parser.add_argument("--power", type=_fraction("--power", open_interval=True), default=DEFAULT_POWER,
                        help="target probability of passing (default: 0.8)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")


def run(args: argparse.Namespace) -> int:
    report = power_report(args.rule, args.bound, args.accuracy, n=args.n, confidence=args.confidence,
                          power=args.power)
    if args.json:
        json.dump({
            "rule": report.rule, "confidence": report.confidence, "bound": report.bound,
            "accuracy": report.accuracy, "n": report.n, "pass_probability": report.probability,
            "power": report.power, "required_n": report.required_n, "stable_n": report.stable_n,
        }, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(report.text())
    return 0
