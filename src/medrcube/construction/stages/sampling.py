"""Sampling to a balanced cube: a target count per cell, image chains kept together.

A chain is the set of items asked of one source image (its marked copies included); the
credibility analysis pairs a chain's high-level answers with its low- and mid-level
ones. Selection is deterministic (a seeded rank per item) and runs in three passes:

1. high-level cells: up to their target, preferring items whose image also has a low- or
   mid-level item to pair with;
2. partners: every chosen high-level item whose chain has no chosen low/mid item gets
   one (from the least-filled cell), even past that cell's target; these extra items
   are counted, so a report can show what balance gave up for chains;
3. low- and mid-level cells: up to their target, preferring images already chosen.

Without targets every item is kept.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from medrcube.construction.stages.production import Draft
from medrcube.construction.stages.questions import stable_seed
from medrcube.taxonomy import Level, task_level

Cell = tuple[str, str, str]


@dataclass
class Selection:
    chosen: list[Draft]
    targets: dict[Cell, float]
    counts: Counter[Cell] = field(default_factory=Counter)  # cell -> chosen items
    chain_extras: Counter[Cell] = field(default_factory=Counter)  # cell -> items kept past the target to keep a chain
    surplus: int = 0  # items left out because their cell was full

    def shortfall(self) -> dict[Cell, tuple[int, int]]:
        """Cells below their target: cell -> (chosen, target)."""
        return {c: (self.counts[c], int(t)) for c, t in self.targets.items() if math.isfinite(t) and self.counts[c] < t}


def target_for(per_cell: int | None, cell_targets: Mapping[Cell, int]) -> Callable[[Cell], float]:
    def target(cell: Cell) -> float:
        if cell in cell_targets:
            return float(cell_targets[cell])
        return float(per_cell) if per_cell is not None else math.inf

    return target


def select(drafts: Sequence[Draft], *, per_cell: int | None, cell_targets: Mapping[Cell, int] | None = None, seed: str = "") -> Selection:
    """The items of a balanced cube (see the module docstring); order follows `drafts`."""
    cell_targets = dict(cell_targets or {})
    target = target_for(per_cell, cell_targets)
    rank = {d.id: stable_seed("sample", seed, d.id) for d in drafts}
    by_cell: dict[Cell, list[Draft]] = defaultdict(list)
    by_chain: dict[str, list[Draft]] = defaultdict(list)
    for d in drafts:
        by_cell[d.cell].append(d)
        by_chain[d.chain].append(d)

    def low_mid(d: Draft) -> bool:
        return task_level(d.fact.task) in (Level.LOW, Level.MID)

    has_partner = {c: any(low_mid(d) for d in ds) for c, ds in by_chain.items()}
    chosen: set[str] = set()
    counts: Counter[Cell] = Counter()
    extras: Counter[Cell] = Counter()
    chains_used: set[str] = set()

    def take(d: Draft) -> None:
        chosen.add(d.id)
        counts[d.cell] += 1
        chains_used.add(d.chain)

    cells = sorted(by_cell)
    for cell in cells:  # 1. high-level cells
        if cell[2] and task_level(cell[2]) == Level.HIGH:
            for d in sorted(by_cell[cell], key=lambda d: (not has_partner[d.chain], rank[d.id]))[: _cap(target(cell))]:
                take(d)
    for d in [d for d in drafts if d.id in chosen]:  # 2. partners for chosen high-level items
        if any(low_mid(o) and o.id in chosen for o in by_chain[d.chain]):
            continue
        partners = [o for o in by_chain[d.chain] if low_mid(o)]
        if partners:
            best = min(partners, key=lambda o: (counts[o.cell] / max(target(o.cell), 1e-9), rank[o.id]))
            if counts[best.cell] >= target(best.cell):
                extras[best.cell] += 1
            take(best)
    for cell in cells:  # 3. low- and mid-level cells
        if task_level(cell[2]) == Level.HIGH:
            continue
        room = target(cell) - counts[cell]
        for d in sorted((d for d in by_cell[cell] if d.id not in chosen), key=lambda d: (d.chain not in chains_used, rank[d.id])):
            if room <= 0:
                break
            take(d)
            room -= 1
    kept = [d for d in drafts if d.id in chosen]
    return Selection(kept, {c: target(c) for c in cells}, counts, extras, surplus=len(drafts) - len(kept))


def _cap(t: float) -> int | None:
    return None if math.isinf(t) else int(t)
