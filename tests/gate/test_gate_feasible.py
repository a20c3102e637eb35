"""Issue 22: a gate that can say yes (feasibility, scope, luck rate, finite-sample intervals)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.gate.checks import CheckKind, build_checks
from medrcube.gate.evaluate import evaluate_gate
from medrcube.gate.feasible import assess, perfect_records
from medrcube.gate.scope import scoped_items
from medrcube.gate.thresholds import ThresholdsError, load_policy
from medrcube.gate.verdict import GateStatus, Status
from medrcube.metrics import finite
from medrcube.records import Outcome

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mini():  # type: ignore[no-untyped-def]
    cube = load_cube(str(ROOT / "fixtures" / "mini"))
    policy = load_policy(str(ROOT / "thresholds.yaml"))
    checks = assess(build_checks(sorted({it.cell for it in cube.items}), policy), cube.items, policy)
    return cube, policy, checks


def test_a_model_right_on_every_item_is_qualified_on_the_bundled_cube_and_random_answers_are_not(mini) -> None:
    cube, _, checks = mini
    perfect = perfect_records(cube.items)
    result = evaluate_gate(checks, perfect)
    assert result.gate.status is GateStatus.QUALIFIED, result.gate.text()
    wrong = [dataclasses.replace(r, extracted=None, outcome=Outcome.WRONG) for r in perfect]
    assert evaluate_gate(checks, wrong).gate.status is GateStatus.NOT_QUALIFIED


def test_checks_the_cube_cannot_decide_are_reported_not_required_and_named_in_the_verdict(mini) -> None:
    cube, _, checks = mini
    by_id = {c.id: c for c in checks}
    tiny = by_id["Chest/X-Ray/Abnormality Diagnosis"]  # 3 images
    assert not tiny.required and "not required on this cube" in tiny.params["not_required"]
    assert "3 images" in tiny.params["not_required"]
    result = evaluate_gate(checks, perfect_records(cube.items))
    assert "Chest/X-Ray/Abnormality Diagnosis" in result.gate.not_required
    assert "reported, not required on this cube" in result.gate.guarantee
    assert "not required" in result.by_id()["Chest/X-Ray/Abnormality Diagnosis"].message


def test_refuse_stops_the_run_naming_the_checks(tmp_path: Path) -> None:
    cube = load_cube(str(ROOT / "fixtures" / "mini"))
    text = (ROOT / "thresholds.yaml").read_text(encoding="utf-8").replace(
        "when_undecidable: optional", "when_undecidable: refuse")
    (tmp_path / "t.yaml").write_text(text, encoding="utf-8")
    policy = load_policy(str(tmp_path / "t.yaml"))
    # as many as the shipped `optional` reports without requiring (counted on the cube at hand)
    shipped = load_policy(str(ROOT / "thresholds.yaml"))
    cells = sorted({it.cell for it in cube.items})
    undecidable = sum("not required on this cube" in c.params.get("not_required", "")
                      for c in assess(build_checks(cells, shipped), cube.items, shipped))
    assert undecidable > 0
    with pytest.raises(ThresholdsError, match=f"{undecidable} required checks cannot be decided on this cube"):
        assess(build_checks(cells, policy), cube.items, policy)


def test_a_scope_keeps_its_checks_computed_within_it_and_required(tmp_path: Path) -> None:
    cube = load_cube(str(ROOT / "fixtures" / "mini"))
    text = (ROOT / "thresholds.yaml").read_text(encoding="utf-8").replace("scope: {}", "scope: {parts: [Brain]}")
    (tmp_path / "t.yaml").write_text(text, encoding="utf-8")
    policy = load_policy(str(tmp_path / "t.yaml"))
    inside, outside = scoped_items(cube.items, policy.scope)
    assert {it.part for it in inside} == {"Brain"} and "Heart" in outside["part"]
    checks = assess(build_checks(sorted({it.cell for it in inside}), policy), inside, policy)
    by_id = {c.id: c for c in checks}
    assert "Heart/US/Modality Recognition" not in by_id  # outside: not asked, not checked
    # overall, the part's slice and credibility are computed within the scope and required,
    # unless the power rule says the scope's images are too few (never because of the scope)
    assert by_id["overall"].required and by_id["credibility/overall"].required
    brain = by_id["slice/part/Brain"]
    assert brain.required or "too few images for power at margin 0.15" in brain.params["not_required"]
    result = evaluate_gate(checks, perfect_records(inside))
    assert result.by_id()["overall"].n == len(inside)


def test_a_scope_naming_nothing_of_the_cube_or_the_taxonomy_is_refused(tmp_path: Path) -> None:
    from medrcube.gate.thresholds import validate_against_cells

    cube = load_cube(str(ROOT / "fixtures" / "mini"))
    text = (ROOT / "thresholds.yaml").read_text(encoding="utf-8").replace(
        "scope: {}", "scope: {tasks: [View Recogniton]}")
    (tmp_path / "t.yaml").write_text(text, encoding="utf-8")
    policy = load_policy(str(tmp_path / "t.yaml"))
    with pytest.raises(ThresholdsError) as e:
        validate_against_cells(policy, sorted({it.cell for it in cube.items}))
    msg = str(e.value)
    assert "scope.tasks.View Recogniton" in msg and "did you mean 'View Recognition'" in msg
    assert "use one of" in msg and "Severity Grading" in msg


def test_credibility_fails_a_shortcut_model_and_passes_a_perceiving_one(mini) -> None:
    cube, _, checks = mini
    perfect = perfect_records(cube.items)
    cred = [c for c in checks if c.kind is CheckKind.CREDIBILITY and c.required]
    # The shipped rule: dependence (odds ratio) or too little luck to matter; only the
    # overall case is required (a part holds too few pairs to show dependence).
    assert [c.id for c in cred] == ["credibility/overall"] and cred[0].metric == "dependence"
    assert all(v.status is Status.PASS for v in evaluate_gate(cred, perfect).verdicts)
    # Perception always wrong, diagnosis always right: every right diagnosis rests on luck.
    shortcut = [r if r.task in ("Abnormality Diagnosis", "Severity Grading", "Disease Diagnosis")
                else dataclasses.replace(r, extracted=None, outcome=Outcome.WRONG) for r in perfect]
    verdicts = evaluate_gate(cred, shortcut).verdicts
    assert all(v.status is Status.FAIL for v in verdicts), [v.message for v in verdicts]
    assert "rationality" in verdicts[0].message and "shortcut probability" in verdicts[0].message


def test_the_finite_sample_interval_is_the_exact_binomial_when_every_item_is_right() -> None:
    assert finite.p_at_most([1.0] * 24, [1] * 24, 0.6) == pytest.approx(0.6**24)
    lo, hi = finite.interval([40.0] * 5, [40] * 5)
    assert lo == pytest.approx(0.025 ** (1 / 5), abs=1e-6) and hi == 1.0
    lo, hi = finite.interval([5.0] * 30, [10] * 30)
    assert lo < 0.5 < hi and lo == pytest.approx(1 - hi, abs=1e-6)
