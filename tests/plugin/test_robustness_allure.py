"""Allure places the image-perturbation checks under a "Robustness" epic (issue 17)."""

from __future__ import annotations

from medrcube.gate.checks import Check
from medrcube.plugin.allure import behaviors, title


def _check(kind: str, variant: str, **sel: str) -> Check:
    return Check(id=f"{kind}:{variant}", kind=kind,  # type: ignore[arg-type]  # kinds the lead adds
                 metric="accuracy_drop", part=sel.get("part"),
                 modality=sel.get("modality"), task=sel.get("task"), bound=0.05, rule="noninferiority",
                 confidence=0.95, min_n=20, max_error_rate=0.1, variants=("standard", variant),
                 params={"variant": variant})


def test_robustness_checks_are_grouped_by_perturbation() -> None:
    overall = _check("robustness", "jpeg:30")
    assert behaviors(overall) == ("Robustness", "jpeg:30", "All cells: accuracy")
    assert title(overall) == "Robustness to jpeg:30: All cells: accuracy"
    cell = _check("robustness_agreement", "noise:0.03", part="Chest", modality="X-Ray", task="Disease Diagnosis")
    assert behaviors(cell) == ("Robustness", "noise:0.03", "Chest / X-Ray / Disease Diagnosis: answer agreement")
