"""What an accuracy check decides on, counted from the standard records, and summable.

An accuracy check (overall, slice or cell: gate/evidence.py) reads, of the standard records
of its scope: the records by outcome; right and graded per image (its interval clustered by
image, and the few-images one); the graded records by number of options (chance); and, per
cube cell, right, graded and the graded records not right (the worst items it shows). Every
one is a sum, so a scope's counts are the sum of its cells' (`merged`): a family of checks
counts each record once per cell (gate/evidence.ByScope) instead of once for every check
whose scope covers it. Integers only: the sums are exact in any order. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from medrcube.metrics.clustered import image_key
from medrcube.records import GRADED, GradedRecord, Outcome

Cell = tuple[str, str, str]


@dataclass(slots=True)
class CellTally:
    """One cell's graded standard records: how many were right, how many graded, and the
    graded ones not right, in the order of the records."""

    right: int = 0
    graded: int = 0
    missed: list[GradedRecord] = field(default_factory=list)


@dataclass(slots=True)
class StandardCounts:
    """The standard records' counts (module docstring)."""

    outcomes: dict[Outcome, int] = field(default_factory=lambda: dict.fromkeys(Outcome, 0))
    images: dict[str, list[int]] = field(default_factory=dict)  # image key -> [right, graded]
    options: dict[int, int] = field(default_factory=dict)  # number of options -> graded records
    cells: dict[Cell, CellTally] = field(default_factory=dict)

    @property
    def unanswered(self) -> int:
        """Records without an answer to grade (errors, answers cut short)."""
        return self.outcomes[Outcome.ERROR] + self.outcomes[Outcome.TRUNCATED]

    @staticmethod
    def of(records: Iterable[GradedRecord]) -> StandardCounts:
        """The counts of the standard records among `records` (other variants are passed over)."""
        counts = StandardCounts()
        outcomes, images, options, cells = counts.outcomes, counts.images, counts.options, counts.cells
        for r in records:
            if r.variant != "standard":
                continue
            outcome = r.outcome
            outcomes[outcome] += 1
            if outcome not in GRADED:
                continue
            key = image_key(r)
            image = images.get(key)
            if image is None:
                image = images[key] = [0, 0]
            cell = r.cell
            tally = cells.get(cell)
            if tally is None:
                tally = cells[cell] = CellTally()
            tally.graded += 1
            image[1] += 1
            if outcome is Outcome.CORRECT:
                image[0] += 1
                tally.right += 1
            else:
                tally.missed.append(r)
            options[r.n_options] = options.get(r.n_options, 0) + 1
        return counts

    @staticmethod
    def merged(parts: Iterable[StandardCounts]) -> StandardCounts:
        """The counts of the records of all `parts` (parts of disjoint cells, as ByScope's)."""
        parts = list(parts)
        if len(parts) == 1:
            return parts[0]
        total = StandardCounts()
        outcomes, images, options, cells = total.outcomes, total.images, total.options, total.cells
        for part in parts:
            for outcome, n in part.outcomes.items():
                outcomes[outcome] += n
            for key, (right, graded) in part.images.items():  # an image asked in several cells adds up
                image = images.get(key)
                if image is None:
                    images[key] = [right, graded]
                else:
                    image[0] += right
                    image[1] += graded
            for n_options, n in part.options.items():
                options[n_options] = options.get(n_options, 0) + n
            for cell, tally in part.cells.items():
                if cell in cells:
                    raise ValueError(f"cell {'/'.join(cell)} counted in two parts")
                cells[cell] = tally
        return total
