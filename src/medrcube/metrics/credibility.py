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

import math
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from medrcube.metrics.clustered import t_quantile, t_sf, wilson_q
from medrcube.records import GRADED, GradedRecord, Outcome
from medrcube.taxonomy import Level, task_level

# The reference's DEFAULT_IGNORE_TASKS, in canonical names ("View Identification";
# its other entry, "Report Generation", is not a task of the cube).
REFERENCE_EXCLUDED_LOW_TASKS: frozenset[str] = frozenset({"View Recognition"})

GROUPS = ("A", "B", "C", "D")


class Pair(NamedTuple):
    """One (high, low) pair on one image, and its group (made by `chain_pairs`, the only
    maker: a tuple, as tens of thousands are made per evaluation and read many times)."""

    image: str
    high: GradedRecord
    low: GradedRecord
    group: str  # A (low right, high right), B (low right, high wrong), C (both wrong) or D (low wrong, high right)
    # Whether each answer is right, as the group says: read for every pair by each statistic
    # (grounding, the luck rate, the odds ratio, the shortcut interval), where each record's
    # `correct` was looked up again for every pair it is in.
    high_right: bool
    low_right: bool


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
    """Every counted (high, low) pair of standard records per image, and the number dropped.
    Images in the order of their first record, each image's pairs high by high."""
    sides: dict[str, bool | None] = {}  # a task's side (True: low), looked up once per task
    by_image: dict[str, tuple[list[GradedRecord], list[GradedRecord]]] = {}  # image -> (highs, lows)
    for r in records:
        if r.variant != "standard":
            continue
        image = r.image
        if not image:
            continue
        task = r.task
        if task in sides:
            low = sides[task]
        else:
            side = _side(task, exclude_low_tasks)
            low = sides[task] = None if side is None else side == "low"
        if low is None:
            continue
        row = by_image.get(image)
        if row is None:
            row = by_image[image] = ([], [])
        row[low].append(r)
    # The outcomes read here once per record (records.GradedRecord's `graded` and `correct`, written out).
    correct, graded = Outcome.CORRECT, GRADED
    pairs: list[Pair] = []
    dropped = 0
    for image, (highs, lows) in by_image.items():
        graded_lows = [(lo, lo.outcome is correct) for lo in lows if lo.outcome in graded]
        ungraded = len(lows) - len(graded_lows)
        for h in highs:
            outcome = h.outcome
            if outcome not in graded:
                dropped += len(lows)
                continue
            dropped += ungraded
            right = outcome is correct
            for lo, low_right in graded_lows:
                pairs.append(Pair(image, h, lo, ("A" if right else "B") if low_right else ("D" if right else "C"),
                                  right, low_right))
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


def luck_shares(pairs: Iterable[Pair]) -> list[tuple[str, float]]:
    """(image, share of its counted perception items answered wrong) for every right
    diagnosis: the luck rate P(not L | H) with each right diagnosis counted once. It is
    the paper's D / (A + D) when every diagnosis has as many perception partners, and
    keeps the units per image few (one per right diagnosis), so that the finite-sample
    interval over images stays tight."""
    per: dict[str, list[Any]] = {}  # right diagnosis -> [image, wrong partners, partners]
    for p in pairs:
        if p.high_right:
            row = per.setdefault(p.high.item_id, [p.image, 0, 0])
            row[1] += not p.low_right
            row[2] += 1
    return [(image, wrong / total) for _, (image, wrong, total) in sorted(per.items())]


# --------------------------------------------------------------------------- grounding

GROUNDING_METHOD = (
    "P(H|L) - P(H|not L), cluster-robust (linearised) over images, t(K-1); "
    "se floored at the Agresti-Caffo independent-pairs se"
)


@dataclass(frozen=True, slots=True)
class Grounding:
    """How much more often the diagnosis (H) is right when the perception (L) on the
    same image is right than when it is wrong: a dependence measure that is 0 for any
    model whose diagnosis and perception are independent, whatever its accuracy.

    The paper's shortcut probability D/(C+D) is P(H | not L): under independence it
    equals P(H), so a bound on it is a bound on diagnostic accuracy (see
    docs/guarantees.md); it stays in every output for comparison with the paper.
    """

    pairs: int
    images: int
    p_h_given_l: float | None  # A / (A + B)
    p_h_given_not_l: float | None  # D / (C + D): the paper's shortcut probability
    difference: float | None  # the two above, subtracted
    se: float
    df: float
    lo: float
    hi: float
    confidence: float
    odds_ratio: float | None  # (A C) / (B D) with 0.5 added to every group (Haldane)
    expected_D: float | None  # D under independence: n P(H) P(not L)
    observed_D: int
    method: str = GROUNDING_METHOD

    def p_at_most(self, bound: float) -> float:
        """One-sided p of H0: true difference <= bound (small: decisively grounded)."""
        from medrcube.metrics.clustered import t_sf

        if self.difference is None or self.df < 1:
            return 1.0
        return t_sf((self.difference - bound) / self.se, self.df)

    def p_at_least(self, bound: float) -> float:
        """One-sided p of H0: true difference >= bound (small: decisively not grounded)."""
        from medrcube.metrics.clustered import t_sf

        if self.difference is None or self.df < 1:
            return 1.0
        return t_sf((bound - self.difference) / self.se, self.df)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["df"] = None if self.df == float("inf") else self.df
        return d


def grounding(pairs: Iterable[Pair], confidence: float = 0.95) -> Grounding:
    """The grounding difference of already-formed pairs, clustered by image."""
    import math

    from medrcube.metrics.clustered import t_quantile

    # Per image: a = L and H, n1 = L; c = not L and H, n0 = not L.
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    counts = dict.fromkeys(GROUPS, 0)
    for p in pairs:
        row = per[p.image]
        counts[p.group] += 1
        if p.low_right:
            row[1] += 1
            row[0] += p.high_right
        else:
            row[3] += 1
            row[2] += p.high_right
    a, b, c, d = (counts[g] for g in GROUPS)
    n = a + b + c + d
    n1, n0 = a + b, c + d
    big_k = len(per)
    expected_d = (a + d) * (c + d) / n if n else None
    # odds(H | L) / odds(H | not L) = (A / B) / (D / C), Haldane's 0.5 in every group.
    odds = (a + 0.5) * (c + 0.5) / ((b + 0.5) * (d + 0.5)) if n else None
    if n1 == 0 or n0 == 0:
        return Grounding(n, big_k, _ratio(a, n1), _ratio(d, n0), None, math.inf, 0.0, -1.0, 1.0, confidence,
                         odds, expected_d, d)
    p1, p0 = a / n1, d / n0
    diff = p1 - p0
    resid = []
    for key in sorted(per):
        ra, rn1, rc, rn0 = per[key]
        resid.append((ra - p1 * rn1) / n1 - (rc - p0 * rn0) / n0)
    var = sum(r * r for r in resid) * (big_k / (big_k - 1)) if big_k > 1 else math.inf
    # Floor: Agresti & Caffo (2000, Am. Stat. 54:280) add one success and one failure per group.
    q1, q0 = (a + 1) / (n1 + 2), (d + 1) / (n0 + 2)
    floor = q1 * (1 - q1) / (n1 + 2) + q0 * (1 - q0) / (n0 + 2)
    se = math.sqrt(max(var, floor))
    df = float(big_k - 1)
    q = t_quantile(0.5 + confidence / 2.0, df)
    half = q * se
    lo = max(-1.0, diff - half) if math.isfinite(half) else -1.0
    hi = min(1.0, diff + half) if math.isfinite(half) else 1.0
    return Grounding(n, big_k, p1, p0, diff, se, df, lo, hi, confidence, odds, expected_d, d)


# --------------------------------------------------------------------------- the luck rate's interval

LUCK_METHOD = ("Wilson score on n / deff right diagnoses, deff = max(1, cluster-robust variance over images / "
               "binomial variance), t(K-1) quantile; deff = the size-weighted diagnoses per image when the "
               "variance cannot be estimated")


@dataclass(frozen=True, slots=True)
class LuckRate:
    """The luck rate P(L wrong | H right), one unit per right diagnosis (luck_shares),
    with a score interval that counts images: a Wilson interval on the effective number
    of right diagnoses. Its units are shares in [0, 1], whose variance is at most the
    binomial one p(1 - p); the design effect over images is never taken below 1, so the
    interval is never narrower than a binomial one on as many independent diagnoses."""

    n: int  # right diagnoses
    images: int
    estimate: float | None
    deff: float
    lo: float
    hi: float
    confidence: float
    method: str = LUCK_METHOD

    @property
    def df(self) -> float:
        return self.images - 1.0

    def _z(self, bound: float) -> float:
        assert self.estimate is not None
        return (self.estimate - bound) / math.sqrt(bound * (1.0 - bound) * self.deff / self.n)

    def p_at_most(self, bound: float) -> float:
        """One-sided p of H0: luck rate <= bound (small: decisively above it)."""
        if self.estimate is None or self.df < 1:
            return 1.0
        if bound <= 0.0 or bound >= 1.0:
            return 0.0 if bound <= 0.0 and self.estimate > 0.0 else 1.0
        return t_sf(self._z(bound), self.df)

    def p_at_least(self, bound: float) -> float:
        """One-sided p of H0: luck rate >= bound (small: decisively below it)."""
        if self.estimate is None or self.df < 1:
            return 1.0
        if bound <= 0.0 or bound >= 1.0:
            return 0.0 if bound >= 1.0 and self.estimate < 1.0 else 1.0
        return t_sf(-self._z(bound), self.df)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def luck_rate(units: Iterable[tuple[str, float]], confidence: float = 0.95) -> LuckRate:
    """The luck rate of (image, share) units (luck_shares) with its clustered score interval."""
    per: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for image, share in units:
        per[image][0] += share
        per[image][1] += 1
    n = int(sum(v[1] for v in per.values()))
    k = len(per)
    if n == 0:
        return LuckRate(0, 0, None, 1.0, 0.0, 1.0, confidence)
    p = sum(v[0] for v in per.values()) / n
    m_w = sum(v[1] * v[1] for v in per.values()) / n
    binomial = p * (1.0 - p)
    if k > 1 and binomial > 0.0:
        robust = sum((s - p * m) ** 2 for s, m in per.values()) * k / (k - 1.0) / n  # n var(p_hat)
        deff = max(1.0, robust / binomial)
    else:
        deff = max(1.0, m_w)
    q = t_quantile(0.5 + confidence / 2.0, k - 1.0)
    lo, hi = wilson_q(p, n / deff, q)
    return LuckRate(n, k, p, deff, lo, hi, confidence)
