"""gate/record.chance_levels: the items grouped by cell (and the checks by scope) give each
accuracy check the float the item-by-item mean gave: the same terms summed in the same
order, bit for bit (a bound compared with it at equality must be refused or allowed as before)."""

from __future__ import annotations

import random
from pathlib import Path

from medrcube.cube import load_cube
from medrcube.gate.checks import ACCURACY_KINDS, Check, CheckKind
from medrcube.gate.record import chance_levels

MINI = Path(__file__).resolve().parents[2] / "fixtures" / "mini"


def _item_by_item(checks: list[Check], items: list[tuple[tuple[str, str, str], int]]) -> dict[str, float]:
    """The definition: every item matched against each check's selector, in the items' order."""
    out = {}
    for c in checks:
        if c.kind not in ACCURACY_KINDS:
            continue
        scope = [n for cell, n in items if n and all(s is None or s == v for s, v in zip(c.selector, cell, strict=True))]
        if scope:
            out[c.id] = sum(1.0 / n for n in scope) / len(scope)
    return out


def _check(i: int, kind: str, part: str | None, modality: str | None, task: str | None) -> Check:
    return Check(id=f"c{i}", kind=kind, metric="accuracy", part=part, modality=modality, task=task, bound=0.5,
                 rule="lower_bound", confidence=0.95, min_n=10, max_error_rate=0.1)


def test_the_grouped_levels_are_the_item_by_item_floats_bit_for_bit() -> None:
    cube_items = list(load_cube(str(MINI)).items)
    axes = [sorted({it.cell[k] for it in cube_items}) + [None] for k in range(3)]
    kinds = [CheckKind.CELL, CheckKind.SLICE, CheckKind.OVERALL, CheckKind.CREDIBILITY]
    checks = [_check(i, kinds[i % len(kinds)], p, m, t)
              for i, (p, m, t) in enumerate((p, m, t) for p in axes[0] for m in axes[1] for t in axes[2])]
    rng = random.Random(11)
    compared = 0
    for trial in range(40):
        items = [(it.cell, len(it.options)) for it in cube_items]
        if trial:  # shuffled, cut, with items of no options, with option counts that do not sum exactly
            rng.shuffle(items)
            items = [(cell, 0 if rng.random() < 0.05 else rng.choice([n, 3, 5, 7])) for cell, n in items]
            items = items[: rng.randint(0, len(items))]
        want, got = _item_by_item(checks, items), chance_levels(checks, items)
        assert list(got) == list(want) and [v.hex() for v in got.values()] == [v.hex() for v in want.values()]
        compared += len(want)
    assert compared > 1000
