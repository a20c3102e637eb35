"""The subgroup kinds (gate/subgroups.py): the policy section, a check per stratum, small and
unknown strata reported but not required, and the decisions of the gate's family: a
stratum 0.25 worse than the rest fails (named), an even model passes."""

from __future__ import annotations

import numpy as np
import pytest

from medrcube.gate.checks import build_checks
from medrcube.gate.evaluate import evaluate_gate
from medrcube.gate.thresholds import ThresholdsError, policy_from_dict
from medrcube.gate.verdict import GateStatus, Status
from medrcube.metrics import strata as strata_metrics
from medrcube.records import Attributes, GradedRecord, Outcome

CELL = ("Chest", "CT", "Modality Recognition")
VENDORS = ("GE", "Siemens", "Philips")


def _policy(**section: object) -> object:
    sub = {"by": ["manufacturer", "sex"], "min_accuracy": 0.7, "max_gap": 0.1, **section}
    return policy_from_dict({"version": 1, "overall": {"bound": 0.6}, "subgroups": sub}, source="t.yaml")


def _records(acc: dict[str, float], images: int = 600, per_image: int = 2, seed: int = 3,
             tiny: int = 0) -> list[GradedRecord]:
    """Records of `images` images (vendor cycling, sex alternating; `tiny` more images of a
    fourth vendor), each image's items right with its vendor's probability."""
    rng = np.random.default_rng(seed)
    out = []
    for img in range(images + tiny):
        vendor = VENDORS[img % 3] if img < images else "Canon"
        attrs = Attributes(sex=("female", "male")[img % 2], manufacturer=vendor)
        for k in range(per_image):
            ok = bool(rng.random() < acc.get(vendor, acc["*"]))
            out.append(GradedRecord(
                item_id=f"i{img}-{k}", dataset="d", task=CELL[2], modality=CELL[1], part=CELL[0], image=f"img{img}",
                image_digest=None, variant="standard", rotation=0, answer=0, n_options=4, prompt_hash="h",
                response="A" if ok else "B", extracted=0 if ok else 1, how="bare_letter",
                outcome=Outcome.CORRECT if ok else Outcome.WRONG, attributes=attrs))
    return out


def _strata(records: list[GradedRecord]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    seen: dict[str, Attributes] = {r.image: r.attributes for r in records}  # type: ignore[misc]
    for a in seen.values():
        for name in ("sex", "manufacturer"):
            out.setdefault(name, {}).setdefault(a.get(name), 0)
            out[name][a.get(name)] += 1
    return out


def test_the_section_is_checked_with_the_key_and_the_fix() -> None:
    with pytest.raises(ThresholdsError, match=r"subgroups\.by.*unknown attribute 'ethnicity'"):
        _policy(by=["ethnicity"])
    with pytest.raises(ThresholdsError, match=r"subgroups.*neither min_accuracy nor max_gap"):
        _policy(min_accuracy=None, max_gap=None)
    with pytest.raises(ThresholdsError, match=r"subgroups\.max_gap"):
        _policy(max_gap=1.5)
    with pytest.raises(ThresholdsError, match=r"subgroups\.colour"):
        _policy(colour="red")


def test_a_check_per_stratum_and_small_or_unknown_strata_are_named_not_required() -> None:
    st = {"manufacturer": {"GE": 200, "Siemens": 12, "unknown": 40}, "sex": {"female": 130, "male": 122}}
    checks = {c.id: c for c in build_checks([CELL], _policy(), strata=st)}
    assert {"subgroup/manufacturer/GE", "subgroup_gap/manufacturer/GE", "subgroup/manufacturer/Siemens",
            "subgroup/manufacturer/unknown", "subgroup/sex/female", "subgroup_gap/sex/male"} <= set(checks)
    assert checks["subgroup/manufacturer/GE"].required
    small = checks["subgroup_gap/manufacturer/Siemens"]
    assert not small.required and "too small to decide: 12 images < subgroups.min_images=30" in small.params["not_required"]
    assert not checks["subgroup/manufacturer/unknown"].required
    assert build_checks([CELL], _policy()) == build_checks([CELL], _policy(), strata=None)  # no strata, no check
    assert not [c for c in build_checks([CELL], _policy()) if c.kind.startswith("subgroup")]


def test_a_stratum_025_worse_is_not_qualified_and_named() -> None:
    recs = _records({"Siemens": 0.65, "*": 0.9})
    res = evaluate_gate(build_checks([CELL], _policy(), strata=_strata(recs)), recs)
    by = {v.check_id: v for v in res.verdicts}
    assert res.gate.status is GateStatus.NOT_QUALIFIED
    gap = by["subgroup_gap/manufacturer/Siemens"]
    assert gap.status is Status.FAIL and "manufacturer = Siemens" in gap.message
    assert gap.observed == pytest.approx(gap.details["rest_accuracy"] - gap.details["stratum_accuracy"])
    assert by["subgroup/manufacturer/Siemens"].status in (Status.FAIL, Status.UNDECIDED)
    assert by["subgroup_gap/manufacturer/GE"].status is Status.PASS
    assert all(by[f"subgroup/sex/{s}"].status is Status.PASS for s in ("female", "male"))


def test_an_even_model_is_qualified_and_a_tiny_stratum_is_reported_not_required() -> None:
    recs = _records({"*": 0.88}, tiny=8)
    res = evaluate_gate(build_checks([CELL], _policy(), strata=_strata(recs)), recs)
    by = {v.check_id: v for v in res.verdicts}
    assert res.gate.status is GateStatus.QUALIFIED
    canon = by["subgroup/manufacturer/Canon"]
    assert not canon.required and "too small to decide" in canon.details["not_required"]
    assert canon.n == 16  # measured and reported, never dropped


def test_the_gap_interval_and_its_p_values_agree() -> None:
    rest = [(2, 2)] * 170 + [(1, 2)] * 20 + [(0, 2)] * 10
    mine = [(2, 2)] * 30 + [(1, 2)] * 10 + [(0, 2)] * 10
    g = strata_metrics.gap(rest, mine, 0.95)
    assert g.lo < g.estimate < g.hi
    # The bound at the interval's upper end: p of "gap >= bound" is alpha = 0.025 there.
    assert strata_metrics.p_gap_at_least(rest, mine, g.hi + 1e-6) < 0.025 < strata_metrics.p_gap_at_least(rest, mine, g.hi - 1e-3)
    assert strata_metrics.p_gap_at_most(rest, mine, g.lo - 1e-6) < 0.025 < strata_metrics.p_gap_at_most(rest, mine, g.lo + 1e-3)


def test_the_gap_rule_is_detect_or_prove_and_named_in_the_error() -> None:
    with pytest.raises(ThresholdsError, match=r"subgroups\.gap.*must be detect or prove.*gap: prove"):
        _policy(gap="maybe")
    st = {"manufacturer": {"GE": 200, "Siemens": 200}, "sex": {"female": 200, "male": 200}}
    detect = {c.id: c for c in build_checks([CELL], _policy(), strata=st)}
    prove = {c.id: c for c in build_checks([CELL], _policy(gap="prove"), strata=st)}
    gap, acc = detect["subgroup_gap/manufacturer/GE"], detect["subgroup/manufacturer/GE"]
    assert acc.required and not gap.required and gap.params["detector"]
    assert gap.params["not_required"].startswith("harm detector (subgroups.gap: detect)")
    assert "max_gap=0.1" in gap.params["not_required"]
    assert prove["subgroup_gap/manufacturer/GE"].required and "not_required" not in prove["subgroup_gap/manufacturer/GE"].params


def test_an_even_model_on_small_strata_qualifies_under_detect_and_waits_under_prove() -> None:
    """80 images a vendor: each stratum's accuracy is decided, its gap's interval still reaches max_gap."""
    recs = _records({"*": 0.9}, images=240, seed=5)
    st = _strata(recs)
    detect = evaluate_gate(build_checks([CELL], _policy(), strata=st), recs)
    prove = evaluate_gate(build_checks([CELL], _policy(gap="prove"), strata=st), recs)
    undecided_gaps = [v.check_id for v in prove.verdicts if v.check_id.startswith("subgroup_gap/")
                      and v.status is Status.UNDECIDED]
    assert undecided_gaps and set(prove.gate.undecided) == set(undecided_gaps)
    assert prove.gate.status is GateStatus.UNDECIDED
    assert detect.gate.status is GateStatus.QUALIFIED
    assert "harm detectors" in detect.gate.guarantee and "harm detectors" not in prove.gate.guarantee
    v = detect.by_id()[undecided_gaps[0]]
    assert v.status is Status.UNDECIDED and not v.required and "harm detector" in v.message


def test_a_gap_shown_above_max_gap_fails_the_gate_where_every_accuracy_is_met() -> None:
    """0.97 elsewhere, 0.76 on Siemens: every stratum above min_accuracy 0.7, the gap 0.21 > 0.1."""
    recs = _records({"Siemens": 0.76, "*": 0.97}, seed=7)
    res = evaluate_gate(build_checks([CELL], _policy(), strata=_strata(recs)), recs)
    by = res.by_id()
    assert by["subgroup/manufacturer/Siemens"].status is not Status.FAIL
    assert by["subgroup_gap/manufacturer/Siemens"].status is Status.FAIL
    assert res.gate.status is GateStatus.NOT_QUALIFIED
    assert res.gate.failed == ("subgroup_gap/manufacturer/Siemens",) and res.gate.failed_reported == res.gate.failed


def test_the_plan_plans_the_detectors_fail_direction_only() -> None:
    """At a planning accuracy of 0.85 the fail direction binds either way (a stratum at 0.65 varies more
    than one at 0.85, and its claim is Holm-adjusted); at 0.45 the pass direction binds, which
    only `gap: prove` plans for."""
    from medrcube.gate.subgroup_plan import plan_strata

    mix = {(("manufacturer", "GE"),): 0.6, (("manufacturer", "Siemens"),): 0.4}

    def needs(gap: str, **kw: object) -> dict[str, object]:
        plan = plan_strata(_policy(by=["manufacturer"], gap=gap).sections["subgroups"], mix, {}, **kw)  # type: ignore[arg-type]
        return {s.value: s for s in plan.strata} | {"plan": plan}

    d, p = needs("detect", family_size=7), needs("prove", family_size=7)
    assert d["Siemens"].need_gap == p["Siemens"].need_gap > 0 and d["Siemens"].need_accuracy == p["Siemens"].need_accuracy
    assert d["plan"].to_dict()["gap_rule"] == "detect" and d["plan"].to_dict()["family_size"] == 7
    low_d, low_p = needs("detect", family_size=1, accuracy=0.45), needs("prove", family_size=1, accuracy=0.45)
    assert 0 < low_d["Siemens"].need_gap < low_p["Siemens"].need_gap


def test_a_stratum_whose_images_cannot_show_min_accuracy_is_reported_not_required() -> None:
    """40 images, every answer right, give a lower bound of about 0.91: a bound of 0.95 cannot be shown."""
    st = {"manufacturer": {"GE": 400, "Siemens": 40}, "sex": {"female": 220, "male": 220}}
    checks = {c.id: c for c in build_checks([CELL], _policy(min_accuracy=0.95), strata=st)}
    siemens, ge = checks["subgroup/manufacturer/Siemens"], checks["subgroup/manufacturer/GE"]
    assert ge.required and "not_required" not in ge.params
    assert not siemens.required
    assert siemens.params["not_required"].startswith("stratum too small to show subgroups.min_accuracy=0.95: 40 images")
    assert checks["subgroup_gap/manufacturer/Siemens"].params["not_required"].startswith("harm detector")
    # The perfect model's records: the check indeed cannot pass, whatever the items per image.
    recs = [r for r in _records({"*": 1.0}, images=120, per_image=3) if r.attributes.manufacturer == "Siemens"]
    assert len({r.image for r in recs}) == 40
    by = evaluate_gate([siemens], recs).by_id()
    assert by[siemens.id].status is Status.UNDECIDED
    # At 0.7 the same 40 images are enough: required.
    assert {c.id: c for c in build_checks([CELL], _policy(), strata=st)}["subgroup/manufacturer/Siemens"].required
