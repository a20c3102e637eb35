"""The sequential scenarios run and report what they claim, on a small generated cube."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import sequential, sequential_server
from medrcube.cube import load_cube
from medrcube.testing.gencube import generate_release_cube


@pytest.fixture(scope="module")
def small_cube(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bench") / "cube"
    generate_release_cube(root, n_items=400, n_datasets=4, n_images=160, image_size=32, n_base_images=16)
    (root / ".complete").write_text("ok\n")
    return root


def test_the_in_process_scenario_saves_and_agrees(small_cube: Path) -> None:
    cube = sequential.cube_at(small_cube)
    checks = sequential.checks_of(cube, "slices")
    above = sequential.one(cube, checks, "simulate:accuracy=0.95,icc=0.3,seed=1", seed=1)
    assert 0.0 < above["fraction"] < 1.0 and above["full"] == above["sequential"] == "QUALIFIED"
    below = sequential.one(cube, checks, "simulate:accuracy=0.05,icc=0.3,seed=1", seed=1)
    assert below["fraction"] < above["fraction"] and below["sequential"] == "NOT QUALIFIED"
    runs = sequential.replicates(cube, checks, "slices", 0.0, +1, [1, 2], engine="twin")
    row = sequential.row(runs)
    assert row["reps"] == 2 and row["false_qualified"] is not None and row["false_not_qualified"] is not None


def test_leaving_out_the_reported_interval_ends_changes_no_decision(small_cube: Path) -> None:
    cube = sequential.cube_at(small_cube)
    checks = sequential.checks_of(cube, "default")
    bounds = sequential.bound_range(cube, checks)
    cases = [(sequential.model_spec("default", bounds, d, side, seed), seed)
             for d, side, seed in ((0.1, +1, 1), (0.0, +1, 2), (0.05, -1, 3))]
    real = [sequential.one(cube, checks, spec, seed) for spec, seed in cases]
    with sequential.decisions_only():
        fast = [sequential.one(cube, checks, spec, seed) for spec, seed in cases]
    assert fast == real


def test_a_model_above_the_shipped_bounds_sits_under_the_credibility_bound_too(small_cube: Path) -> None:
    cube = sequential.cube_at(small_cube)
    checks = sequential.checks_of(cube, "default")
    low, high = sequential.bound_range(cube, checks)
    spec = sequential.model_spec("default", (low, high), 0.1, +1, 1)
    assert "grounded=true" in spec and f"accuracy={high + 0.1:.4f}" in spec and f"MR={high + 0.3:.4f}" in spec
    # Its diagnoses rest on its perception: the statistic credibility decides on (the odds
    # ratio of a right diagnosis given a right perception, or the luck rate) sits on the
    # passing side of its bound.
    from medrcube.gate.evaluate import evaluate_gate

    credibility = [c for c in checks if c.kind.value == "credibility" and c.required]
    result = evaluate_gate(credibility, sequential.answers(cube, spec).values())
    assert credibility and all((c.estimate >= c.bound) if c.at_least else (c.estimate <= c.bound)
                               for e in result.evidences for c in e.criteria[:1]), [e.criteria for e in result.evidences]
    accuracy_only = sequential.checks_of(cube, "accuracy")
    assert accuracy_only and not any(c.kind.value == "credibility" for c in accuracy_only)


def test_the_tagged_copy_makes_every_question_unique_and_the_key_follows_the_simulation(small_cube: Path) -> None:
    tagged = load_cube(sequential_server.tagged_copy(small_cube, small_cube.with_name("tagged")))
    original = load_cube(small_cube)
    assert len(tagged.items) == len(original.items)
    assert len({it.question for it in tagged.items}) == len(tagged.items)
    key = sequential_server.answer_key(tagged, "simulate:accuracy=0.75,icc=0.3,seed=1")
    right = sum(key[it.question] == it.answer_text for it in tagged.items) / len(tagged.items)
    assert 0.6 < right < 0.9
    assert sequential_server.answer_key(tagged, "simulate:accuracy=0.75,icc=0.3,seed=2") != key


def test_the_server_scenario_counts_requests_at_the_server(small_cube: Path) -> None:
    (row,) = sequential_server.run(1, [("slices", 0.45, +1)], small_cube)
    assert row["full"] > 0 and 0 < row["sequential"] < row["full"]
    assert row["full_gate"] == row["sequential_gate"] and row["checks"] > 0


def test_the_default_policy_is_assessed_on_the_cube_as_the_session_does(small_cube: Path) -> None:
    cube = sequential.cube_at(small_cube)
    checks = sequential.checks_of(cube, "default")
    dropped = [c for c in checks if "not_required" in c.params]
    assert dropped and not any(c.required for c in dropped)
    assert any(c.required for c in checks)


def test_the_uniform_cube_holds_every_cell_at_its_size_and_the_cells_policy_requires_them_all() -> None:
    cube = sequential.cube_at(Path("uniform"))
    cells: dict[tuple[str, str, str], int] = {}
    for it in cube.items:
        cells[it.cell] = cells.get(it.cell, 0) + 1
    assert len(cube.items) == 6000 and len(cells) == 80 and set(cells.values()) == {75}
    assert len({it.image for it in cube.items}) == 2250
    # One item of a cell per image: a cell's 75 items are 75 images.
    assert all(len({it.image for it in cube.items if it.cell == cell}) == 75 for cell in cells)
    required = {c.id for c in sequential.checks_of(cube, "cells") if c.required and c.kind.value == "cell"}
    assert len(required) == 80
    # The shipped policy as it is releases them (the power rule: 75 images are too few).
    shipped = sequential.checks_of(cube, "default")
    assert not any(c.required for c in shipped if c.kind.value == "cell")
    assert all("power" in c.params["not_required"] for c in shipped if c.kind.value == "cell" and "not_required" in c.params)


def test_a_sequential_run_on_the_uniform_cube_agrees_and_saves() -> None:
    cube = sequential.uniform_cube(per_cell=40)
    checks = sequential.checks_of(cube, "cells")
    spec = sequential.model_spec("cells", sequential.bound_range(cube, checks), 0.35, +1, 1)
    with sequential.decisions_only():
        above = sequential.one(cube, checks, spec, seed=1)
    assert above["full"] == above["sequential"] == "QUALIFIED" and above["fraction"] < 0.8
