"""The clinical kinds' pass / fail / undecided, decided by the gate (they were decided by
`*_verdict` functions in metrics/ before issue 22; metrics/ now computes estimates and
intervals only)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from medrcube.gate.checks import Check, CheckKind
from medrcube.gate.evaluate import evaluate
from medrcube.gate.verdict import Status
from medrcube.records import Outcome
from medrcube.testing.calibrated import CALIBRATED, OVERCONFIDENT


def _check(kind: CheckKind, bound: float, metric: str = "m", **params: Any) -> Check:
    variants = ("standard", str(params["variant"])) if "variant" in params else ("standard",)
    return Check(id=f"t/{kind.value}", kind=kind, metric=metric, part=None, modality=None, task=None, bound=bound,
                 rule="lower_bound", confidence=0.95, min_n=1, max_error_rate=0.05, variants=variants,
                 params=dict(params))


def test_the_calibration_check_separates_calibrated_from_overconfident() -> None:
    check = _check(CheckKind.CALIBRATION, 0.1, "calibration_ce", statistic="ce", n_bins=10, n_boot=150)
    outcomes: dict[str, list[Status]] = {"calibrated": [], "overconfident": []}
    for name, sim in (("calibrated", CALIBRATED), ("overconfident", OVERCONFIDENT)):
        for seed in range(6):
            outcomes[name].append(evaluate(check, sim.records(800, seed)).status)
    assert Status.FAIL not in outcomes["calibrated"] and outcomes["calibrated"].count(Status.PASS) >= 4
    assert Status.PASS not in outcomes["overconfident"] and outcomes["overconfident"].count(Status.FAIL) >= 3


def test_a_calibration_check_without_confidence_is_undecided_and_says_why(rec) -> None:
    v = evaluate(_check(CheckKind.CALIBRATION, 0.1, "calibration_ce", statistic="ce"), [rec("a")])
    assert v.status is Status.UNDECIDED and "logprobs" in v.message


def test_the_sensitivity_check_passes_fails_or_waits_on_its_interval(rec, pneumothorax_table) -> None:
    def status(bound: float, finding: str = "pneumothorax") -> Status:
        return evaluate(_check(CheckKind.FINDING, bound, "sensitivity", finding=finding, cells=["*/*/*"]),
                        pneumothorax_table).status

    assert status(0.9) is Status.FAIL  # 8/12: the upper bound is below 0.9
    assert status(0.5) is Status.UNDECIDED
    assert status(0.3) is Status.PASS
    missing = evaluate(_check(CheckKind.FINDING, 0.5, "sensitivity", finding="effusion", cells=["*/*/*"]),
                       pneumothorax_table)
    assert missing.status is Status.UNDECIDED and "effusion" in missing.message


def test_accuracy_at_full_coverage_below_its_bound_never_passes(rec) -> None:
    def conf(r, value):  # type: ignore[no-untyped-def]
        return replace(r, confidence={"source": "logprobs", "value": value, "probs": None, "mass": 1.0})

    recs = [conf(rec("a"), 0.9), conf(rec("b", Outcome.WRONG), 0.9), conf(rec("c"), 0.5)]
    v = evaluate(_check(CheckKind.SELECTIVE, 0.99, "accuracy_at_coverage", coverage=1.0), recs)
    assert v.status in (Status.FAIL, Status.UNDECIDED) and abs((v.observed or 0) - 2 / 3) < 1e-9


def test_a_small_drop_is_within_a_wide_margin(rec) -> None:
    records = []
    for i in range(300):
        task = "Organ Recognition" if i % 2 else "View Recognition"
        records.append(rec(f"x{i}", "correct", image=f"img{i}", task=task))
        records.append(rec(f"x{i}", "correct" if i % 25 else "wrong", image=f"img{i}", task=task,
                           variant="lowres:256"))
    v = evaluate(_check(CheckKind.ROBUSTNESS, 0.10, "perturbation_drop", variant="lowres:256", margin=0.10), records)
    assert v.status is Status.PASS and abs((v.observed or 0) - 0.04) < 1e-9
    strict = evaluate(_check(CheckKind.ROBUSTNESS, 0.02, "perturbation_drop", variant="lowres:256", margin=0.02),
                      records)
    assert strict.status is not Status.PASS
