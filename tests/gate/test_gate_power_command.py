"""`medrcube power` through the real CLI dispatcher."""

from __future__ import annotations

import json

import pytest

from medrcube.cli import main
from medrcube.gate.power import pass_probability, required_n


def test_power_prints_probability_and_needed_n(capsys):
    rc = main(["power", "--rule", "lower_bound", "--confidence", "0.95", "--bound", "0.6", "--accuracy", "0.7",
               "--n", "50"])
    out = capsys.readouterr().out
    assert rc == 0
    assert f"P(pass) with n=50: {pass_probability('lower_bound', 0.6, 0.7, 50):.3f}" in out
    assert f"n for 80% power: {required_n('lower_bound', 0.6, 0.7)}" in out


def test_power_json(capsys):
    assert main(["power", "--rule", "point", "--bound", "0.6", "--accuracy", "0.7", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["required_n"] == 5 and data["stable_n"] == required_n("point", 0.6, 0.7, stable=True)
    assert data["pass_probability"] is None


def test_power_unreachable(capsys):
    assert main(["power", "--bound", "0.6", "--accuracy", "0.55"]) == 0
    assert "unreachable (a true accuracy of 0.55 does not exceed the bound 0.60)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bound", "60", "--accuracy", "0.7"], "--bound must be between 0 and 1, got 60 (write 0.6 for 60%)"),
        (["--bound", "0.6", "--accuracy", "x"], "--accuracy must be a number between 0 and 1, got 'x'"),
        (["--bound", "0.6", "--accuracy", "0.7", "--rule", "median"], "invalid choice: 'median'"),
        (["--bound", "0.6", "--accuracy", "0.7", "--n", "0"], "--n must be at least 1"),
    ],
)
def test_power_bad_arguments(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        main(["power", *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_power_with_design_effect_and_family(capsys):
    # n = 184 with images of 4 items at ICC 0.3: far less than the 80% the binomial promises.
    assert main(["power", "--bound", "0.6", "--accuracy", "0.7", "--n", "184", "--icc", "0.3",
                 "--items-per-image", "4", "--checks", "10", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["design_effect"] == pytest.approx(1.9)
    assert data["pass_probability"] > 0.8 > 0.6 > data["pass_probability_clustered"]
    assert data["required_n_family"] > data["required_n_clustered"] > data["required_n"]


def test_power_plans_a_cube_per_check(capsys, tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert main(["power", "--thresholds", str(root / "thresholds.yaml"), "--cube", str(root / "fixtures/mini"),
                 "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)
    by_id = {p["check_id"]: p for p in plans}
    overall = by_id["overall"]
    assert overall["have"] > 0 and overall["design_effect"] >= 1.0
    assert overall["need_all"] >= overall["need_pass"] > 0 and overall["need_fail"] > overall["need_pass"]
