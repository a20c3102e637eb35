"""The run's one set of counters (medrcube/tally.py): every ask in one category, every item
of the cube loaded or skipped with its reason, and the same numbers read back."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from medrcube.cube import load_cube
from medrcube.records import GRADED, GradedRecord, Outcome
from medrcube.run.runner import record_counts
from medrcube.tally import NOT_ASKED, Tally, category, skipped_items, tally


def record(i: int, outcome: Outcome, *, cached: bool = False, how: str = "bare_letter") -> GradedRecord:
    return GradedRecord(item_id=f"i{i}", dataset="d", task="Organ Recognition", modality="CT", part="Brain",
                        image=f"img{i}", image_digest=None, variant="standard", rotation=0, answer=0, n_options=4,
                        prompt_hash="h", response=None, extracted=None, how=how, outcome=outcome, cached=cached)


def test_every_ask_falls_in_one_category_and_they_add_up() -> None:
    records = [record(0, Outcome.CORRECT), record(1, Outcome.WRONG, cached=True), record(2, Outcome.TRUNCATED),
               record(3, Outcome.ERROR, how="error"), record(4, Outcome.ERROR, how=NOT_ASKED),
               record(5, Outcome.UNAVAILABLE, how="unavailable"), record(6, Outcome.UNPARSED)]
    assert [category(r) for r in records] == ["answered", "cached", "answered", "failed", "not_asked",
                                              "unavailable", "answered"]
    t = tally(records, requests=5, loaded=7, stop="circuit open")
    assert (t.answered, t.cached, t.failed, t.not_asked, t.unavailable) == (3, 1, 1, 1, 1)
    assert t.answered + t.cached + t.failed + t.not_asked + t.unavailable == t.asks == 7
    assert t.graded == 3 and not t.complete  # right, wrong (cached), unparsed: graded; truncated: answered, not graded
    assert Tally.from_dict(json.loads(json.dumps(t.to_dict()))) == t
    assert "1 not asked (the run stopped)" in t.lines()[0] and "5 requests sent, 0 of them failed" in t.lines()[0]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(Outcome)), st.booleans(),
                          st.sampled_from(["bare_letter", "error", NOT_ASKED, "unavailable"])), max_size=60))
def test_the_counts_are_each_records_category_and_outcome_summed(rows) -> None:
    """tally and record_counts count by C loops over the records; they are the per-record
    definitions (`category`, the outcome, `cached`) summed, whatever mix of outcomes, cached
    records and errors never asked."""
    from collections import Counter

    records = [record(i, outcome, cached=cached, how=how) for i, (outcome, cached, how) in enumerate(rows)]
    t = tally(records, requests=len(records), loaded=len(records))
    by = Counter(category(r) for r in records)
    assert (t.answered, t.cached, t.failed, t.not_asked, t.unavailable) == (
        by["answered"], by["cached"], by["failed"], by["not_asked"], by["unavailable"])
    assert t.outcomes == dict(Counter(r.outcome.value for r in records))
    assert t.graded == sum(r.outcome in GRADED for r in records)
    # Counted from the (outcome, cached) counts a run keeps as it grades (RunResult.outcome_pairs): the same.
    pairs = dict(Counter((r.outcome, r.cached) for r in records))
    assert tally(records, requests=len(records), loaded=len(records), pairs=pairs) == t
    assert record_counts(records, pairs) == record_counts(records)
    assert record_counts(records) == {"cache_hits": sum(r.cached for r in records),
                                      "errors": sum(r.outcome is Outcome.ERROR for r in records),
                                      "unavailable": sum(r.outcome is Outcome.UNAVAILABLE for r in records)}


def test_items_skipped_at_load_are_named_with_their_reason(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "img" / "a.png")
    base = {"dataset": "d", "question": "Which organ?", "options": ["brain", "liver"], "answer": 0,
            "task": "Organ Recognition", "modality": "CT", "part": "Brain"}
    rows = [{**base, "id": "ok", "image": "img/a.png"}, {**base, "id": "gone", "image": "img/missing.png"},
            {**base, "id": "out", "image": "../a.png"}]
    (tmp_path / "cube.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cube = load_cube(tmp_path / "cube.jsonl")
    skipped = skipped_items(cube.problems)
    assert {s.item_id: s.reason for s in skipped} == {"gone": "image_missing", "out": "image_path_escapes"}
    t = tally([record(0, Outcome.CORRECT)], requests=1, loaded=len(cube), skipped=skipped)
    assert t.items == 3 and t.loaded == 1
    text = "\n".join(t.lines())
    assert "items: 3 in the cube, 1 loaded" in text and "gone: image_missing:" in text and "out: image_path_escapes:" in text
