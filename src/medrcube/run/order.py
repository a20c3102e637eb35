"""The order in which a sequential run asks a cube: images, in a seeded random order.

The unit is the image (the items a check reads on one image are asked together: the
clustered intervals and the betting tests take the image as their unit); an item
without an image (restricted in the release) is a unit of its own. The permutation is a hash of the seed
and the unit's key, so it does not depend on the cube's file order, is the same in every
process (xdist workers agree without talking) and after a restart (a killed run resumes
in the same order), and a unit added to the cube does not move the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from medrcube.cube.item import Item


@dataclass(frozen=True, slots=True)
class Unit:
    """The items of one image (or one imageless item), asked together."""

    key: str
    items: tuple[Item, ...]


def _rank(seed: int, key: str) -> bytes:
    return hashlib.sha256(f"{seed}\x00{key}".encode()).digest()


def unit_order(items: Iterable[Item], seed: int, image_of: Callable[[Item], str | None] | None = None) -> tuple[Unit, ...]:
    """The cube's units in the seeded random order; items keep their cube order inside.
    `image_of` (Cube.image_of) names an item's image by content: copies are one unit."""
    groups: dict[str, list[Item]] = {}
    for it in items:
        image = it.image if image_of is None else image_of(it)
        key = f"image:{image}" if image is not None else f"item:{it.id}"
        groups.setdefault(key, []).append(it)
    keys = sorted(groups, key=lambda k: (_rank(seed, k), k))
    return tuple(Unit(k, tuple(groups[k])) for k in keys)


def next_batch(units: Sequence[Unit], start: int, size: int, needed: set[str]) -> tuple[list[Unit], int]:
    """Up to `size` units from position `start` on that hold an item in `needed` (item
    ids some undecided check still reads), each cut down to its needed items, and the
    position after the last one taken.

    A unit none of whose items is needed is passed over for good, and an item nobody needs
    is not asked: checks only ever become decided, so no later state needs them either.
    The items a check reads on one image are needed together or not at all (a check needs
    its whole scope), so they stay together."""
    taken: list[Unit] = []
    pos = start
    while pos < len(units) and len(taken) < size:
        unit = units[pos]
        pos += 1
        items = tuple(it for it in unit.items if it.id in needed)
        if items:
            taken.append(Unit(unit.key, items))
    return taken, pos


def image_runs(asks: Sequence[tuple[str, str | None]]) -> list[int]:
    """The positions of `asks` ((variant, digest of the image sent or None), in plan order)
    in the order they are sent: the asks showing one image back to back, across every
    variant (an image's standard and shuffled asks together), images in the order of their
    first ask, each image's asks in plan order; an ask without an image (a blind one, or an
    item whose image is restricted) stays a group of its own at its place. A stable
    regrouping. Why across the variants: the adapter prepares an image (reads, verifies,
    base64s it: models/images.py) once while it stays in its bounded cache, and a cube's
    images outgrow that bound within one variant, so grouped per variant every further
    variant that shows them prepared them all again (on the 7,626-item generated cube
    with standard and shuffled, 6,000 preparations of 3,000 images, about 2 ms of CPU each;
    docs/speed.md). The questions of one image also share their prefix (the image, first
    in the message) for an engine's prefix cache (models/vllm_adapter.py). The price: a run
    stopped early has asked part of every variant rather than whole variants first; records
    come back in plan order whatever the order sent."""
    groups: dict[object, list[int]] = {}
    for k, (_variant, digest) in enumerate(asks):
        groups.setdefault(digest if digest is not None else ("no image", k), []).append(k)
    return [k for group in groups.values() for k in group]
