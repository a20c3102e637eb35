"""The worst items shown for a check (metrics/worst.worst_records): weakest cells first,
round robin, each cell in (outcome rank, item id) order; the same list as sorting every
cell whole, for any records and limit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from medrcube.metrics.worst import _RANK, worst_records
from medrcube.records import GradedRecord, Outcome

_OUTCOMES = [Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSED, Outcome.REFUSED, Outcome.ERROR, Outcome.UNAVAILABLE]


def _sorted_whole(records: list[GradedRecord], limit: int) -> list[GradedRecord]:
    """The rule, written plainly: every cell's not-correct graded records sorted whole."""
    cells: dict[tuple[str, str, str], list[GradedRecord]] = {}
    for r in records:
        if r.graded:
            cells.setdefault(r.cell, []).append(r)
    order = sorted(cells, key=lambda c: (sum(r.correct for r in cells[c]) / len(cells[c]), c))
    queues = [sorted((r for r in cells[c] if not r.correct), key=lambda r: (_RANK.get(r.outcome, 3), r.item_id))
              for c in order]
    # Round robin, written as rounds: every cell's first, then every cell's second, ...
    rounds = max((len(q) for q in queues), default=0)
    return [q[i] for i in range(rounds) for q in queues if i < len(q)][:limit]


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(_OUTCOMES), st.sampled_from(["Disease Diagnosis", "Organ Recognition"]),
                               st.sampled_from(["Chest", "Brain"]), st.integers(0, 40)), max_size=60),
       limit=st.integers(0, 12))
def test_the_worst_items_are_the_rule_applied_to_whole_cells(rec, rows, limit) -> None:
    records = [rec(f"q{n:02d}", outcome, task=task, part=part) for outcome, task, part, n in rows]
    assert worst_records(records, limit) == _sorted_whole(records, limit)
    assert all(not r.correct and r.graded for r in worst_records(records, limit))
