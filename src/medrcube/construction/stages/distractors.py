"""Distractors from the ontology, by the paper's two strategies, mutually exclusive by construction.

- similar: clinically confusable with the answer. First the concepts the ontology marks
  as having a similar imaging phenotype, then those at the same anatomical site; always of
  the answer's category and present in the image's region.
- normal: any other concept of the same region and category that is not marked similar:
  plausible, but not chosen to confuse; the paper uses it as a control for difficulty.

Whatever the strategy, a candidate is taken only if it is mutually exclusive with the
answer and with every distractor already taken (`Ontology.exclusive`: not the same
concept, not an ancestor or descendant through is-a, not overlapping). Order within a
tier is a seeded shuffle, so a rebuild picks the same distractors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from medrcube.construction.stages.ontology import Ontology
from medrcube.construction.stages.questions import stable_seed

STRATEGIES: tuple[str, ...] = ("similar", "normal")


@dataclass(frozen=True, slots=True)
class Choice:
    """The distractors chosen for one answer (concept ids) and the strategy that chose them."""

    answer: str
    distractors: tuple[str, ...]
    strategy: str


def _shuffled(ids: Sequence[str], *seed: str) -> list[str]:
    out = sorted(ids)
    np.random.default_rng(stable_seed("distractors", *seed)).shuffle(out)
    return out


def similar_pool(onto: Ontology, answer: str, region: str, seed: str = "") -> list[str]:
    """Candidates of the similar strategy, best first: similar phenotype, then same site."""
    c = onto[answer]

    def fits(i: str) -> bool:
        return onto[i].category == c.category and onto[i].in_region(region)

    direct = [i for i in c.similar if fits(i)]
    site = [i for i in onto.similar_to(answer) if i not in c.similar and fits(i)]
    return _shuffled(direct, seed, answer, "similar") + _shuffled(site, seed, answer, "site")


def normal_pool(onto: Ontology, answer: str, region: str, seed: str = "") -> list[str]:
    """Candidates of the normal strategy: same region and category, not marked similar."""
    c = onto[answer]
    return _shuffled([i for i in onto.same_region(answer, region) if i not in c.similar], seed, answer, "normal")


def pick(onto: Ontology, answer: str, candidates: Sequence[str], k: int) -> tuple[str, ...]:
    """Up to `k` candidates, each exclusive with the answer and with those taken before it."""
    taken: list[str] = []
    for cand in candidates:
        if len(taken) == k:
            break
        if onto.exclusive(answer, cand) and all(onto.exclusive(t, cand) for t in taken):
            taken.append(cand)
    return tuple(taken)


def choose(onto: Ontology, answer: str, region: str, strategy: str, k: int = 3, seed: str = "") -> Choice | None:
    """Distractors for `answer` by `strategy`, all from one strategy's pool (never mixed).

    The requested strategy is used when it finds at least k - 1 exclusive distractors
    (a similar item with one option fewer is still a similar item); otherwise the strategy
    that finds more is used, recorded in `Choice.strategy`. Returns None when neither
    finds a single exclusive distractor (the answer's category has nothing else in this
    region): such an item cannot be written.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"distractor strategy must be one of {STRATEGIES}, got {strategy!r}")
    found: dict[str, tuple[str, ...]] = {}
    for s in (strategy, *(x for x in STRATEGIES if x != strategy)):
        pool = similar_pool(onto, answer, region, seed) if s == "similar" else normal_pool(onto, answer, region, seed)
        found[s] = pick(onto, answer, pool, k)
        if len(found[s]) >= max(1, k - 1) and (s == strategy or len(found[s]) > len(found[strategy])):
            return Choice(answer, found[s], s)
    best = max(found, key=lambda s: (len(found[s]), s == strategy))
    return Choice(answer, found[best], best) if found[best] else None


def exclusivity_problems(onto: Ontology, ids: Sequence[str]) -> list[str]:
    """Pairs of options that are not mutually exclusive, or that mix categories (for checks)."""
    problems = []
    cats = {onto[i].category for i in ids}
    if len(cats) > 1:
        problems.append(f"options mix categories {sorted(cats)}")
    for a in range(len(ids)):
        for b in range(a + 1, len(ids)):
            if not onto.exclusive(ids[a], ids[b]):
                problems.append(f"{ids[a]!r} and {ids[b]!r} are not mutually exclusive")
    return problems


class StrategyPlan:
    """Alternates strategies so that a fraction `similar_fraction` of the ontology items of each
    task uses the similar strategy, spread evenly in build order (not by chance)."""

    def __init__(self, similar_fraction: float):
        if not 0.0 <= similar_fraction <= 1.0:
            raise ValueError(f"similar_fraction must be in [0, 1], got {similar_fraction}")
        self.fraction = similar_fraction
        self._count: dict[str, int] = {}

    def next(self, task: str) -> str:
        i = self._count.get(task, 0)
        self._count[task] = i + 1
        return "similar" if int((i + 1) * self.fraction) > int(i * self.fraction) else "normal"
