"""MedRCube credibility: does a right diagnosis rest on right perception?

On every image that carries both a high-level item (Abnormality Diagnosis, Disease
Diagnosis, Severity Grading) and a lower-level one, every (high, low) pair of items
falls into one group:

    A  low right, high right      (sound reasoning)
    B  low right, high wrong
    C  low wrong, high wrong
    D  low wrong, high right      (a lucky or shortcut diagnosis)

    luck rate          = D / (A + D)   share of right diagnoses without the perception
    rationality        = 1 - luck rate
    shortcut prob.     = D / (C + D)   P(high right | low wrong)

A ratio whose denominator is 0 is None, never 0: "no evidence" must not read as
"perfect" (the reference script reports 0.0 there).

Which lower-level tasks count. "Lower-level" means the low and mid levels of the
reasoning chain (Modality, View and Imaging Protocol Recognition, Organ Recognition,
ROI Grounding). By default View Recognition is excluded, as the reference analysis
excludes "View Identification" (its DEFAULT_IGNORE_TASKS), so that the paper's numbers
are reproduced; thresholds.yaml `credibility.exclude_low_tasks: []` counts every pair.
A task outside the taxonomy (a site cube's own task) has no known level and is not
paired. Only the standard variant is used, and only records that were graded: a pair
with an error or an unavailable item on either side is dropped and counted, never
graded as wrong (the reference counts an error as a wrong answer).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from medrcube.records import GradedRecord
from medrcube.taxonomy import Level, task_level

# The reference's DEFAULT_IGNORE_TASKS, in canonical names ("View Identification";
# its other entry, "Report Generation", is not a task of the cube).
REFERENCE_EXCLUDED_LOW_TASKS: frozenset[str] = frozenset({"View Recognition"})

GROUPS = ("A", "B", "C", "D")


@dataclass(frozen=True, slots=True)
class Pair:
    """One (high, low) pair on one image, and its group."""

    image: str
    high: GradedRecord
    low: GradedRecord

    @property
    def group(self) -> str:
        if self.low.correct:
            return "A" if self.high.correct else "B"
        return "D" if self.high.correct else "C"


@dataclass(frozen=True, slots=True)
class Credibility:
    A: int
    B: int
    C: int
    D: int
    pairs: int  # A + B + C + D
    luck_rate: float | None
    rationality: float | None
    shortcut_prob: float | None
    dropped_pairs: int = 0  # pairs with an ungraded side (error, unavailable)
    images: int = 0  # images that carry at least one counted pair

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _side(task: str, excluded: Collection[str]) -> str | None:
    level = task_level(task)
    if level is Level.HIGH:
        return "high"
    if level in (Level.LOW, Level.MID) and task not in excluded:
        return "low"
    return None


def chain_pairs(
    records: Iterable[GradedRecord],
    *,
    exclude_low_tasks: Collection[str] = REFERENCE_EXCLUDED_LOW_TASKS,
) -> tuple[list[Pair], int]:
    """Every counted (high, low) pair of standard records per image, and the number dropped."""
    by_image: dict[str, dict[str, list[GradedRecord]]] = defaultdict(lambda: {"high": [], "low": []})
    for r in records:
        if r.variant != "standard" or not r.image:
            continue
        side = _side(r.task, exclude_low_tasks)
        if side is not None:
            by_image[r.image][side].append(r)
    pairs: list[Pair] = []
    dropped = 0
    for image, sides in by_image.items():
        for h in sides["high"]:
            for lo in sides["low"]:
                if h.graded and lo.graded:
                    pairs.append(Pair(image, h, lo))
                else:
                    dropped += 1
    return pairs, dropped


def credibility_of_pairs(pairs: Iterable[Pair], dropped: int = 0) -> Credibility:
    """Groups and ratios of already-formed pairs."""
    counts = dict.fromkeys(GROUPS, 0)
    images: set[str] = set()
    for p in pairs:
        counts[p.group] += 1
        images.add(p.image)
    a, b, c, d = (counts[g] for g in GROUPS)
    luck = _ratio(d, a + d)
    return Credibility(
        A=a,
        B=b,
        C=c,
        D=d,
        pairs=a + b + c + d,
        luck_rate=luck,
        rationality=None if luck is None else 1.0 - luck,
        shortcut_prob=_ratio(d, c + d),
        dropped_pairs=dropped,
        images=len(images),
    )


def credibility(
    records: Iterable[GradedRecord],
    *,
    exclude_low_tasks: Collection[str] = REFERENCE_EXCLUDED_LOW_TASKS,
) -> Credibility:
    """Credibility over all standard records (see the module doc for the definition)."""
    pairs, dropped = chain_pairs(records, exclude_low_tasks=exclude_low_tasks)
    return credibility_of_pairs(pairs, dropped)


def credibility_by_part(
    records: Iterable[GradedRecord],
    *,
    exclude_low_tasks: Collection[str] = REFERENCE_EXCLUDED_LOW_TASKS,
) -> dict[str, Credibility]:
    """Credibility per anatomical part, keyed by part, parts in sorted order.

    Items on one image share its part, so filtering records by part keeps every pair.
    """
    by_part: dict[str, list[GradedRecord]] = defaultdict(list)
    for r in records:
        by_part[r.part].append(r)
    return {
        part: credibility(by_part[part], exclude_low_tasks=exclude_low_tasks) for part in sorted(by_part)
    }
