"""Sampling to a balanced cube: targets per cell, chains kept together, deterministic."""

from __future__ import annotations

from collections import Counter

from medrcube.construction.stages.production import Draft
from medrcube.construction.stages.questions import Fact
from medrcube.construction.stages.sampling import select
from medrcube.taxonomy import Level, task_abbrev, task_level

LOW, HIGH = "Modality Recognition", "Disease Diagnosis"


def _drafts(n_images: int, tasks: tuple[str, ...], part: str = "Chest", tag: str = "a") -> list[Draft]:
    out = []
    for i in range(n_images):
        for t in tasks:
            fact = Fact(t, "q?", "A", ("B",), "d", "o")
            out.append(Draft(f"{tag}-{i:03d}-{task_abbrev(t)}", tag, f"images/{i:03d}.png", f"{tag}/{i:03d}", part, "CT", fact, "pool"))
    return out


def test_without_targets_everything_is_kept_in_order() -> None:
    drafts = _drafts(5, (LOW, HIGH))
    sel = select(drafts, per_cell=None)
    assert sel.chosen == drafts and sel.surplus == 0 and sel.shortfall() == {}


def test_targets_fill_cells_and_keep_chains() -> None:
    # 20 images with both levels, 10 with the low-level task only.
    drafts = _drafts(20, (LOW, HIGH)) + _drafts(10, (LOW,), tag="b")
    sel = select(drafts, per_cell=6, seed="s")
    counts = Counter(d.cell for d in sel.chosen)
    assert counts == {("Chest", "CT", LOW): 6, ("Chest", "CT", HIGH): 6} and sel.chain_extras == Counter()
    chains = {d.chain for d in sel.chosen if d.fact.task == HIGH}
    assert chains == {d.chain for d in sel.chosen if d.fact.task == LOW}  # the low-level items are the partners
    assert sel.surplus == len(drafts) - 12
    assert select(drafts, per_cell=6, seed="s").chosen == sel.chosen  # deterministic
    assert select(drafts, per_cell=6, seed="t").chosen != sel.chosen  # and seeded


def test_partners_are_kept_past_a_full_cell_and_counted() -> None:
    drafts = _drafts(8, (LOW, HIGH))
    sel = select(drafts, per_cell=None, cell_targets={("Chest", "CT", LOW): 3, ("Chest", "CT", HIGH): 8})
    counts = Counter(d.cell for d in sel.chosen)
    assert counts[("Chest", "CT", HIGH)] == 8 and counts[("Chest", "CT", LOW)] == 8
    assert sel.chain_extras == Counter({("Chest", "CT", LOW): 5})
    for d in sel.chosen:
        if task_level(d.fact.task) == Level.HIGH:
            assert any(o.chain == d.chain and task_level(o.fact.task) != Level.HIGH for o in sel.chosen)


def test_high_level_items_with_a_partner_come_first_and_shortfalls_are_reported() -> None:
    lonely = _drafts(5, (HIGH,), tag="l")  # images with no low-level item
    paired = _drafts(3, (LOW, HIGH), tag="p")
    sel = select(lonely + paired, per_cell=4, seed="x")
    high = [d for d in sel.chosen if d.fact.task == HIGH]
    assert len(high) == 4 and sum(d.dataset == "p" for d in high) == 3
    assert sel.shortfall() == {("Chest", "CT", LOW): (3, 4)}
