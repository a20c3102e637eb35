"""The simulated model (simulate:...): known accuracy, image correlation, grounded or
independent diagnosis and perception, named a simulation everywhere."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.models.base import Request
from medrcube.models.registry import ModelSpecError, load_adapter

MINI = Path(__file__).resolve().parents[2] / "fixtures" / "mini"


@pytest.fixture(scope="module")
def cube():
    return load_cube(MINI)


def test_spec_names_a_simulation_and_answers_from_the_cube(cube):
    sim = load_adapter("simulate:accuracy=1,seed=2", cube=cube)
    assert sim.spec == "simulate:accuracy=1,seed=2" and sim.fingerprint.startswith("simulation:")
    items = [it for it in cube.items if it.image][:20]
    reqs = [Request(key=it.id, item_id=it.id, prompt="q", images=(b"x",), task=it.task, options=tuple(it.options))
            for it in items]  # type: ignore[arg-type]
    out = asyncio.run(sim.generate(reqs))
    assert [r.text for r in out] == ["ABCDEFGH"[it.answer] for it in items]
    wrong = asyncio.run(load_adapter("simulate:accuracy=0", cube=cube).generate(reqs))
    assert all(r.text != "ABCDEFGH"[it.answer] for r, it in zip(wrong, items, strict=True))


def test_accuracy_icc_and_grounding_are_what_was_asked(cube):
    sim = load_adapter("simulate:accuracy=0.7,icc=0.3,seed=1,DD=0.5", cube=cube)
    hits = [sim.correct(f"i{k}", f"img{k // 3}", "Modality Recognition") for k in range(6000)]
    assert sum(hits) / len(hits) == pytest.approx(0.7, abs=0.03)
    dd = [sim.correct(f"d{k}", f"img{k}", "Disease Diagnosis") for k in range(4000)]
    assert sum(dd) / len(dd) == pytest.approx(0.5, abs=0.03)

    def dependence(spec: str) -> float:
        s = load_adapter(spec, cube=cube)
        pairs = [(s.correct(f"h{k}", f"im{k}", "Disease Diagnosis"), s.correct(f"l{k}", f"im{k}", "Organ Recognition"))
                 for k in range(4000)]
        given_l = [h for h, lo in pairs if lo]
        given_not = [h for h, lo in pairs if not lo]
        return sum(given_l) / len(given_l) - sum(given_not) / len(given_not)

    assert abs(dependence("simulate:accuracy=0.7,icc=0.5,seed=3")) < 0.05  # independent by default
    assert dependence("simulate:accuracy=0.7,icc=0.5,seed=3,grounded=true") > 0.2


@pytest.mark.parametrize(("spec", "message"), [
    ("simulate:accuracy=2", "accuracy=2 must be between 0 and 1"),
    ("simulate:accuracy", "is not key=value"),
    ("simulate:temperature=0.1", "unknown key 'temperature'"),
])
def test_bad_specs_say_what_to_write(cube, spec, message):
    with pytest.raises(ModelSpecError, match=message):
        load_adapter(spec, cube=cube)


def test_a_part_a_modality_or_a_task_takes_its_own_accuracy_or_chance(cube):
    sim = load_adapter("simulate:accuracy=1,seed=3,Heart=0,X-Ray=chance,VR=0.5", cube=cube)
    items = [it for it in cube.items if it.image]
    right = {it.id: sim.correct(it.id, it.image, it.task, it.part, it.modality, len(it.options))  # type: ignore[attr-defined]
             for it in items}
    assert not any(right[it.id] for it in items if it.part == "Heart")
    assert all(right[it.id] for it in items
               if it.part != "Heart" and it.modality != "X-Ray" and it.task != "View Recognition")
    xray = [right[it.id] for it in items if it.modality == "X-Ray"]
    assert 0 < sum(xray) < len(xray)  # at chance: some right, some wrong
    with pytest.raises(ModelSpecError, match="a part .Heart=0."):
        load_adapter("simulate:accuracy=0.9,Hart=0", cube=cube)
