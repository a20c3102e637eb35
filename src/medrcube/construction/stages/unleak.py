"""Options and letters drawn for the whole cube at once, so that text alone gives nothing away.

Run after every image's facts are known and before any record is written (so that text alone gives nothing away):

1. `one_perception_item`: one modality, view, protocol or organ question per image (why:
   its docstring). `cap_shares`: within a task, no answer value may be more than `cap` of
   the items, or a model that always names it scores that share with no image. Items of
   the most frequent value are dropped (in a seeded order) from images that keep a chain
   without them.
2. `draw_options`: an item's distractors come from its task's pool, the values that are
   answers somewhere in the task, each drawn with a weight equal to how often it is an
   answer. A value is then shown about `max_options` times as often as it is correct,
   whatever it is, so seeing it among the options says nothing about whether it is right.
   Pairs of `questions.NOT_EXCLUSIVE` are never shown together; a task whose pool is too
   small (one real diagnosis) falls back to the fact's own distractors.
3. `assign_letters`: per (task, number of options), a balanced list of letters in a
   seeded random order (each letter right equally often, up to one), then letters swapped
   between items of the same list until no constant letter has a positive grounding on
   the credibility pairs of any part: a model answering "D" to everything must not look as
   if its diagnoses rested on its perception (`cube.audit.constant_letter_grounding`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from medrcube.construction.stages.questions import NOT_EXCLUSIVE, Fact, stable_seed
from medrcube.taxonomy import Level, task_level


@dataclass
class Draft:
    """One item before its record: the fact, its image and axes, and (later) its options."""

    item_id: str
    image: str
    part: str
    fact: Fact
    modality: str = ""
    options: list[str] = field(default_factory=list)  # answer first, then distractors
    position: int = 0  # where the answer goes


def _level(task: str) -> Level | None:
    try:
        return task_level(task)
    except KeyError:
        return None


def _keeps_chain(drafts: Sequence[Draft], drop: Draft) -> bool:
    levels = [_level(d.fact.task) for d in drafts if d is not drop]
    return Level.HIGH in levels and any(lv in (Level.LOW, Level.MID) for lv in levels)


def one_perception_item(drafts: list[Draft], seed: str, tasks: Sequence[str]) -> list[Draft]:
    """At most one item of `tasks` per image (the others dropped), chosen to balance answers.

    Two of them on one image give each other away through their OPTIONS, which always hold
    their own answer: an organ item offering Heart and Pelvis but not Brain tells a text
    reader that the modality item beside it is more likely ultrasound. The one kept is the
    candidate whose answer is rarest so far in its task among images that ask the same other
    tasks (a presence image or a location image: which of those an image is must not say
    which modality it is), then whose task is smallest in its cell, then whose answer is
    rarest in its task, then whose task is smallest.
    """
    by_image: dict[str, list[Draft]] = defaultdict(list)
    for d in drafts:
        by_image[d.image].append(d)
    answers: Counter[tuple[str, ...]] = Counter()
    sizes: Counter[str] = Counter()
    in_cell: Counter[tuple[str, ...]] = Counter()
    drop: set[str] = set()
    for image in sorted(by_image, key=lambda im: stable_seed(seed, "perception", im)):
        cands = [d for d in by_image[image] if d.fact.task in tasks]
        config = "+".join(sorted(d.fact.task for d in by_image[image] if d.fact.task not in tasks))
        if not cands:
            continue
        best = min(cands, key=lambda d: (answers[(config, d.fact.task, d.fact.answer)], in_cell[(d.part, d.modality, d.fact.task)],
                                         answers[(d.fact.task, d.fact.answer)], sizes[d.fact.task], stable_seed(seed, d.item_id)))  # fmt: skip
        in_cell[(best.part, best.modality, best.fact.task)] += 1
        answers[(config, best.fact.task, best.fact.answer)] += 1
        answers[(best.fact.task, best.fact.answer)] += 1
        sizes[best.fact.task] += 1
        drop |= {d.item_id for d in cands if d is not best}
    return [d for d in drafts if d.item_id not in drop]


def cap_shares(drafts: list[Draft], cap: float, seed: str, tasks: Sequence[str], cell_tasks: Sequence[str] = ()) -> list[Draft]:
    """`drafts` without the items that push one answer of `tasks` over `cap` of its task, and
    of its task among images that ask the same other tasks (what those are must not say
    which answer is likelier: "the image also asks where its lesion is" must not mean CT).
    Tasks of `cell_tasks` are capped within each (part, modality) cell instead: a cell whose
    lesions mostly lie "upper left" is passed by a model that always says so."""
    by_image: dict[str, list[Draft]] = defaultdict(list)
    for d in drafts:
        by_image[d.image].append(d)
    config = {d.item_id: "+".join(sorted(o.fact.task for o in by_image[d.image] if o.fact.task not in tasks)) for d in drafts}
    config.update({d.item_id: f"{d.part}/{d.modality}" for d in drafts if d.fact.task in cell_tasks})
    kept = list(drafts)
    groups = sorted({(d.fact.task, c) for d in drafts for c in (config[d.item_id], None) if d.fact.task in (*tasks, *cell_tasks)}, key=str)
    values = {t: len({d.fact.answer for d in drafts if d.fact.task == t}) for t in (*tasks, *cell_tasks)}
    for task, cfg in groups:
        # Within a group, no value above 1/K + 0.10 of it (K: the task's answer values): a
        # share of 0.34 would leave seven organs free to be distributed unlike the task's.
        limit = cap if cfg is None else min(cap, 1 / values[task] + 0.10)
        while True:
            mine = [d for d in kept if d.fact.task == task and (cfg is None or config[d.item_id] == cfg)]
            counts = Counter(d.fact.answer for d in mine)
            if not counts:
                break
            value, n = max(sorted(counts.items()), key=lambda kv: kv[1])
            if n <= limit * len(mine):
                break
            now: dict[str, list[Draft]] = defaultdict(list)
            for d in kept:
                now[d.image].append(d)
            candidates = sorted((d for d in mine if d.fact.answer == value and _keeps_chain(now[d.image], d)),
                                key=lambda d: stable_seed(seed, "cap", d.item_id))  # fmt: skip
            if not candidates:
                break
            kept.remove(candidates[0])
    return kept


def draw_options(drafts: Sequence[Draft], seed: str, max_options: int = 4) -> None:
    """Fill each draft's options (answer first): distractors weighted by answer frequency."""
    pools: dict[str, Counter[str]] = defaultdict(Counter)
    for d in drafts:
        pools[d.fact.task][d.fact.answer] += 1
    for d in drafts:
        rng = np.random.default_rng(stable_seed(seed, "options", d.item_id))
        answer = d.fact.answer
        pool = {v: n for v, n in sorted(pools[d.fact.task].items()) if v != answer and frozenset((v, answer)) not in NOT_EXCLUSIVE}
        if len(pool) < min(max_options - 1, len(d.fact.distractors)):
            pool = {v: 1 for v in d.fact.distractors}
        chosen: list[str] = []
        while pool and len(chosen) < max_options - 1:
            values = list(pool)
            w = np.array([pool[v] for v in values], dtype=float)
            pick = values[int(rng.choice(len(values), p=w / w.sum()))]
            chosen.append(pick)
            pool = {v: n for v, n in pool.items() if v != pick and frozenset((v, pick)) not in NOT_EXCLUSIVE}
        d.options = [answer, *chosen]


def _pairs(drafts: Sequence[Draft], exclude_low: Sequence[str]) -> list[tuple[int, int, str]]:
    """(high index, low index, part) of every credibility pair, as the gate forms them."""
    by_image: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"high": [], "low": []})
    for i, d in enumerate(drafts):
        lv = _level(d.fact.task)
        if lv is None or d.fact.task in exclude_low:
            continue
        by_image[d.image]["high" if lv is Level.HIGH else "low"].append(i)
    return [(h, lo, drafts[h].part) for sides in by_image.values() for h in sides["high"] for lo in sides["low"]]


def _excess(pos: np.ndarray, pairs: np.ndarray, parts: np.ndarray, n_parts: int) -> float:
    """Sum over scopes (each part, and all) and letters of max(0, grounding)^2 for a constant letter."""
    total = 0.0
    hi, lo = pos[pairs[:, 0]], pos[pairs[:, 1]]
    for scope in range(n_parts + 1):
        mask = parts == scope if scope < n_parts else np.ones(len(parts), dtype=bool)
        for letter in range(4):
            low_hit = lo[mask] == letter
            high_hit = hi[mask] == letter
            n1, n0 = int(low_hit.sum()), int((~low_hit).sum())
            if n1 and n0:
                g = high_hit[low_hit].mean() - high_hit[~low_hit].mean()
                total += max(0.0, float(g)) ** 2
    return total


def assign_letters(drafts: Sequence[Draft], seed: str, exclude_low: Sequence[str] = ("View Recognition",), rounds: int = 4000) -> float:
    """Set each draft's `position` (module docstring); returns the remaining excess (0 = none)."""
    rng = np.random.default_rng(stable_seed(seed, "letters"))
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, d in enumerate(drafts):
        groups[(d.fact.task, len(d.options))].append(i)
    pos = np.zeros(len(drafts), dtype=int)
    for (_, k), idx in sorted(groups.items()):
        letters = np.array([j % k for j in range(len(idx))])
        rng.shuffle(letters)
        pos[idx] = letters
    pair_list = _pairs(drafts, exclude_low)
    if pair_list:
        names = sorted({p for *_, p in pair_list})
        pairs = np.array([(h, lo) for h, lo, _ in pair_list])
        parts = np.array([names.index(p) for *_, p in pair_list])
        swappable = [idx for idx in groups.values() if len(idx) > 1]
        best = _excess(pos, pairs, parts, len(names))
        for _ in range(rounds):
            if best == 0.0:
                break
            idx = swappable[int(rng.integers(len(swappable)))]
            a, b = rng.choice(idx, size=2, replace=False)
            if pos[a] == pos[b]:
                continue
            pos[a], pos[b] = pos[b], pos[a]
            trial = _excess(pos, pairs, parts, len(names))
            if trial < best:
                best = trial
            else:
                pos[a], pos[b] = pos[b], pos[a]
    for i, d in enumerate(drafts):
        d.position = int(pos[i])
    return best if pair_list else 0.0


def arranged(d: Draft, seed: str) -> tuple[list[str], int]:
    """The draft's options in the order shown: distractors in a seeded order, the answer at its position."""
    rest = d.options[1:]
    np.random.default_rng(stable_seed(seed, "order", d.item_id)).shuffle(rest)
    return rest[: d.position] + [d.options[0]] + rest[d.position :], d.position

