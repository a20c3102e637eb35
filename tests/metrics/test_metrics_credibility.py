"""Credibility groups and ratios on hand-built chains."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from medrcube.metrics.credibility import chain_pairs, credibility, credibility_by_part, luck_shares
from medrcube.records import Outcome
from medrcube.taxonomy import TASK_NAMES


@pytest.fixture
def chains(rec):
    return [
        # i1: DD right; MR right -> A, OR wrong -> D
        rec("i1-dd", "correct", task="Disease Diagnosis", image="i1"),
        rec("i1-mr", "correct", task="Modality Recognition", image="i1"),
        rec("i1-or", "wrong", task="Organ Recognition", image="i1"),
        # i2: AD wrong, SG right; RG wrong -> C and D
        rec("i2-ad", "wrong", task="Abnormality Diagnosis", image="i2"),
        rec("i2-sg", "correct", task="Severity Grading", image="i2"),
        rec("i2-rg", "unparsed", task="ROI Grounding", image="i2"),
        # i3: only a high-level item: no pair
        rec("i3-dd", "correct", task="Disease Diagnosis", image="i3"),
        # i4 (Brain): DD wrong; IPR right -> B; VR right -> B only when View Recognition counts
        rec("i4-dd", "wrong", task="Disease Diagnosis", image="i4", part="Brain", modality="MRI"),
        rec("i4-ipr", "correct", task="Imaging Protocol Recognition", image="i4", part="Brain", modality="MRI"),
        rec("i4-vr", "correct", task="View Recognition", image="i4", part="Brain", modality="MRI"),
        # i5: DD right, MR errored: the pair is dropped, not graded as wrong
        rec("i5-dd", "correct", task="Disease Diagnosis", image="i5"),
        rec("i5-mr", "error", task="Modality Recognition", image="i5"),
        # blind records are not part of credibility
        rec("i1-or", "correct", task="Organ Recognition", image="i1", variant="blind"),
    ]


def test_groups_and_ratios_hand_computed(chains):
    c = credibility(chains)
    assert (c.A, c.B, c.C, c.D) == (1, 1, 1, 2)
    assert c.pairs == 5 and c.dropped_pairs == 1 and c.images == 3
    assert c.luck_rate == pytest.approx(2 / 3)  # D / (A + D)
    assert c.rationality == pytest.approx(1 / 3)
    assert c.shortcut_prob == pytest.approx(2 / 3)  # D / (C + D)


def test_view_recognition_counts_when_not_excluded(chains):
    c = credibility(chains, exclude_low_tasks=())
    assert (c.A, c.B, c.C, c.D, c.pairs) == (1, 2, 1, 2, 6)


def test_per_part(chains):
    by_part = credibility_by_part(chains)
    assert list(by_part) == ["Brain", "Chest"]
    assert (by_part["Brain"].B, by_part["Brain"].pairs) == (1, 1)
    assert by_part["Brain"].rationality is None  # no right diagnosis: undefined, not 0
    assert by_part["Brain"].shortcut_prob is None
    assert (by_part["Chest"].A, by_part["Chest"].C, by_part["Chest"].D, by_part["Chest"].pairs) == (1, 1, 2, 4)


def test_empty_is_none_not_zero(rec):
    c = credibility([rec("x", "correct", task="Disease Diagnosis", image="i")])
    assert c.pairs == 0 and c.luck_rate is None and c.rationality is None and c.shortcut_prob is None


def test_unknown_tasks_are_not_paired(rec):
    records = [
        rec("h", "correct", task="Disease Diagnosis", image="i"),
        rec("x", "wrong", task="Site Specific Task", image="i"),
    ]
    assert credibility(records).pairs == 0


outcomes = st.sampled_from([Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSED, Outcome.ERROR])


@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from(TASK_NAMES), outcomes), max_size=40))
def test_groups_sum_to_pairs(rec, spec):
    records = [rec(f"r{i}", o, task=t, image=f"img{img}") for i, (img, t, o) in enumerate(spec)]
    c = credibility(records)
    assert c.A + c.B + c.C + c.D == c.pairs
    pairs, dropped = chain_pairs(records)
    assert len(pairs) == c.pairs and dropped == c.dropped_pairs
    # Every (high, low) combination on an image is either counted or dropped.
    expected = 0
    for img in range(5):
        on = [r for r in records if r.image == f"img{img}"]
        highs = [r for r in on if r.task in ("Disease Diagnosis", "Abnormality Diagnosis", "Severity Grading")]
        lows = [r for r in on if r.task in ("Modality Recognition", "Imaging Protocol Recognition",
                                            "Organ Recognition", "ROI Grounding")]
        expected += len(highs) * len(lows)
    assert c.pairs + c.dropped_pairs == expected
    if c.rationality is not None:
        assert c.rationality + c.luck_rate == pytest.approx(1.0)
    assert sum(p.pairs for p in credibility_by_part(records).values()) == c.pairs


def test_luck_shares_count_each_right_diagnosis_once(chains):
    pairs, _ = chain_pairs(chains)
    # i1-dd right with MR right and OR wrong: 1/2; i2-sg right with RG wrong: 1; wrong diagnoses: none.
    assert luck_shares(iter(pairs)) == [("i1", 0.5), ("i2", 1.0)]
