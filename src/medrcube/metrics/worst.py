"""Which wrong answers to show first: the evidence attached to a failed check and the
report's "worst items" table, chosen by one rule."""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from medrcube.records import GRADED, GradedRecord, Outcome

# A wrong answer is the clearest evidence, then an unreadable one, then a refusal.
_RANK = {Outcome.WRONG: 0, Outcome.UNPARSED: 1, Outcome.REFUSED: 2}


def worst_records(records: Iterable[GradedRecord], limit: int = 5) -> list[GradedRecord]:
    """Graded, not-correct records, weakest cells first, taken one cell at a time (round
    robin) so that the list shows where a model fails rather than many items of one cell.
    Deterministic: ties break on the cell and the item id, never on record order."""
    by_cell: dict[tuple[str, str, str], list[GradedRecord]] = defaultdict(list)
    tally: dict[tuple[str, str, str], list[int]] = {}
    for r in records:
        outcome = r.outcome
        if outcome not in GRADED:
            continue
        cell = r.cell
        counts = tally.get(cell)
        if counts is None:
            counts = tally[cell] = [0, 0]
        counts[1] += 1
        if outcome is Outcome.CORRECT:
            counts[0] += 1
        else:
            by_cell[cell].append(r)
    return worst_of_cells({cell: (right, graded, by_cell.get(cell, ())) for cell, (right, graded) in tally.items()},
                          limit)


Cell = tuple[str, str, str]


def worst_of_cells(cells: Mapping[Cell, tuple[int, int, Sequence[GradedRecord]]], limit: int = 5) -> list[GradedRecord]:
    """`worst_records` of records already counted per cell: (right, graded, the graded
    records not right in their order) per cell."""
    # At most `limit` from any cell are shown: each cell's first `limit` in its order (heapq.nsmallest
    # is sorted(...)[:limit], ties kept in record order), not the whole cell sorted. Every queue holds
    # one record at least, so the round robin below reads the first `limit` cells' queues only.
    weakest = sorted(((cell, v) for cell, v in cells.items() if v[2]), key=lambda kv: (kv[1][0] / kv[1][1], kv[0]))
    queues = [heapq.nsmallest(limit, missed, key=lambda r: (_RANK.get(r.outcome, 3), r.item_id))
              for _, (_, _, missed) in weakest[:limit]]
    out: list[GradedRecord] = []
    while len(out) < limit and any(queues):
        for q in queues:
            if q and len(out) < limit:
                out.append(q.pop(0))
    return out
