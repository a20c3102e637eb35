"""replay:FILE (medrcube.models.replay): recorded responses, never a guess."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from medrcube.models.base import ErrorKind, Request
from medrcube.models.registry import ModelSpecError, load_adapter
from medrcube.models.replay import ReplayAdapter, split_variant


def _req(item_id: str, variant: str = "standard") -> Request:
    return Request(key=f"{item_id}/{variant}", item_id=item_id, prompt="p", variant=variant, options=("a", "b"))


def _run(adapter, reqs):
    return asyncio.run(adapter.generate(reqs))


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_by_id_variant_and_rotation(tmp_path: Path) -> None:
    p = _jsonl(
        tmp_path / "r.jsonl",
        [
            {"id": "a", "response": "B", "extra": "ignored"},
            {"id": "a", "variant": "blind", "response": "The answer is A."},
            {"id": "a", "variant": "shuffled", "rotation": 2, "response": "C"},
            {"id": "b", "response": None, "error": "timeout"},
        ],
    )
    adapter = load_adapter(f"replay:{p}")
    assert isinstance(adapter, ReplayAdapter) and len(adapter) == 4
    assert adapter.fingerprint == "replay:" + hashlib.sha256(p.read_bytes()).hexdigest()
    assert adapter.spec == f"replay:{p}"
    out = _run(adapter, [_req("a"), _req("a", "blind"), _req("a", "shuffled:2"), _req("a", "shuffled:1"), _req("b"), _req("zz")])
    assert [r.text for r in out[:3]] == ["B", "The answer is A.", "C"]
    missing_rot, null, missing = out[3], out[4], out[5]
    assert missing_rot.error_kind is ErrorKind.INTERNAL and "rotation 1" in missing_rot.error
    assert null.text is None and "null" in null.error
    assert missing.text is None and missing.error == f"no response for item zz in {p}"


def test_reference_results_json(tmp_path: Path) -> None:
    """The reference evaluator writes a JSON list of its samples with `model_response`."""
    details = [
        {"id": "x1", "question": "q", "option_A": "CT", "gt_answer": "CT", "model_response": "A", "correct": True},
        {"id": "x2", "question": "q", "option_A": "CT", "gt_answer": "MRI", "model_response": "A chest X-ray...", "correct": True},
    ]
    p = tmp_path / "results.json"
    p.write_text(json.dumps(details, indent=2), encoding="utf-8")
    out = _run(load_adapter(f"replay:{p}"), [_req("x2"), _req("x1"), _req("x3"), _req("x1", "blind")])
    assert [r.text for r in out[:2]] == ["A chest X-ray...", "A"]
    assert not out[2].ok and "x3" in out[2].error
    assert not out[3].ok and "blind" in out[3].error  # a standard answer is not replayed for blind


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"id": "a", "response": "A"}\nnot json\n', ":2"),
        ('{"id": "a"}\n', "'response'"),
        ('{"id": "a", "model_response": "A"}\n', "JSON list"),
        ('{"id": "a", "response": 3}\n', "string"),
        ('{"id": "a", "response": "A"}\n{"id": "a", "response": "B"}\n', "second response"),
        ('{"id": "a", "response": "A", "rotation": "2"}\n', "rotation"),
        ("[1, 2]", "model_response"),
        ("[{broken", "not valid JSON"),
        ("\n\n", "no responses"),
    ],
)
def test_bad_files_name_the_file_and_line(tmp_path: Path, content: str, needle: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(ModelSpecError) as err:
        load_adapter(f"replay:{p}")
    assert "bad.jsonl" in str(err.value) and needle in str(err.value)


@pytest.mark.parametrize(
    ("variant", "expected"),
    [("standard", ("standard", 0)), ("blind", ("blind", 0)), ("shuffled:3", ("shuffled", 3)), ("shuffled@r1", ("shuffled", 1)), ("", ("standard", 0))],
)
def test_split_variant(variant: str, expected: tuple[str, int]) -> None:
    assert split_variant(variant) == expected


# ---------------------------------------------------------------- a run replays itself


def test_a_run_replays_to_the_same_records(tmp_path: Path) -> None:
    """random -> results.jsonl -> replay: every (item, variant, rotation) answered the same.

    This goes through the real cube loader, runner and run directory, so the replay
    file format and the runner's variant labels ("shuffled:2") are checked to agree.
    """
    from medrcube.cube import load_cube
    from medrcube.run.runner import run_cube
    from medrcube.rundir.files import write_run_dir
    from medrcube.testing.gencube import generate_release_cube

    root = generate_release_cube(tmp_path / "cube", n_items=40, n_datasets=4, n_images=12, image_size=32, n_base_images=4, seed=3)
    cube = load_cube(root)
    variants = ("standard", "blind", "shuffled:2")
    first = run_cube(cube, load_adapter("random:5"), variants=variants)
    run_dir = write_run_dir(tmp_path / "run", first)
    replayed = run_cube(cube, load_adapter(f"replay:{run_dir / 'results.jsonl'}"), variants=variants)

    def key(r):
        return (r.item_id, r.variant, r.rotation)

    a = {key(r): (r.response, r.extracted, r.outcome) for r in first.records}
    b = {key(r): (r.response, r.extracted, r.outcome) for r in replayed.records}
    assert a == b
    assert replayed.errors == 0 and first.errors == 0
    assert {r.variant for r in first.records} == {"standard", "blind", "shuffled"}
    assert any(r.rotation == 1 for r in first.records)
