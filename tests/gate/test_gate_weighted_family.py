"""The fail claims' family with a stated share (weighted Holm), the power rule of
feasibility, and what the coverage says per cell and at chance."""

from __future__ import annotations

from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.gate.checks import build_checks
from medrcube.gate.coverage import Covered, coverage_of
from medrcube.gate.family import fail_weights, holm_adjust
from medrcube.gate.feasible import assess
from medrcube.gate.thresholds import load_policy

ROOT = Path(__file__).resolve().parents[2]


def test_equal_weights_are_holm_and_a_share_moves_the_level_to_its_check() -> None:
    p = [0.01, 0.002, 0.04, 0.3]
    assert holm_adjust(p, [1.0] * 4) == holm_adjust(p) == pytest.approx([0.03, 0.008, 0.08, 0.3])
    # One check holds half the level: its first-step threshold is alpha / 2, not alpha / 4.
    w = fail_weights([0.5, None, None, None])
    assert w == pytest.approx([0.5, 1 / 6, 1 / 6, 1 / 6])
    adj = holm_adjust([0.012, 0.5, 0.6, 0.7], w)
    assert adj[0] == pytest.approx(0.024) and adj[0] <= 0.025 < holm_adjust([0.012, 0.5, 0.6, 0.7])[0]
    # ... and the others pay: a p of 0.005 is adjusted by 1 / (1/6) = 6 instead of 4.
    assert holm_adjust([0.9, 0.005, 0.6, 0.7], w)[1] == pytest.approx(0.03)


def test_fail_weights_without_a_share_or_with_too_much_are_equal() -> None:
    assert fail_weights([None, None]) == [1.0, 1.0]
    assert fail_weights([1.0, None]) == [1.0, 1.0]  # nothing left to the others: no weighting
    assert fail_weights([0.3]) == [0.3]


def _mini_checks(text: str, tmp_path: Path) -> list:
    cube = load_cube(str(ROOT / "fixtures" / "mini"))
    (tmp_path / "t.yaml").write_text(text, encoding="utf-8")
    policy = load_policy(str(tmp_path / "t.yaml"))
    return assess(build_checks(sorted({it.cell for it in cube.items}), policy), cube.items, policy)


def test_the_power_rule_names_its_margin_and_can_be_turned_off(tmp_path: Path) -> None:
    text = (ROOT / "thresholds.yaml").read_text(encoding="utf-8")
    on = {c.id: c for c in _mini_checks(text, tmp_path)}
    off = {c.id: c for c in _mini_checks(text.replace("power_margin: 0.15", "power_margin: null"), tmp_path)}
    why = on["slice/part/Heart"].params["not_required"]
    assert "too few images for power at margin 0.15" in why and "below feasibility.power=0.99" in why
    assert off["slice/part/Heart"].required  # 61 images: enough for the min_images rule alone
    assert on["overall"].required and on["credibility/overall"].required
    # Every accuracy check carries its fail power against a model at chance; a large slice fails it surely.
    assert on["overall"].params["fail_power_at_chance"] == pytest.approx(1.0)
    assert 0.0 <= on["Heart/US/Modality Recognition"].params["fail_power_at_chance"] < 0.99
    assert on["credibility/overall"].params["fail_share"] == 0.25


def _entry(cid: str, status: str, part: str | None, modality: str | None, task: str | None,
           **details: object) -> dict:
    return {"id": cid, "verdict": status, "required": True, "part": part, "modality": modality, "task": task,
            "details": details}


def test_coverage_per_cell_on_request_and_the_values_where_chance_fails() -> None:
    entries = [
        _entry("overall", "pass", None, None, None, fail_power_at_chance=1.0),
        _entry("slice/part/Brain", "pass", "Brain", None, None, fail_power_at_chance=0.999),
        _entry("Brain/MRI/Organ Recognition", "fail", "Brain", "MRI", "Organ Recognition"),
        _entry("Heart/US/View Recognition", "skip", "Heart", "US", "View Recognition",
           not_required="not required on this cube: too few images for power at margin 0.15: 9 images"),
    ]
    entries[-1]["required"] = False
    plain = coverage_of(entries)
    assert not plain.of("cell")
    cells = ["Brain/MRI/Organ Recognition", "Heart/US/View Recognition", "Brain/CT/Organ Recognition"]
    cov = coverage_of(entries, {"cell": cells})
    by = {v.value: v for v in cov.of("cell")}
    assert by["Brain/MRI/Organ Recognition"].state is Covered.FAILED
    assert by["Heart/US/View Recognition"].state is Covered.NOT_EVALUATED
    assert by["Heart/US/View Recognition"].why == "too few images for power at margin 0.15"
    assert by["Brain/CT/Organ Recognition"].why == "no check of the policy lies within it"
    lines = cov.lines("NOT QUALIFIED")
    assert any(x.startswith("coverage cells: FAILED: Brain/MRI/Organ Recognition") for x in lines)
    assert "coverage at chance (a check there fails blind guessing with probability >= 0.99): parts Brain" in lines
    parts = {v.value: v.fails_at_chance for v in cov.of("part")}
    assert parts == {"Brain": True, "Heart": False}
    assert cov.from_dict(cov.to_dict()) == cov
