"""Per-item adapters (the baselines) keep one stored answer per item even where two items
render the same prompt; prompt-only models share one. Regression test: the random
baseline's blind answers used to depend on which worker asked first."""

from __future__ import annotations

import json

from medrcube.cube import load_cube
from medrcube.models.base import Request
from medrcube.models.baselines import RandomAdapter
from medrcube.run.plan import plan_asks
from medrcube.run.runner import run_cube
from medrcube.run.store import ResponseStore


def _twin_cube(tmp_path, n=12):
    # Same question and options for every item: their blind prompts are identical.
    lines = []
    for i in range(n):
        lines.append(
            {
                "id": f"twin-{i:02d}",
                "dataset": "twins",
                "image": None,
                "question": "Which imaging modality is this?",
                "options": ["CT", "MRI", "X-Ray", "US"],
                "answer": i % 4,
                "task": "Modality Recognition",
                "modality": "CT",
                "part": "Brain",
                "original_task": "",
                "restricted": True,
                "meta": {},
            }
        )
    path = tmp_path / "twins.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return load_cube(path)


def test_keys_carry_the_item_only_for_per_item_adapters(tmp_path):
    cube = _twin_cube(tmp_path)
    shared = {a.key for a in plan_asks(cube, "blind", fingerprint="m")}
    per_item = {a.key for a in plan_asks(cube, "blind", fingerprint="m", keyed_by_item=True)}
    assert len(shared) == 1
    assert len(per_item) == len(cube)


def test_random_baseline_answers_each_twin_item_by_its_own_seed(tmp_path):
    cube = _twin_cube(tmp_path)
    adapter = RandomAdapter(seed=3)
    with ResponseStore(tmp_path / "store") as store:
        result = run_cube(cube, adapter, variants=("blind",), store=store)
    assert result.requests_sent == len(cube)
    for rec in result.records:
        item = next(i for i in cube.items if i.id == rec.item_id)
        expected = adapter.choose(Request(key="", item_id=item.id, prompt="", variant="blind", options=item.options))
        assert rec.extracted == expected, rec.item_id
    # And the answers differ across items, so a shared key would have been visible.
    assert len({rec.extracted for rec in result.records}) > 1
