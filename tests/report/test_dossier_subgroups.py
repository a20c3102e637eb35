"""The dossier's subgroup items from records and gate.json entries alone: the sensitivity per
finding and stratum in the diagnosis cells, and the rule the subgroup checks were decided under."""

from __future__ import annotations

from medrcube.records import Attributes, GradedRecord, Outcome
from medrcube.report.dossier import per_subgroup_sensitivity, subgroup_rule

OPTIONS = ("Pneumothorax", "Effusion", "Normal")


def _rec(i: int, sex: str, truth: int, chosen: int, task: str = "Disease Diagnosis") -> GradedRecord:
    return GradedRecord(
        item_id=f"i{i}", dataset="d", task=task, modality="X-Ray", part="Chest", image=f"img{i}", image_digest=None,
        variant="standard", rotation=0, answer=truth, n_options=3, prompt_hash="h", response=None, extracted=chosen,
        how="bare_letter", outcome=Outcome.CORRECT if truth == chosen else Outcome.WRONG, options=OPTIONS,
        attributes=Attributes(sex=sex))


def test_sensitivity_per_finding_and_stratum_in_the_diagnosis_cells() -> None:
    # Women: 10 pneumothoraces, 9 named; men: 10, 4 named. A Modality Recognition item is not read.
    recs = [_rec(i, "female", 0, 0 if i < 9 else 2) for i in range(10)]
    recs += [_rec(10 + i, "male", 0, 0 if i < 4 else 1) for i in range(10)]
    recs += [_rec(20 + i, "male", 2, 2) for i in range(5)] + [_rec(30, "female", 0, 0, task="Modality Recognition")]
    rows = {(r["value"], r["finding"]): r for r in per_subgroup_sensitivity(recs)}
    women, men = rows[("female", "pneumothorax")], rows[("male", "pneumothorax")]
    assert (women["sensitivity"], women["positives"], women["images"]) == (0.9, 10, 10)
    assert (men["sensitivity"], men["positives"]) == (0.4, 10)
    assert women["interval"][0] < 0.9 < women["interval"][1] and men["interval"][1] < women["interval"][1]
    assert rows[("male", "normal")]["sensitivity"] == 1.0 and ("female", "normal") not in rows  # no normal woman
    assert {r["cell"] for r in rows.values()} == {"Chest/X-Ray/Disease Diagnosis"}


def test_the_rule_is_read_from_the_gate_json_entries() -> None:
    acc = {"id": "subgroup/sex/female", "kind": "subgroup", "bound": 0.7, "required": True, "params": {}}
    small = {"id": "subgroup/sex/other", "kind": "subgroup", "bound": 0.7, "required": False, "params": {},
             "details": {"not_required": "stratum too small to decide: 3 images < subgroups.min_images=30"}}
    gap = {"id": "subgroup_gap/sex/female", "kind": "subgroup_gap", "bound": 0.1, "required": False,
           "params": {"gap_rule": "detect", "detector": True}, "details": {"not_required": "harm detector ..."}}
    rule = subgroup_rule({"checks": [acc, small, gap]})
    assert rule is not None and (rule["min_accuracy"], rule["max_gap"], rule["gap_rule"]) == (0.7, 0.1, "detect")
    assert rule["gap_checks"].startswith("harm detectors") and "required: 1 of 2 strata" in rule["accuracy_checks"]
    assert rule["not_required"] == {"subgroup/sex/other": small["details"]["not_required"]}
    proved = subgroup_rule({"checks": [acc, {**gap, "required": True, "params": {"gap_rule": "prove"}}]})
    assert proved is not None and proved["gap_checks"].startswith("required") and proved["not_required"] is None
    assert subgroup_rule({"checks": [{"id": "overall", "kind": "overall"}]}) is None
