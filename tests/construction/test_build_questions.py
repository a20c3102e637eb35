"""Item production: balanced answer letters, distractors from the same axis, lesion facts."""

from __future__ import annotations

from collections import Counter

import pytest

from medrcube.construction.stages import questions
from medrcube.construction.stages.questions import Fact, ItemWriter
from medrcube.cube.item import LETTERS


def _rec(writer: ItemWriter, fact: Fact, i: int) -> dict:
    return writer.record(fact, item_id=f"x-{i}", dataset="x", image_path="images/1.png", modality="CT", part="Chest", meta={"k": 1})


def test_correct_letters_cycle_per_task_and_option_count() -> None:
    writer = ItemWriter()
    modality = questions.modality_fact("CT", "tag")
    plane = questions.plane_fact("axial", "iop", "DICOM ImageOrientationPatient")
    recs = [_rec(writer, modality if i % 3 else plane, i) for i in range(24)]
    by_task: dict[str, Counter] = {}
    for r in recs:
        by_task.setdefault(r["task"], Counter())[r["correct_index"]] += 1
    assert by_task["Modality Recognition"] == Counter({x: 4 for x in "ABCD"})
    assert by_task["View Recognition"] == Counter({x: 2 for x in "ABCD"})
    for r in recs:
        opts = [r[f"option_{x}"] for x in LETTERS if f"option_{x}" in r]
        assert opts[LETTERS.index(r["correct_index"])] == r["gt_answer"] and len(set(opts)) == len(opts)
        assert r["meta"]["k"] == 1 and r["meta"]["derivation"] in ("tag", "iop") and r["restricted"] is False


def test_arrangement_is_deterministic_and_draws_from_the_pool() -> None:
    fact = Fact("Disease Diagnosis", "q?", "Non-ossifying fibroma", questions.BONE_LESION_DIAGNOSES, "doc", "documented diagnosis")
    a = ItemWriter().arrange(fact, "id-1")
    b = ItemWriter().arrange(fact, "id-1")
    assert a == b and a[0][a[1]] == "Non-ossifying fibroma"
    assert len(a[0]) == 4 and set(a[0]) - {"Non-ossifying fibroma"} <= set(questions.BONE_LESION_DIAGNOSES)


def test_fact_rejects_ambiguous_options() -> None:
    with pytest.raises(ValueError, match="contain the answer"):
        Fact("Organ Recognition", "q", "Brain", ("Brain", "Heart"), "d", "o")
    with pytest.raises(ValueError, match="canonical task"):
        Fact("Organ Guessing", "q", "Brain", ("Heart",), "d", "o")
    with pytest.raises(ValueError, match="no distractor set"):
        questions.region_fact("Spleen", "d", "o")
    with pytest.raises(ValueError, match="at least one distractor"):
        Fact("Organ Recognition", "q", "Brain", (), "d", "o")


def test_protocol_pools_never_pair_overlapping_protocols() -> None:
    # A TOF angiogram is a T1-weighted gradient echo: the two must never be offered together.
    assert "T1-weighted" not in questions.MRI_PROTOCOLS["Time-of-flight MR angiography"]
    for answer, distractors in {**questions.MRI_PROTOCOLS, **questions.US_MODES, **questions.CT_PROTOCOLS}.items():
        assert answer not in distractors and len(distractors) >= 3


def test_lesion_facts() -> None:
    (absent,) = questions.lesion_facts(None)
    assert absent.task == "Abnormality Diagnosis" and absent.answer == "No" and absent.synthetic
    meta = {"quadrant": "lower right", "size_class": "large", "center_row_col": [80, 90], "diameter_px": 20.0,
            "diameter_fraction": 0.18, "polarity": "brighter"}  # fmt: skip
    ad, rg, sg = questions.lesion_facts(meta)
    assert (ad.answer, rg.answer) == ("Yes", "Lower right")
    assert sg.answer.startswith("Large") and len(rg.distractors) == 3 and len(sg.distractors) == 3
    assert all(f.synthetic for f in (ad, rg, sg))
