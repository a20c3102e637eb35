"""The sequential order: images together, seeded, stable across processes and cube order."""

from __future__ import annotations

from medrcube.cube.item import Item
from medrcube.run.order import next_batch, unit_order


def item(i: int, image: str | None) -> Item:
    return Item(id=f"q{i}", dataset="d", image=image, question=f"Q{i}?", options=("a", "b"), answer=0,
                task="Disease Diagnosis", modality="CT", part="Chest")


ITEMS = [item(i, f"img{i // 3}.png" if i < 30 else None) for i in range(36)]


def test_items_of_one_image_stay_together_in_cube_order() -> None:
    units = unit_order(ITEMS, seed=1)
    assert len(units) == 10 + 6  # ten images of three items, six imageless items
    for u in units:
        images = {it.image for it in u.items}
        assert len(images) == 1
        assert [it.id for it in u.items] == sorted((it.id for it in u.items), key=lambda s: int(s[1:]))


def test_the_order_depends_on_the_seed_not_on_the_cube_order() -> None:
    a = [u.key for u in unit_order(ITEMS, seed=1)]
    assert a == [u.key for u in unit_order(list(reversed(ITEMS)), seed=1)]
    assert a != [u.key for u in unit_order(ITEMS, seed=2)]


def test_next_batch_passes_over_units_nobody_needs() -> None:
    units = unit_order(ITEMS, seed=1)
    needed = {it.id for u in units[3:] for it in u.items}
    batch, pos = next_batch(units, 0, 2, needed)
    assert [u.key for u in batch] == [units[3].key, units[4].key]
    assert pos == 5
    batch, pos = next_batch(units, pos, 100, set())
    assert batch == [] and pos == len(units)


def test_image_runs_put_one_images_asks_together_across_variants() -> None:
    from medrcube.run.order import image_runs

    asks = [("standard", "a"), ("standard", "b"), ("standard", "a"), ("standard", None), ("standard", "b"),
            ("standard", None), ("blind", None), ("blind", None), ("shuffled", "b"), ("shuffled", "a"),
            ("shuffled", "b")]
    order = image_runs(asks)
    assert sorted(order) == list(range(len(asks)))  # a permutation: every ask sent once
    # images by first ask, each image's asks across the variants in plan order; no image: in place
    assert order == [0, 2, 9, 1, 4, 8, 10, 3, 5, 6, 7]
    assert image_runs([]) == []
