"""gate/leaking.py: the items grouped by cell once give every check the reason it had when
each check tested every item (same items, same order, so the same sums and messages)."""

from __future__ import annotations

import random
from pathlib import Path

from medrcube.cube import load_cube
from medrcube.cube.audit import Audit, AuditBounds, Finding
from medrcube.gate.leaking import Scope, leak_reason, leak_reasons, leaking

MINI = Path(__file__).resolve().parents[2] / "fixtures" / "mini"


def test_grouped_items_give_the_reasons_of_the_item_by_item_scan() -> None:
    items = list(load_cube(str(MINI)).items)
    rng = random.Random(7)
    # an options-only model right on most items of some tasks, near chance elsewhere
    leaky = {it.task for it in items[::3]}
    prior = {it.id: (rng.uniform(0.7, 1.0) if it.task in leaky else rng.uniform(0.0, 0.4)) for it in items}
    named = [Finding("sibling_named", f"item {it.id}", 1.0, 0.0, "named", "") for it in items[::11]]
    audit = Audit(tasks={}, cells={}, constant_letter={}, findings=tuple(named),
                  bounds=AuditBounds(min_cell_items=5), prior_by_item=prior)
    parts = sorted({it.part for it in items}) + [None]
    modalities = sorted({it.modality for it in items}) + [None]
    tasks = sorted({it.task for it in items}) + [None]
    checks = [(f"c{i}", "cell", Scope(p, m, t), True)
              for i, (p, m, t) in enumerate((p, m, t) for p in parts for m in modalities for t in tasks)]
    grouped = leaking(checks, items, audit)
    one_by_one = {cid: why for cid, _, scope, _ in checks if (why := leak_reason(scope, items, audit)) is not None}
    assert grouped == one_by_one
    assert 0 < len(grouped) < len(checks)  # some checks leak, some do not: the comparison means something
    # Each scope's reason taken before the verdicts (leak_reasons, while the answers come in) gives the same
    # reasons; a scope it does not hold (a check it did not know of) is assessed then.
    ahead = leak_reasons([scope for _, _, scope, _ in checks[: len(checks) // 2]], items, audit)
    assert leaking(checks, items, audit, reasons=ahead) == grouped
    assert any(why is not None for why in ahead.values()) and len(ahead) < len(checks)
