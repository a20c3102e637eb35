"""The sequential driver on a cube held in memory, answered by the simulated model through
the real runner: what it asks (only the items an open required check reads, and every
item a required check without a sequence reads), when a check stops holding images, and
that its decisions are the betting tests' and the family's."""

from __future__ import annotations

import asyncio
import hashlib
import io
from typing import Any

from PIL import Image

from medrcube.cube.item import Cube, Item
from medrcube.gate.checks import build_checks
from medrcube.gate.thresholds import policy_from_dict
from medrcube.models.registry import load_adapter
from medrcube.run.order import SequentialPlan
from medrcube.run.runner import run_cube_async
from medrcube.sequential import run_sequential, sequential_verdicts
from medrcube.sequential.tracks import HOPELESS

IMAGES = 240


def _png(n: int) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (8, 8), n % 256).save(buf, "PNG")
    return buf.getvalue()


def _cube() -> Cube:
    """Each image holds one modality question (perception) and one diagnosis question."""
    images = {f"img{i}.png": _png(i) for i in range(IMAGES)}
    items = []
    for i in range(IMAGES):
        items.append(Item(id=f"mr{i}", dataset="d", image=f"img{i}.png", question=f"Modality of case {i}?",
                          options=("CT", "X-Ray", "MRI", "US"), answer=1, task="Modality Recognition",
                          modality="X-Ray", part="Chest"))
        items.append(Item(id=f"dd{i}", dataset="d", image=f"img{i}.png", question=f"Diagnosis of case {i}?",
                          options=("Normal", "Pneumonia"), answer=i % 2, task="Disease Diagnosis",
                          modality="X-Ray", part="Chest"))
    return Cube(items=tuple(items), source="memory", fingerprint="f", read_image=lambda k: images[k],
                digests={k: hashlib.sha256(v).hexdigest() for k, v in images.items()})


def _checks(cube: Cube, doc: dict[str, Any]) -> list[Any]:
    policy = policy_from_dict({"version": 1, "defaults": {"rule": "lower_bound", "confidence": 0.95, "min_n": 10,
                                                          "above_chance": 0}, **doc}, source="test")
    return build_checks({(it.part, it.modality, it.task) for it in cube.items}, policy)


def _run(cube: Cube, checks: list[Any], spec: str, seed: int = 1) -> tuple[Any, list[str]]:
    adapter = load_adapter(spec, cube=cube)
    asked: list[str] = []

    async def ask(part: Cube) -> list[Any]:
        asked.extend(it.id for it in part.items)
        return (await run_cube_async(part, adapter)).records

    return asyncio.run(run_sequential(cube, checks, SequentialPlan(seed=seed), ask)), asked


CELL_ONLY = {"cells": [{"match": "*/*/Modality Recognition", "bound": 0.5},
                       {"match": "*/*/Disease Diagnosis", "bound": 0.5, "required": False}]}


def test_only_the_items_an_open_required_check_reads_are_asked() -> None:
    cube = _cube()
    checks = _checks(cube, CELL_ONLY)
    run, asked = _run(cube, checks, "simulate:accuracy=0.95,seed=1")
    assert asked and all(i.startswith("mr") for i in asked), "a diagnosis item was asked for no required check"
    assert len(asked) == len(set(asked)) < IMAGES  # decided early, nothing asked twice
    mr = run.tracks["Chest/X-Ray/Modality Recognition"]
    assert mr.test.decision == "pass"
    # The optional diagnosis check was fed only while its stream was whole: its first
    # image was cut (no required check read it), so it ends there, undecided.
    dd = run.tracks["Chest/X-Ray/Disease Diagnosis"]
    assert dd.broken and dd.used_units == 0 and dd.test.decision is None
    assert "stream ended" in dd.stop


def test_a_required_check_without_a_sequence_holds_every_item_it_reads() -> None:
    cube = _cube()
    checks = _checks(cube, {**CELL_ONLY, "credibility": {"min_grounding": 0.1, "exclude_low_tasks": []}})
    run, asked = _run(cube, checks, "simulate:accuracy=0.95,seed=1")
    assert set(asked) == {it.id for it in cube.items}
    assert run.items_held == len(cube.items)
    verdicts = sequential_verdicts(checks, run)
    assert "whole scope" in verdicts["credibility/overall"].message


def test_a_check_at_its_bound_is_released_and_ends_undecided() -> None:
    cube = _cube()
    checks = _checks(cube, {"cells": [{"match": "*/*/Modality Recognition", "bound": 0.5},
                                      {"match": "*/*/Disease Diagnosis", "bound": 0.5, "required": False}]})
    run, asked = _run(cube, checks, "simulate:accuracy=0.5,seed=3")
    mr = run.tracks["Chest/X-Ray/Modality Recognition"]
    assert mr.test.decision is None and mr.stop == HOPELESS
    assert len(asked) < IMAGES  # released before the cube ran out
    v = sequential_verdicts(checks, run)["Chest/X-Ray/Modality Recognition"]
    assert v.status.value == "undecided"


def test_fail_claims_are_decided_by_the_family() -> None:
    cube = _cube()
    checks = _checks(cube, {"overall": {"bound": 0.6}, "cells": [{"match": "*/*/*", "bound": 0.6}]})
    run, _ = _run(cube, checks, "simulate:accuracy=0.2,seed=2")
    family = [t for t in run.tracks.values() if t.family_weight > 0]
    assert len(family) == 3 and all(t.test.fail_by_family for t in family)
    assert all(t.test.decision == "fail" for t in family)
    # Each was decided with an e-value below what Bonferroni over the three would need.
    assert any(t.test.e_fail < 3 / t.test.alpha_fail for t in family)
    v = sequential_verdicts(checks, run)["overall"]
    assert v.status.value == "fail" and "closed testing" in v.guarantee


def test_a_regression_check_stops_on_its_own_paired_sequence() -> None:
    cube = _cube()
    policy = policy_from_dict({"version": 1, "defaults": {"rule": "lower_bound", "confidence": 0.95, "min_n": 10,
                                                          "above_chance": 0},
                               "regression": {"margin": 0.05, "cells_required": False}}, source="test")
    checks = [c for c in build_checks({(it.part, it.modality, it.task) for it in cube.items}, policy,
                                      has_baseline=True) if c.kind.value == "regression"]
    assert checks and all(c.params.get("margin") == 0.05 for c in checks)
    baseline = asyncio.run(run_cube_async(cube, load_adapter("simulate:accuracy=0.9,seed=4", cube=cube))).records

    def regression(spec: str) -> Any:
        adapter = load_adapter(spec, cube=cube)

        async def ask(part: Cube) -> list[Any]:
            return (await run_cube_async(part, adapter)).records

        run = asyncio.run(run_sequential(cube, checks, SequentialPlan(seed=2), ask, baseline_records=baseline))
        return run, sequential_verdicts(checks, run, baseline)

    same, verdicts = regression("simulate:accuracy=0.9,seed=4")  # the baseline itself: no drop
    required = [c.id for c in checks if c.required]
    assert all(same.tracks[cid].test.decision == "pass" for cid in required)
    assert same.items_asked < len(cube.items)
    assert all(verdicts[cid].status.value == "pass" for cid in required)
    worse, verdicts = regression("simulate:accuracy=0.4,seed=4")  # fifty points below the baseline
    assert all(worse.tracks[cid].test.decision == "fail" for cid in required)
    assert all(verdicts[cid].status.value == "fail" for cid in required)
