"""Paired comparison of two sets of outcomes on the same items.

Used for regression (a candidate model against a baseline) and for image dependence
(the standard variant against the blind one). Only items graded on both sides count.

Counts of a 2x2 paired table, "first" and "second" being the two sides:
    a  both right      b  first right, second wrong
    c  first wrong, second right      d  both wrong
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from medrcube.metrics.accuracy import wilson_interval
from medrcube.metrics.clustered import image_key
from medrcube.metrics.paired import MeanDifference, clustered_mean_difference
from medrcube.records import GRADED, GradedRecord, Outcome


@dataclass(frozen=True, slots=True)
class McNemar:
    """Exact McNemar test on the discordant pairs b (first right only) and c (second right only).

    Under H0 (both models equally accurate) c ~ Binomial(b + c, 1/2).
    """

    b: int
    c: int
    p_two_sided: float
    p_first_worse: float  # one-sided: the first side is less accurate (c large)
    p_second_worse: float  # one-sided: the second side is less accurate (b large)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mcnemar_exact(b: int, c: int) -> McNemar:
    """Exact (binomial) McNemar test; swapping the models swaps b and c and the one-sided p's.

    With no discordant pair there is no evidence either way: every p is 1.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return McNemar(b, c, 1.0, 1.0, 1.0)
    from scipy.stats import binomtest  # scipy is slow to import; only comparisons need it

    two = binomtest(c, n, 0.5, alternative="two-sided").pvalue
    first_worse = binomtest(c, n, 0.5, alternative="greater").pvalue
    second_worse = binomtest(b, n, 0.5, alternative="greater").pvalue
    return McNemar(b, c, min(1.0, float(two)), float(first_worse), float(second_worse))


@dataclass(frozen=True, slots=True)
class PairedCounts:
    a: int
    b: int
    c: int
    d: int
    dropped: int = 0  # items present on both sides but not graded on one of them
    first_only: int = 0  # items with no record on the second side
    second_only: int = 0

    @property
    def n(self) -> int:
        return self.a + self.b + self.c + self.d

    @property
    def first_acc(self) -> float | None:
        return (self.a + self.b) / self.n if self.n else None

    @property
    def second_acc(self) -> float | None:
        return (self.a + self.c) / self.n if self.n else None

    @property
    def difference(self) -> float | None:
        """first accuracy - second accuracy on the shared items."""
        return (self.b - self.c) / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(n=self.n, first_acc=self.first_acc, second_acc=self.second_acc, difference=self.difference)
        return d


def _by_item(records: Iterable[GradedRecord]) -> dict[str, GradedRecord]:
    records = records if isinstance(records, list) else list(records)
    out = {r.item_id: r for r in records}  # one record per item: looked for one by one only when not
    if len(out) != len(records):
        seen: set[str] = set()
        for r in records:
            if r.item_id in seen:
                raise ValueError(
                    f"item {r.item_id!r} has two {r.variant!r} records (rotation {r.rotation}); "
                    "a paired comparison needs one record per item and side: deduplicate the run"
                )
            seen.add(r.item_id)
    return out


def paired_records(
    first: Iterable[GradedRecord], second: Iterable[GradedRecord]
) -> tuple[list[tuple[GradedRecord, GradedRecord]], PairedCounts]:
    """Records of the items graded on both sides, in the first side's order, and the 2x2 counts."""
    f, s = _by_item(first), _by_item(second)
    pairs: list[tuple[GradedRecord, GradedRecord]] = []
    a = b = c = d = dropped = 0
    graded, correct = GRADED, Outcome.CORRECT  # each record's outcome read once (its `graded`, `correct`)
    for item_id, r1 in f.items():
        r2 = s.get(item_id)
        if r2 is None:
            continue
        o1, o2 = r1.outcome, r2.outcome
        if o1 not in graded or o2 not in graded:
            dropped += 1
            continue
        pairs.append((r1, r2))
        if o1 is correct:
            if o2 is correct:
                a += 1
            else:
                b += 1
        elif o2 is correct:
            c += 1
        else:
            d += 1
    counts = PairedCounts(
        a, b, c, d, dropped, first_only=len(f.keys() - s.keys()), second_only=len(s.keys() - f.keys())
    )
    return pairs, counts


def newcombe_paired_interval(a: int, b: int, c: int, d: int, confidence: float = 0.95) -> tuple[float, float]:
    """Interval for p1 - p2 = (b - c) / n from paired data: Newcombe's method 10.

    Newcombe R.G. (1998), "Improved confidence intervals for the difference between
    binomial proportions based on paired data", Statistics in Medicine 17:2635-2650:
    Wilson intervals of both margins combined with the phi correlation of the table.
    (-1, 1) when n == 0.
    """
    n = a + b + c + d
    if n == 0:
        return (-1.0, 1.0)
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n, confidence)
    l2, u2 = wilson_interval(a + c, n, confidence)
    den = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(den) if den > 0 else 0.0
    delta = p1 - p2
    lo = delta - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = delta + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return (max(-1.0, lo), min(1.0, hi))


@dataclass(frozen=True, slots=True)
class Regression:
    """A candidate against a baseline on their shared graded items."""

    counts: PairedCounts  # first = candidate, second = baseline
    drop: float | None  # baseline accuracy - candidate accuracy (positive = worse)
    interval: tuple[float, float]  # Newcombe interval of the drop (independent pairs; for reference)
    test: McNemar  # exact McNemar (independent pairs; for reference)
    clustered: MeanDifference | None = None  # the drop, clustered by image: what the gate decides on

    @property
    def p_worse(self) -> float:
        """One-sided p that the candidate is less accurate than the baseline."""
        return self.test.p_first_worse

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": self.counts.to_dict(),
            "drop": self.drop,
            "interval": list(self.interval),
            "mcnemar": self.test.to_dict(),
            "clustered": None if self.clustered is None else self.clustered.to_dict(),
        }


def regression(
    candidate: Iterable[GradedRecord], baseline: Iterable[GradedRecord], confidence: float = 0.95
) -> Regression:
    """Compare the candidate's records with the baseline's on the items both graded."""
    pairs, counts = paired_records(candidate, baseline)
    lo, hi = newcombe_paired_interval(counts.a, counts.b, counts.c, counts.d, confidence)
    drop = None if counts.difference is None else -counts.difference
    clustered = clustered_mean_difference(
        ((image_key(c), float(b.correct) - float(c.correct)) for c, b in pairs), confidence
    )
    # The drop is second - first, so its interval is the negated, swapped one.
    return Regression(counts, drop, (-hi, -lo), mcnemar_exact(counts.b, counts.c), clustered)
