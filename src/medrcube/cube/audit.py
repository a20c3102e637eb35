"""The leakage audit: can a cube's questions be answered without their images?

Four kinds of leak, each measured per task and per (part, modality, task) cell and held
against a bound of `AuditBounds` (a recipe's `audit:` section, or the defaults below):

- `options_prior`: the cross-validated accuracy of a text-only model of the options and
  the question (`audit_model.option_features`). Bound: chance + `prior_margin`.
- `sibling`: what the other questions of the same image give away. Two measures: items
  whose answer (and no distractor) is NAMED in a sibling question (a word rule, with the
  modality aliases below), and the LIFT of a cross-validated text model that also reads
  the siblings over the options-only one (what siblings IMPLY, e.g. "This image contains
  one lesion" beside "Is there a lesion?"). Bounds: no named item; lift <= `sibling_margin`.
- `letter_balance` / `option_length`: the correct letter's counts per task within the
  two-sided binomial band of level `letter_band` around uniform; the "pick the longest
  (or shortest) option" rule at most chance + `length_margin`.
- `letter_correlation`: on the credibility pairs (a high-level item and a lower-level item
  of one image, View Recognition left out as in the gate's default), the grounding
  P(high right | low right) - P(high right | low wrong) that a model answering one
  constant letter would get. Bound: `constant_letter_grounding` (the screening profile's
  credibility bound is 0.05: above it, a constant letter can pass a credibility check).

A task is held to the point estimate of its options prior when it holds `min_cell_items`
items; a sibling lift counts only when the sibling reader also beats chance significantly
(the difference of two cross-validated accuracies on 40 items moves by 0.1 by chance). A cell is flagged only when the model behind its excess also beats
chance significantly (one-sided binomial p below `cell_alpha`), it holds `min_cell_items`
items and its answer varies: on 24 items a guesser's accuracy has a standard deviation of
0.09, so a point rule would flag fair cells, and a cell whose answer is always "MRI" is
passed by any model naming MRI, whatever the construction. The option-length rule is held
to significance, per task only (a fixed vocabulary of plane names has a shortest one, and
in a cell that is the answer's identity, which the options prior measures). Pure: items
in, an `Audit` out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from medrcube.cube.item import LETTERS, Item
from medrcube.taxonomy import Level, task_level

# Words that name a modality in a question (the option texts say "MRI", questions say "MR image").
ALIASES: dict[str, tuple[str, ...]] = {
    "mri": ("mri", "mr", "magnetic"),
    "ct": ("ct", "computed tomography"),
    "ultrasound": ("ultrasound", "sonographic", "sonography", "doppler", "echocardiogram"),
    "x-ray radiography": ("x-ray", "radiograph", "radiographic", "radiography"),
}
STOP = frozenset("a an the of in on this that is are was which what image shown show shows does do it its by to and or with".split())
KINDS = ("options_prior", "sibling_named", "sibling_lift", "letter_balance", "option_length", "letter_correlation")
FIXES: dict[str, str] = {
    "options_prior": "draw distractors from the task's answer pool, weighted by how often each value is an answer, and cap any one answer's share of the task",
    "sibling_named": "phrase the image's other questions neutrally (no modality, region or finding that is another item's answer)",
    "sibling_lift": "phrase the image's other questions neutrally and do not presuppose a finding (ask presence and location on different images)",
    "letter_balance": "permute the correct letter per task from a balanced list with a recorded seed",
    "option_length": "draw option texts of similar length, or balance which answer is the longest",
    "letter_correlation": "permute letters independently per question, so that a constant letter is right on the low and high items of an image independently",
}
# A cell above its task: the answers are unbalanced within the cell, whatever the task's mix.
CELL_FIXES: dict[str, str] = {
    "options_prior": "balance the answers within the cell (no value above 1/K + 0.10 of its items); for a location task, "
                     "place lesions in every quadrant of the cell's images, cropping an image to its organ where it fills only part of it",
}


@dataclass(frozen=True, slots=True)
class AuditBounds:
    prior_margin: float = 0.10
    sibling_margin: float = 0.10
    length_margin: float = 0.10
    letter_band: float = 0.99
    constant_letter_grounding: float = 0.05
    min_cell_items: int = 10
    min_pairs: int = 20
    cell_alpha: float = 0.01
    folds: int = 5
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Finding:
    """One leak: where, what kind, the measured value against its bound, and the fix."""

    kind: str
    scope: str  # "task Organ Recognition", "cell Brain/MRI/Organ Recognition", "part Pelvis", "item X"
    value: float
    bound: float
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.scope}: {self.kind} {self.value:.3f} > {self.bound:.3f}: {self.message}. Fix: {self.fix}"


@dataclass(frozen=True, slots=True)
class Scope:
    """The audit's figures for one task or one cell."""

    n: int
    chance: float
    prior: float
    sibling: float
    named: int
    longest: float
    shortest: float
    letters: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Audit:
    tasks: dict[str, Scope]
    cells: dict[tuple[str, str, str], Scope]
    constant_letter: dict[str, dict[str, float | None]]  # scope ("overall", part) -> letter -> grounding
    findings: tuple[Finding, ...]
    bounds: AuditBounds
    prior_by_item: dict[str, float] = field(default_factory=dict)  # item id -> how often the options-only model is right

    @property
    def ok(self) -> bool:
        return not self.findings

    def flagged_cells(self) -> dict[tuple[str, str, str], list[str]]:
        """Cell -> the kinds of leak flagged in it (or in its task: a task leak is every cell's)."""
        out: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        for f in self.findings:
            for cell in self.cells:
                if f.scope == f"cell {'/'.join(cell)}" or f.scope == f"task {cell[2]}" or f.scope == f"part {cell[0]}":
                    if f.kind not in out[cell]:
                        out[cell].append(f.kind)
        return dict(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "bounds": asdict(self.bounds),
            "tasks": {t: asdict(s) for t, s in sorted(self.tasks.items())},
            "cells": {"/".join(c): asdict(s) for c, s in sorted(self.cells.items())},
            "constant_letter_grounding": self.constant_letter,
            "findings": [asdict(f) for f in self.findings],
        }


def _binom_sf(k: int, n: int, p: float) -> float:
    from scipy.stats import binom

    return float(binom.sf(k - 1, n, p)) if n else 1.0


def _letter_band(n: int, k: int, level: float) -> tuple[int, int]:
    from scipy.stats import binom

    tail = (1 - level) / 2
    return int(binom.ppf(tail, n, 1 / k)), int(binom.isf(tail, n, 1 / k))


def _length_pick(item: Item, longest: bool) -> bool:
    lengths = [len(o) for o in item.options]
    best = max(lengths) if longest else min(lengths)
    return lengths.count(best) == 1 and lengths[item.answer] == best


def _terms(text: str) -> set[str]:
    from medrcube.cube import audit_model as model  # numpy: only where the audit computes

    low = model.norm(text)
    terms = {w for w in model.words(low) if w not in STOP and len(w) > 1}
    for key, names in ALIASES.items():
        if low == key or low.startswith(key):
            terms |= set(names)
    return terms


def named_by_siblings(item: Item, siblings: Sequence[Item]) -> bool:
    """The answer's words appear in a sibling question, and no distractor's do."""
    from medrcube.cube import audit_model as model  # numpy: only where the audit computes

    text = " ".join(model.norm(s.question) for s in siblings if s.id != item.id)
    if not text:
        return False
    hay = set(model.words(text)) | {t for names in ALIASES.values() for t in names if " " in t and t in text}
    terms = [_terms(o) for o in item.options]
    # Only words that set an option apart count: "Upper left" and "Lower left" share "left".
    own = [t - set().union(*(u for j, u in enumerate(terms) if j != i)) for i, t in enumerate(terms)]
    named = [bool(t & hay) for t in own]
    return named[item.answer] and sum(named) == 1


def constant_letter_grounding(items: Iterable[Item], exclude_low: Sequence[str] = ("View Recognition",)) -> dict[str, dict[str, float | None]]:
    """Per scope (overall, each part) and letter: the grounding a constant-letter model would get."""
    from medrcube.cube import audit_model as model  # numpy: only where the audit computes

    by_image: dict[str, dict[str, list[Item]]] = defaultdict(lambda: {"high": [], "low": []})
    for it in items:
        if not it.image or it.task in exclude_low:
            continue
        try:
            level = task_level(it.task)
        except KeyError:
            continue
        by_image[model.image_key(it)]["high" if level is Level.HIGH else "low"].append(it)
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # a, n1, d, n0
    for sides in by_image.values():
        for h in sides["high"]:
            for lo in sides["low"]:
                for scope in ("overall", h.part):
                    for letter in LETTERS[:4]:
                        row = counts[(scope, letter)]
                        hit = h.answer_letter == letter
                        if lo.answer_letter == letter:
                            row[0] += hit
                            row[1] += 1
                        else:
                            row[2] += hit
                            row[3] += 1
    out: dict[str, dict[str, float | None]] = defaultdict(dict)
    for (scope, letter), (a, n1, d, n0) in sorted(counts.items()):
        out[scope][letter] = (a / n1 - d / n0) if n1 and n0 else None
    out["pairs"] = {scope: float(sum(counts[(scope, "A")][i] for i in (1, 3))) for scope, _ in counts}
    return dict(out)


def _scope(items: Sequence[Item], prior: dict[str, float], sibling: dict[str, float], named: set[str]) -> Scope:
    n = len(items)
    mean = (lambda xs: sum(xs) / n) if n else (lambda xs: 0.0)
    return Scope(
        n=n,
        chance=mean([1 / len(it.options) for it in items]),
        prior=mean([prior.get(it.id, 0.0) for it in items]),
        sibling=mean([sibling.get(it.id, 0.0) for it in items]),
        named=sum(it.id in named for it in items),
        longest=mean([_length_pick(it, True) for it in items]),
        shortest=mean([_length_pick(it, False) for it in items]),
        letters=dict(sorted(Counter(it.answer_letter for it in items).items())),
    )


def audit_items(items: Sequence[Item], bounds: AuditBounds | None = None) -> Audit:
    """The four audits of `items` (module docstring)."""
    from medrcube.cube import audit_model as model  # numpy: only where the audit computes

    b = bounds or AuditBounds()
    items = [it for it in items if len(it.options) >= 2]
    siblings: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        siblings[model.image_key(it)].append(it)
    prior = model.cross_validated(items, model.option_features, b.folds, b.seed)
    sib = model.cross_validated(items, model.sibling_features(siblings), b.folds, b.seed)
    named = {it.id for it in items if named_by_siblings(it, siblings[model.image_key(it)])}
    by_task: dict[str, list[Item]] = defaultdict(list)
    by_cell: dict[tuple[str, str, str], list[Item]] = defaultdict(list)
    for it in items:
        by_task[it.task].append(it)
        by_cell[it.cell].append(it)
    tasks = {t: _scope(v, prior, sib, named) for t, v in sorted(by_task.items())}
    cells = {c: _scope(v, prior, sib, named) for c, v in sorted(by_cell.items())}
    findings: list[Finding] = []
    def significant(s: Scope, value: float, chance: float) -> bool:
        return _binom_sf(round(value * s.n), s.n, chance) < b.cell_alpha

    for t, s in tasks.items():
        if s.n >= b.min_cell_items:
            findings += _scope_findings(f"task {t}", s, b, significant, point=True)
        findings += _letter_findings(t, by_task[t], b)
    for c, s in cells.items():
        # A cell whose answer never varies (every Modality Recognition item of Brain/MRI is
        # "MRI") is passed by any model that names that value: no construction can change
        # that; what a blind model gains across cells is bounded by its task's figures.
        if s.n >= b.min_cell_items and len({it.answer_text for it in by_cell[c]}) > 1:
            findings += _scope_findings(f"cell {'/'.join(c)}", s, b, significant, point=False)
    for it in items:
        if it.id in named:
            others = [s.task for s in siblings[model.image_key(it)] if s.id != it.id]
            findings.append(Finding("sibling_named", f"item {it.id}", 1.0, 0.0,
                                    f"its answer {it.answer_text!r} is named by another question of its image ({', '.join(others)})",
                                    FIXES["sibling_named"]))  # fmt: skip
    grounding = constant_letter_grounding(items)
    pairs = grounding.get("pairs", {})
    for scope, letters in grounding.items():
        n_pairs = int(pairs.get(scope) or 0)
        if scope == "pairs" or n_pairs < b.min_pairs:
            continue
        for letter, g in letters.items():
            if g is not None and g > b.constant_letter_grounding:
                where = "overall" if scope == "overall" else f"part {scope}"
                findings.append(Finding("letter_correlation", where, g, b.constant_letter_grounding,
                                        f"a model answering {letter!r} to everything has grounding {g:.3f} on {n_pairs} pairs",
                                        FIXES["letter_correlation"]))  # fmt: skip
    return Audit(tasks, cells, grounding, tuple(findings), b, prior)


def _scope_findings(where: str, s: Scope, b: AuditBounds, significant: Any, point: bool) -> list[Finding]:
    """Leaks of one task (`point`: held to the point estimates) or cell (held to significance)."""
    out = []
    checks = [
        ("options_prior", s.prior, s.chance + b.prior_margin, s.prior, point, "an options-only text model"),
        ("sibling_lift", s.sibling - s.prior, b.sibling_margin, s.sibling, False, "reading the image's other questions adds"),
    ]
    if point:  # per cell, a fixed vocabulary's shortest name is its identity: the prior covers that
        checks.append(("option_length", max(s.longest, s.shortest), s.chance + b.length_margin, max(s.longest, s.shortest), False,
                       "picking the longest or shortest option"))  # fmt: skip
    for kind, value, bound, tested, on_point, what in checks:
        # Off the point rule, the model behind the figure must also beat chance significantly.
        if value > bound + 1e-12 and (on_point or significant(s, tested, s.chance)):
            detail = f"{what} gets {value:.3f} of {s.n} items right against chance {s.chance:.3f}" if kind != "sibling_lift" else (
                f"{what} {value:.3f} to the options-only model's {s.prior:.3f} ({s.sibling:.3f} on {s.n} items)")
            out.append(Finding(kind, where, value, bound, detail, FIXES[kind] if point else CELL_FIXES.get(kind, FIXES[kind])))
    return out


def _letter_findings(task: str, items: Sequence[Item], b: AuditBounds) -> list[Finding]:
    out = []
    by_k: dict[int, Counter[str]] = defaultdict(Counter)
    for it in items:
        by_k[len(it.options)][it.answer_letter] += 1
    for k, counts in sorted(by_k.items()):
        n = sum(counts.values())
        lo, hi = _letter_band(n, k, b.letter_band)
        for letter in LETTERS[:k]:
            c = counts.get(letter, 0)
            if not lo <= c <= hi:
                out.append(Finding("letter_balance", f"task {task}", c / n, hi / n,
                                   f"letter {letter} is correct on {c} of {n} {k}-option items; the {b.letter_band:.0%} binomial band is {lo}..{hi}",
                                   FIXES["letter_balance"]))  # fmt: skip
    return out

