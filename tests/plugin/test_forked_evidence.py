"""The family's evidence collected by the process and a forked copy of it side by side
(plugin/speed/forked_evidence.py): the same evidence, verdicts and gate verdict as one process
collecting it all, and the copy's share collected here when the copy does not answer."""

from __future__ import annotations

import random

import pytest

from medrcube.gate.checks import build_checks
from medrcube.gate.evaluate import evaluate_gate
from medrcube.gate.evidence import ByScope
from medrcube.gate.thresholds import policy_from_dict
from medrcube.plugin.speed import forked_evidence

pytestmark = pytest.mark.skipif(not forked_evidence.usable(forked_evidence.MIN_RECORDS, 2),
                                reason="a forked copy helps only on Linux with a second core")

DD, MR = "Disease Diagnosis", "Modality Recognition"
POLICY = {
    "version": 1,
    "defaults": {"rule": "lower_bound", "confidence": 0.95, "min_n": 50, "max_error_rate": 0.05},
    "overall": {"bound": 0.5},
    "cells": [{"match": "*/*/*", "bound": 0.5}],
    "credibility": {"min_grounding": 0.1, "min_pairs": 50, "by_part": True, "exclude_low_tasks": []},
    "image_dependence": {"min_drop": 0.1},
}


def _records(rec, images: int = 1600) -> list:
    """Two tasks an image in two parts, asked with and without the image: 6,400 records."""
    rng, out = random.Random(7), []
    for k in range(images):
        part, modality = ("Chest", "X-Ray") if k % 2 else ("Brain", "MRI")
        for task, tag, p in ((DD, "dd", 0.72), (MR, "mr", 0.85)):
            for variant, q in (("standard", p), ("blind", 0.4)):
                outcome = "correct" if rng.random() < q else "error" if rng.random() < 0.01 else "wrong"
                out.append(rec(f"{tag}{k}", outcome, task=task, part=part, modality=modality, image=f"s{k}.png",
                               variant=variant))
    return out


def _checks(records):
    cells = sorted({(r.part, r.modality, r.task) for r in records})
    return build_checks(cells, policy_from_dict(POLICY), variants=("standard", "blind"))


def test_the_copy_and_this_process_collect_what_one_process_does(rec):
    records = _records(rec)
    checks = _checks(records)
    shares: dict[str, int] = {}
    alone = evaluate_gate(checks, records)
    in_two = evaluate_gate(checks, records, collect_family=lambda *a: forked_evidence.collect_in_two(*a, shares=shares))
    assert repr(in_two.evidences) == repr(alone.evidences)
    assert in_two.by_id() == alone.by_id() and in_two.gate == alone.gate
    assert {"credibility", "image_dependence", "cell", "overall"} <= {c.kind for c in checks}
    assert shares["copy"] > 0 and shares["here"] > 0 and shares["here"] + shares["copy"] == len(checks)
    assert all(a is b for a, b in zip((e.check for e in in_two.evidences), checks, strict=True))  # the checks themselves


def test_a_copy_that_does_not_answer_is_ended_and_its_share_collected_here(rec, monkeypatch):
    records = _records(rec)
    checks = _checks(records)
    monkeypatch.setattr(forked_evidence, "WAIT_S", 0.0)  # no time at all for the copy's answer
    shares: dict[str, int] = {}
    in_two = evaluate_gate(checks, records, collect_family=lambda *a: forked_evidence.collect_in_two(*a, shares=shares))
    assert shares["copy"] == 0  # nothing of the copy's was taken: this process collected its share
    assert repr(in_two.evidences) == repr(evaluate_gate(checks, records).evidences)


def test_a_small_family_is_collected_here_alone(rec):
    records = _records(rec, images=100)
    shares: dict[str, int] = {}
    forked_evidence.collect_in_two(_checks(records), ByScope(records), shares=shares)
    assert shares == {}  # not forked: 400 records are below MIN_RECORDS
