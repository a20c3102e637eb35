"""Lesion placements: copies of one source picture with a synthetic lesion each, and the
drawing of those lesions in an order that spreads quadrants and size classes evenly.

A single slice can carry many lesion placements (another quadrant, another size class);
each copy is a new image whose ROI Grounding and Severity Grading answers differ. Whether a
copy also asks "is there a lesion?" is the recipe's choice (`copies(presence=...)`), so that
the presence cells of a source stay balanced between "Yes" and "No".
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from medrcube.construction.mini.common import LOCATION_TASKS, Picture
from medrcube.construction.stages import lesions


def copies(base: Picture, lesion_copies: int, *, normal: bool, presence: int | None = None) -> list[Picture]:
    """`base` unmodified (when `normal` and the source allows "no lesion"), then
    `lesion_copies` copies that each get a lesion. The first `presence` lesion copies ask
    presence, location and size; the rest location and size only (None: all ask presence)."""
    out = []
    if normal:
        if not base.normal_ok:
            raise ValueError(f"{base.dataset}/{base.stem}: the source may not be asked 'no lesion'")
        out.append(dataclasses.replace(base, stem=f"{base.stem}_n", lesion=False))
    for i in range(lesion_copies):
        asks_presence = presence is None or i < presence
        tasks = base.lesion_tasks if asks_presence else tuple(t for t in base.lesion_tasks if t in LOCATION_TASKS)
        out.append(dataclasses.replace(base, stem=f"{base.stem}_l{i + 1:02d}", lesion=True, lesion_tasks=tasks))
    return out


def split_presence(pictures: Iterable[Picture]) -> list[Picture]:
    """Each lesion picture that would ask presence AND location or size becomes two images:
    one asks "is there a lesion?", the other where and how large. On one image, "This image
    contains one lesion. Where..." beside "Is there a lesion?" answers the latter from text."""
    out = []
    for p in pictures:
        loc = tuple(t for t in p.lesion_tasks if t in LOCATION_TASKS)
        if p.lesion and loc and "Abnormality Diagnosis" in p.lesion_tasks:
            out.append(dataclasses.replace(p, stem=f"{p.stem}_p", lesion_tasks=("Abnormality Diagnosis",)))
            out.append(dataclasses.replace(p, stem=f"{p.stem}_g", lesion_tasks=loc))
        else:
            out.append(p)
    return out


class LesionPlan:
    """Which (quadrant, size) to try next: the least used so far first, so that sizes that
    rarely fit (a very large disc in a small organ) are tried on every picture until they do,
    and each size class ends up about as often the answer as any other.

    Counted per source as well as over the cube: a cell is one source's images, and a cell
    whose lesions are mostly "upper left" is passed by a model that always says so."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()  # (scope, value): scope "" is the cube
        # Placements drawn per source slice: a repeat would be a duplicate image and item.
        self.drawn: set[tuple[str, tuple[int, int], str]] = set()

    def order(self, source: str = "") -> list[tuple[str, str]]:
        combos = [(q, s.name) for s in lesions.SIZE_CLASSES for q in lesions.QUADRANTS]
        c = self.counts
        return sorted(combos, key=lambda qs: (c[(source, qs[1])] + c[(source, qs[0])], c[("", qs[1])], c[("", qs[0])], combos.index(qs)))

    def taken(self, quadrant: str, size: str, source: str = "") -> None:
        for scope in {"", source}:
            self.counts[(scope, quadrant)] += 1
            self.counts[(scope, size)] += 1


def lesion_plan() -> LesionPlan:
    return LesionPlan()


# A drawn lesion must stand out from the ring around it (mean of its centre above the mean
# of the ring 1.4-2 radii out, by this much of the gray range), or a reader could not tell
# where "the lesion" is: a disc drawn over a bright tract next to a dark ventricle can end
# up no brighter than its surroundings. Such a draw is retried at another centre.
CONSPICUITY = 0.04
PLACEMENT_TRIES = 4


def conspicuity(img01: np.ndarray, center: tuple[int, int], radius: float) -> float:
    """Mean inside 0.6 radius minus mean of the ring from 1.4 to 2 radii (gray, [0, 1])."""
    gray = img01 if img01.ndim == 2 else img01.mean(axis=2)
    yy, xx = np.mgrid[0 : gray.shape[0], 0 : gray.shape[1]]
    d = np.hypot(yy - center[0], xx - center[1])
    ring = (d >= 1.4 * radius) & (d <= 2.0 * radius)
    return float(gray[d <= 0.6 * radius].mean() - gray[ring].mean())


def draw_lesion(
    pic: Picture, plan: LesionPlan, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, Any] | None]:
    """The picture's pixels with its synthetic lesion (if it gets one) and the lesion's metadata."""
    if not pic.lesion:
        return pic.pixels, None
    allowed = pic.allowed if pic.allowed is not None else lesions.body_mask(pic.pixels)
    source = f"{pic.dataset}/{pic.source.relpath}"
    for quadrant, size in plan.order(source):  # a combination that does not fit is skipped
        for _try in range(PLACEMENT_TRIES):
            try:
                pixels, lesion = lesions.insert_lesion(
                    pic.pixels, allowed, quadrant, size, rng, contrast=pic.contrast, polarity=pic.polarity
                )
            except lesions.NoRoom:
                break
            spot = (f"{source}\x1f{pic.locator}", lesion.center, size)
            if spot not in plan.drawn and pic.polarity * conspicuity(pixels, lesion.center, lesion.diameter_px / 2) >= CONSPICUITY:
                plan.drawn.add(spot)
                plan.taken(quadrant, size, source)
                return pixels, dict(lesion.to_meta())
    raise RuntimeError(f"{pic.dataset}/{pic.stem}: no quadrant and size fits a conspicuous lesion")
