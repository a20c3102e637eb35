"""Checks built from a small cell set and a policy, before any record exists."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from medrcube.gate.checks import CheckKind, build_checks
from medrcube.gate.thresholds import policy_from_dict

CELLS = [
    ("Chest", "X-Ray", "Disease Diagnosis"),
    ("Chest", "X-Ray", "Modality Recognition"),
    ("Brain", "MRI", "Severity Grading"),
    ("Brain", "MRI", "View Recognition"),  # excluded from credibility by default: Brain has no chain
    ("Chest", "X-Ray", "Disease Diagnosis"),  # duplicates collapse
]

POLICY = policy_from_dict({
    "version": 1,
    "defaults": {"rule": "lower_bound", "min_n": 10, "max_error_rate": 0.05},
    "overall": {"bound": 0.5, "min_n": 30},
    "slices": {"part": {"default": 0.45, "Brain": None}, "task": {"default": {"bound": 0.4, "rule": "point"}}},
    "cells": [{"match": "*/*/*", "bound": 0.4, "rule": "point"}, {"match": "Brain/*/VR", "bound": None}],
    "credibility": {"min_grounding": 0.1, "min_pairs": 20},
    "image_dependence": {"min_drop": 0.1},
    "position_robustness": {"max_gap": 0.15},
    "regression": {"alpha": 0.05, "margin": 0.02},
})


def ids(checks):
    return [c.id for c in checks]


def test_standard_only_ids_and_order():
    checks = build_checks(CELLS, POLICY, variants=("standard",), has_baseline=False)
    assert ids(checks) == [
        "overall",
        "slice/part/Chest",  # Brain: null
        "slice/task/Modality Recognition",
        "slice/task/View Recognition",
        "slice/task/Disease Diagnosis",
        "slice/task/Severity Grading",
        "Brain/MRI/Severity Grading",  # Brain/MRI/View Recognition: bound null
        "Chest/X-Ray/Modality Recognition",
        "Chest/X-Ray/Disease Diagnosis",
        "credibility/overall",
        "credibility/part/Chest",
    ]
    assert len(set(ids(checks))) == len(checks)


def test_check_fields_and_labels():
    by_id = {c.id: c for c in build_checks(CELLS, POLICY)}
    cell = by_id["Chest/X-Ray/Disease Diagnosis"]
    assert (cell.kind, cell.metric, cell.selector) == (CheckKind.CELL, "accuracy", CELLS[0])
    assert (cell.bound, cell.rule, cell.confidence, cell.min_n, cell.max_error_rate) == (0.4, "point", 0.95, 10, 0.05)
    assert cell.source == "cells[0]"
    assert cell.labels == {"part": "Chest", "modality": "X-Ray", "task": "Disease Diagnosis", "level": "high",
                           "severity": "critical", "kind": "cell"}
    assert by_id["Chest/X-Ray/Modality Recognition"].labels["severity"] == "minor"
    overall = by_id["overall"]
    assert (overall.kind, overall.selector, overall.rule, overall.min_n) == (CheckKind.OVERALL, (None,) * 3,
                                                                              "lower_bound", 30)
    assert overall.labels["severity"] == "blocker"
    sl = by_id["slice/part/Chest"]
    assert sl.selector == ("Chest", None, None) and sl.labels["modality"] == "All modalities"
    task_slice = by_id["slice/task/Severity Grading"]
    assert task_slice.rule == "point" and task_slice.labels["level"] == "high"
    cred = by_id["credibility/part/Chest"]
    assert cred.kind is CheckKind.CREDIBILITY and cred.selector == ("Chest", None, None)
    assert (cred.bound, cred.metric, cred.min_n) == (0.1, "grounding", 20)
    assert cred.labels["modality"] == "Credibility"
    assert cell.to_dict()["kind"] == "cell"


def test_variant_dependent_checks():
    plain = ids(build_checks(CELLS, POLICY, variants="standard"))
    assert not any(i.startswith(("image-dependence", "position", "regression")) for i in plain)
    blind = build_checks(CELLS, POLICY, variants="standard,blind")
    assert "image-dependence/overall" in ids(blind) and "position/overall" not in ids(blind)
    idc = next(c for c in blind if c.kind is CheckKind.IMAGE_DEPENDENCE)
    assert (idc.bound, idc.variants) == (0.1, ("standard", "blind"))
    shuffled = build_checks(CELLS, POLICY, variants=["standard", "shuffled:3"])
    pos = next(c for c in shuffled if c.kind is CheckKind.POSITION)
    assert pos.params == {"max_gap": 0.15, "rotations": 3} and pos.bound is None


def test_variant_objects_are_accepted():
    @dataclass(frozen=True)
    class Variant:  # the shape of medrcube.run.variants.Variant
        name: str
        k: int = 0

    checks = build_checks(CELLS, POLICY, variants=(Variant("standard"), Variant("shuffled", 2)))
    pos = next(c for c in checks if c.kind is CheckKind.POSITION)
    assert pos.params["rotations"] == 2


def test_regression_checks_only_with_a_baseline():
    checks = build_checks(CELLS, POLICY, has_baseline=True)
    reg = [c for c in checks if c.kind is CheckKind.REGRESSION]
    assert ids(reg) == [
        "regression/overall",
        "regression/Brain/MRI/View Recognition",
        "regression/Brain/MRI/Severity Grading",
        "regression/Chest/X-Ray/Modality Recognition",
        "regression/Chest/X-Ray/Disease Diagnosis",
    ]
    assert reg[0].params == {"alpha": 0.05, "margin": 0.02} and reg[0].needs_baseline
    per_cell_off = policy_from_dict({"version": 1, "regression": {"per_cell": False}})
    assert ids(build_checks(CELLS, per_cell_off, has_baseline=True)) == ["regression/overall"]


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"version": 1}, []),  # no overall/slices/cells/credibility sections: no accuracy checks
        ({"version": 1, "credibility": {"min_grounding": None}}, []),
        ({"version": 1, "credibility": {"min_grounding": 0.5, "by_part": False, "exclude_low_tasks": []}},
         ["credibility/overall"]),
        ({"version": 1, "credibility": {"min_grounding": 0.5, "exclude_low_tasks": []}},
         ["credibility/overall", "credibility/part/Brain", "credibility/part/Chest"]),
        ({"version": 1, "image_dependence": {"enabled": False}}, []),
    ],
)
def test_sections_decide_which_checks_exist(doc, expected):
    assert ids(build_checks(CELLS, policy_from_dict(doc), variants="standard,blind")) == (
        expected + (["image-dependence/overall"] if doc.get("image_dependence", {}).get("enabled", True) else [])
    )
