"""Reading runs from elsewhere: the reference evaluator's results.json and metrics_summary.json,
side by side with medrcube runs, and clear errors on unreadable input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_builders import rec, write_run

from medrcube.records import Outcome
from medrcube.report.leaderboard import MixedRunsError, leaderboard
from medrcube.report.readers import REFERENCE, REFERENCE_SUMMARY, RunReadError, read_run

# (perception right, diagnosis right) per image: A=6, B=3, C=5, D=8.
OUTCOMES = [(True, True)] * 6 + [(True, False)] * 3 + [(False, False)] * 5 + [(False, True)] * 8


def _reference_entry(item_id: str, task: str, correct: bool, image: str) -> dict:
    """One results.json record as the reference evaluator writes it (its test.json fields,
    its prompt and ground-truth letter, the response and its verdict)."""
    return {
        "id": item_id, "dataset": "RefSet", "image_path": f"/data/RefSet/{image}", "question": f"Question about {image}?",
        "option_A": "first", "option_B": "second", "option_C": "third", "gt_answer": "second",
        "task": task, "modality": "X-ray", "parts": "Lung", "original_task": task,
        "_prompt": "Question: ...", "_gt_letter": "B", "model_response": "B" if correct else "A", "correct": correct,
    }


def _reference_results() -> list[dict]:
    entries = []
    for i, (low_ok, high_ok) in enumerate(OUTCOMES):
        image = f"pictures/{i:03d}.png"
        entries.append(_reference_entry(f"ad-{i:03d}", "Abnormity Diagnosis", high_ok, image))
        entries.append(_reference_entry(f"or-{i:03d}", "Organ Recognition", low_ok, image))
        # View Identification is left out of the pairs, as the reference analysis does.
        entries.append(_reference_entry(f"vi-{i:03d}", "View Identification", not low_ok, image))
    return entries


@pytest.fixture
def reference_dir(tmp_path: Path) -> Path:
    d = tmp_path / "published-model"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(_reference_results(), indent=2), encoding="utf-8")
    return d


def test_reference_results_json_becomes_canonical_standard_records(reference_dir: Path) -> None:
    for given in (reference_dir, reference_dir / "results.json"):
        run = read_run(given)
        assert run.kind == REFERENCE
        assert len(run.records) == 3 * len(OUTCOMES)
        r = next(x for x in run.records if x.item_id == "ad-000")
        assert (r.task, r.modality, r.part, r.variant) == ("Abnormality Diagnosis", "X-Ray", "Lungs", "standard")
        assert r.outcome is Outcome.CORRECT and r.answer == 1 and r.extracted == 1 and r.n_options == 3
        assert {x.task for x in run.records} == {"Abnormality Diagnosis", "Organ Recognition", "View Recognition"}
        assert run.questions["ad-000"] == ("Question about pictures/000.png?", ("first", "second", "third"))
        assert run.template == "default"  # the reference wording is our default template


def test_reference_credibility_comes_from_the_correct_flags_per_image(reference_dir: Path, tmp_path: Path) -> None:
    result = leaderboard([reference_dir], tmp_path / "lb", plots=False)
    label = result.order[0]
    cred = result.credibility.loc[label]
    assert [int(cred[g]) for g in "ABCD"] == [6, 3, 5, 8]
    assert cred["luck_rate"] == pytest.approx(8 / 14)
    assert cred["shortcut_prob"] == pytest.approx(8 / 13)
    # Accuracy: the correct flags as they are (OR + AD + VI items).
    right = sum(lo for lo, hi in OUTCOMES) + sum(hi for lo, hi in OUTCOMES) + sum(not lo for lo, hi in OUTCOMES)
    assert result.table.at[label, "Overall"] == round(100 * right / (3 * len(OUTCOMES)), 2)
    assert "(reference)" in label


def test_reference_and_medrcube_runs_side_by_side(reference_dir: Path, tmp_path: Path) -> None:
    cell_ad = ("Lungs", "X-Ray", "Abnormality Diagnosis")
    cell_or = ("Lungs", "X-Ray", "Organ Recognition")
    ours = []
    for i in range(len(OUTCOMES)):
        ours.append(rec(f"ad-{i:03d}", cell_ad, correct=True, image=f"RefSet/pictures/{i:03d}.png"))
        ours.append(rec(f"or-{i:03d}", cell_or, correct=i % 2 == 0, image=f"RefSet/pictures/{i:03d}.png"))
        ours.append(rec(f"vi-{i:03d}", ("Lungs", "X-Ray", "View Recognition"), correct=False,
                        image=f"RefSet/pictures/{i:03d}.png"))
    ours.append(rec("extra-restricted", cell_ad, outcome=Outcome.UNAVAILABLE, image=""))
    run_dir = write_run(tmp_path, "our-model", ours)
    result = leaderboard([run_dir, reference_dir], tmp_path / "lb", plots=False)
    assert set(result.table.index) == {"our-model", "published-model (reference)"}
    assert result.table.at["our-model", "AD"] == 100.0
    assert any("no cube fingerprint" in n for n in result.notes)
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "| published-model (reference) |" in md

    # A reference run asking items the other run does not have is refused.
    entries = _reference_results() + [_reference_entry("not-in-our-cube", "Organ Recognition", True, "x.png")]
    other = tmp_path / "other-ref"
    other.mkdir()
    (other / "results.json").write_text(json.dumps(entries), encoding="utf-8")
    with pytest.raises(MixedRunsError, match="item ids differ") as e:
        leaderboard([run_dir, other], tmp_path / "lb2", plots=False)
    assert "not-in-our-cube" in str(e.value)


def test_reference_metrics_summary_alone(tmp_path: Path) -> None:
    summary = {
        "global": {"n": 40, "correct": 22, "acc": 0.55},
        "slice_results": {
            "by_task": {"task=Abnormity Diagnosis": {"n": 20, "correct": 14, "acc": 0.7},
                        "task=Organ Recognition": {"n": 20, "correct": 8, "acc": 0.4}},
            "by_modality": {"modality=X-ray": {"n": 40, "correct": 22, "acc": 0.55}},
            # Two release spellings of one part are merged into the canonical name.
            "by_parts": {"parts=Lung": {"n": 30, "correct": 15, "acc": 0.5}, "parts=Lungs": {"n": 10, "correct": 7, "acc": 0.7}},
            "by_dataset": {"dataset=RefSet": {"n": 40, "correct": 22, "acc": 0.55}},
        },
        "voxel_results": {"by_task_modality_parts": {
            "task=Abnormity Diagnosis|modality=X-ray|parts=Lung": {"n": 20, "correct": 14, "acc": 0.7},
            "task=Organ Recognition|modality=X-ray|parts=Lung": {"n": 20, "correct": 8, "acc": 0.4},
        }},
    }
    path = tmp_path / "metrics_summary.json"
    path.write_text(json.dumps(summary), encoding="utf-8")
    run = read_run(path)
    assert run.kind == REFERENCE_SUMMARY and run.records == []
    result = leaderboard([path], tmp_path / "lb", plots=False)
    label = result.order[0]
    assert result.table.at[label, "Overall"] == 55.0
    assert result.table.at[label, "AD"] == 70.0 and result.table.at[label, "X-Ray"] == 55.0
    assert result.table.at[label, "Lungs"] == 55.0 and result.counts.at[label, "Lungs"] == 40
    assert result.credibility.at[label, "A"] is None or result.credibility.isna().at[label, "A"]


def test_unreadable_inputs_name_the_file_and_the_fix(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RunReadError, match="neither results.jsonl"):
        read_run(empty)
    with pytest.raises(RunReadError, match="no such file"):
        read_run(tmp_path / "missing")

    bad = tmp_path / "bad-ref"
    bad.mkdir()
    entries = _reference_results()[:2]
    del entries[1]["correct"]
    (bad / "results.json").write_text(json.dumps(entries), encoding="utf-8")
    with pytest.raises(RunReadError) as e:
        read_run(bad)
    assert "entry 1" in str(e.value) and "'correct'" in str(e.value) and "results.json" in str(e.value)

    run_dir = write_run(tmp_path, "cut", [rec("a", ("Chest", "X-Ray", "Disease Diagnosis"))])
    with open(run_dir / "results.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"item_id": "b", "task": \n')
    with pytest.raises(RunReadError) as e:
        read_run(run_dir)
    assert "results.jsonl:2" in str(e.value) and "run the same `medrcube run` command again" in str(e.value)
