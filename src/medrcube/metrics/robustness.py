"""Image dependence (standard against blind) and position robustness (shuffled options).

Image dependence: the blind variant asks each question without its image. A model
that reads the image should lose accuracy: drop = standard accuracy - blind accuracy on
the items graded in both variants (the paper's Table 4 shows 22-29 points for strong
models). A drop near 0 means the answers come from the text alone.

Position robustness: the shuffled variant asks each item again with its options
cyclically rotated. Circular accuracy counts an item as right only when the standard
answer and every rotation are right; the gap to standard accuracy (on the same items)
measures how much of the accuracy depends on where the right option sits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from medrcube.metrics.clustered import ClusteredInterval, cluster_counts, clustered_wilson, image_key
from medrcube.metrics.comparison import PairedCounts, newcombe_paired_interval, paired_records
from medrcube.records import GRADED, GradedRecord, Outcome


@dataclass(frozen=True, slots=True)
class ImageDependence:
    counts: PairedCounts  # first = standard, second = blind
    standard_acc: float | None
    blind_acc: float | None
    drop: float | None  # standard - blind
    interval: tuple[float, float]  # Newcombe paired interval of the drop
    blind_right: tuple[str, ...] = field(default=())  # items answered right without the image

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": self.counts.to_dict(),
            "standard_acc": self.standard_acc,
            "blind_acc": self.blind_acc,
            "drop": self.drop,
            "interval": list(self.interval),
        }


def image_dependence(records: Iterable[GradedRecord], confidence: float = 0.95) -> ImageDependence:
    """Standard against blind accuracy on the items graded in both variants."""
    records = list(records)
    standard = [r for r in records if r.variant == "standard"]
    blind = [r for r in records if r.variant == "blind"]
    pairs, counts = paired_records(standard, blind)
    lo, hi = newcombe_paired_interval(counts.a, counts.b, counts.c, counts.d, confidence)
    return ImageDependence(
        counts=counts,
        standard_acc=counts.first_acc,
        blind_acc=counts.second_acc,
        drop=counts.difference,
        interval=(lo, hi),
        blind_right=tuple(s.item_id for s, b in pairs if b.correct),
    )


@dataclass(frozen=True, slots=True)
class PositionRobustness:
    n: int  # items with a graded standard record and every expected rotation graded
    standard_correct: int
    circular_correct: int
    standard_acc: float | None
    circular_acc: float | None
    gap: float | None  # standard - circular, on the same n items
    circular_interval: ClusteredInterval  # clustered by image
    incomplete: int  # items left out: a rotation missing or not graded (error, unavailable)
    rotations: int  # shuffled rotations expected per item
    inconsistent: tuple[str, ...] = field(default=())  # right in standard, wrong in some rotation

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "standard_correct": self.standard_correct,
            "circular_correct": self.circular_correct,
            "standard_acc": self.standard_acc,
            "circular_acc": self.circular_acc,
            "gap": self.gap,
            "circular_interval": self.circular_interval.to_dict(),
            "incomplete": self.incomplete,
            "rotations": self.rotations,
        }


class RotatedItem(NamedTuple):
    """An item's standard record with every one of its shuffled rotations, all graded, and
    whether it is right in the original order and in every rotation (`circular`). A tuple, made
    with its `circular` found once: one per item of the run (7,626 at the paper's scale), each
    read by every statistic of the position check."""

    standard: GradedRecord
    rotations: tuple[GradedRecord, ...]  # by rotation
    circular: bool


def rotated_items(
    records: Iterable[GradedRecord], rotations: int | None = None
) -> tuple[list[RotatedItem], int, int]:
    """The complete items (in item-id order), how many were incomplete, and the number of
    rotations expected per item (`rotations`, or the largest number seen when None).

    An item with fewer graded rotations, or without a graded standard record, is
    incomplete: left out and counted, because a missing answer must not be read as a
    right one."""
    standard: dict[str, GradedRecord] = {}
    shuffled: dict[str, dict[int, GradedRecord]] = defaultdict(dict)
    for r in records:
        variant = r.variant
        if variant == "standard":
            standard[r.item_id] = r
        elif variant == "shuffled":
            shuffled[r.item_id][r.rotation] = r
    expected = rotations if rotations is not None else max((len(v) for v in shuffled.values()), default=0)
    complete: list[RotatedItem] = []
    incomplete = 0
    graded, correct = GRADED, Outcome.CORRECT
    none: dict[int, GradedRecord] = {}
    for item_id in sorted(standard.keys() | shuffled.keys()):
        std = standard.get(item_id)
        rots = shuffled.get(item_id, none)
        if std is None or std.outcome not in graded or len(rots) < expected:
            incomplete += 1
            continue
        ordered = tuple(rots[k] for k in sorted(rots))
        # Every rotation graded (else incomplete), and right in each (with the standard: circular).
        circular = std.outcome is correct
        for r in ordered:
            outcome = r.outcome
            if outcome not in graded:
                break
            circular = circular and outcome is correct
        else:
            complete.append(RotatedItem(std, ordered, circular))
            continue
        incomplete += 1
    return complete, incomplete, expected


def position_robustness(
    records: Iterable[GradedRecord], rotations: int | None = None, confidence: float = 0.95
) -> PositionRobustness:
    """Circular accuracy over the standard record and the shuffled rotations of each item.

    `rotations` is the number of shuffled records expected per item (K of `shuffled:K`);
    when None, the largest number seen for any item is expected (`rotated_items`).
    """
    items, incomplete, expected = rotated_items(records, rotations)
    units = [(image_key(it.standard), it.circular) for it in items]
    std_ok = sum(it.standard.correct for it in items)
    circ_ok = sum(it.circular for it in items)
    inconsistent = [it.standard.item_id for it in items if it.standard.correct and not it.circular]
    n = len(units)
    interval = clustered_wilson(cluster_counts(units), confidence)
    std_acc = std_ok / n if n else None
    circ_acc = circ_ok / n if n else None
    return PositionRobustness(
        n=n,
        standard_correct=std_ok,
        circular_correct=circ_ok,
        standard_acc=std_acc,
        circular_acc=circ_acc,
        gap=None if n == 0 else (std_ok - circ_ok) / n,
        circular_interval=interval,
        incomplete=incomplete,
        rotations=expected,
        inconsistent=tuple(inconsistent),
    )
