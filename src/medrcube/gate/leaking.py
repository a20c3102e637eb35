"""Which required checks rest on items whose text gives their answer away.

The leakage audit (cube/audit.py) measures how well a text-only model of the options
(and of the image's other questions) answers each item. A check whose items it answers
shows nothing about reading images: a pass there is not evidence for QUALIFIED. A check
*leaks* when, over its own items,

- the audit flags its own scope for an options-only or sibling leak (a cell finding for
  a cell check; a task finding for a check within that task), or
- the options-only model (an item named by another question of its image counting as
  answered) beats the items' chance by more than the audit's `prior_margin`, and
  significantly (one-sided binomial p below the audit's `cell_alpha`) on at least
  `min_cell_items` items: the audit's own rule for a cell, applied to the check's items.

Such a check is still run and reported, but not required: its verdict, gate.json's
`gate.not_required` and the summary's verdict block say so and why, as for a check the
cube cannot decide (gate/feasible.py). A cube whose options give every answer leaves no
required check, and the gate is UNDECIDED. Only the kinds whose pass is "these answers
are right" are assessed (accuracy, credibility, findings); the paired kinds compare two
answer sets on the same items. Pure: the audit and the items in, reasons out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from medrcube.cube.audit import Audit
from medrcube.cube.item import Item
from medrcube.metrics.special import bdtrc

LEAK_KINDS = ("options_prior", "sibling_named", "sibling_lift")
ASSESSED_KINDS = frozenset({"cell", "slice", "overall", "credibility", "finding"})


@dataclass(frozen=True, slots=True)
class Scope:
    """A check's selector: None matches any value of the axis."""

    part: str | None
    modality: str | None
    task: str | None

    def covers(self, item: Item) -> bool:
        return all(v is None or v == got for v, got in ((self.part, item.part), (self.modality, item.modality),
                                                        (self.task, item.task)))


def _named(audit: Audit) -> set[str]:
    return {f.scope[len("item "):] for f in audit.findings if f.kind == "sibling_named" and f.scope.startswith("item ")}


def _scope_finding(scope: Scope, audit: Audit) -> str | None:
    for f in audit.findings:
        if f.kind not in LEAK_KINDS or f.scope.startswith("item "):
            continue
        kind, _, where = f.scope.partition(" ")
        if kind == "task" and scope.task == where:
            return f"{f.kind} leak of its task ({f.message})"
        if kind == "cell" and "/".join(str(x) for x in (scope.part, scope.modality, scope.task)) == where:
            return f"{f.kind} leak of its cell ({f.message})"
    return None


class _ByCell:
    """The items grouped by their (part, modality, task) once, and the named items once: a
    scope's items are then gathered from the cells it covers, in the items' order, instead of
    every check testing every item (checks x items grew faster than the cube)."""

    def __init__(self, items: Sequence[Item], audit: Audit) -> None:
        self.items = items
        self.named = _named(audit)
        self.cells: dict[tuple[str, str, str], list[int]] = {}
        for i, it in enumerate(items):
            self.cells.setdefault((it.part, it.modality, it.task), []).append(i)

    def covered(self, scope: Scope) -> list[Item]:
        at = sorted(i for (part, modality, task), where in self.cells.items()
                    if all(v is None or v == got for v, got in ((scope.part, part), (scope.modality, modality),
                                                                (scope.task, task)))
                    for i in where)
        return [self.items[i] for i in at]


def leak_reason(scope: Scope, items: Sequence[Item], audit: Audit, *, by_cell: _ByCell | None = None) -> str | None:
    """Why a check over `scope` leaks (module docstring), or None. `by_cell`: the same items
    grouped once (`leaking` passes it for every check)."""
    found = _scope_finding(scope, audit)
    if found is not None:
        return f"its items leak: {found}"
    covered = by_cell.covered(scope) if by_cell is not None else [it for it in items if scope.covers(it)]
    mine = [it for it in covered if len(it.options) >= 2 and it.id in audit.prior_by_item]
    n = len(mine)
    b = audit.bounds
    if n < b.min_cell_items:
        return None
    named = by_cell.named if by_cell is not None else _named(audit)
    right = sum(1.0 if it.id in named else float(audit.prior_by_item[it.id]) for it in mine)
    chance = sum(1 / len(it.options) for it in mine) / n
    prior = right / n
    if prior > chance + b.prior_margin + 1e-12 and bdtrc(round(right) - 1, n, chance) < b.cell_alpha:
        shown = f"; {sum(it.id in named for it in mine)} named by another question of their image" if named else ""
        return (f"its items leak: a text-only model of the options answers {prior:.3f} of its {n} items against "
                f"chance {chance:.3f}{shown} (medrcube validate --audit)")
    return None


def leaking(checks: Iterable[tuple[str, str, Scope, bool]], items: Sequence[Item], audit: Audit, *,
            reasons: dict[Scope, str | None] | None = None) -> dict[str, str]:
    """Check id -> why it leaks, for the required checks of an assessed kind
    (`checks`: (id, kind, scope, required)). `reasons`: each scope's `leak_reason` on these
    items and this audit, taken before (`leak_reasons`); a scope not in it is assessed now."""
    out: dict[str, str] = {}
    by_cell: _ByCell | None = None
    for cid, kind, scope, required in checks:
        if not required or kind not in ASSESSED_KINDS:
            continue
        if reasons is not None and scope in reasons:
            why = reasons[scope]
        else:
            by_cell = by_cell or _ByCell(items, audit)
            why = leak_reason(scope, items, audit, by_cell=by_cell)
        if why is not None:
            out[cid] = why
    return out


def leak_reasons(scopes: Iterable[Scope], items: Sequence[Item], audit: Audit) -> dict[Scope, str | None]:
    """`leak_reason` of each scope (None: it does not leak), the items grouped once: what
    `leaking` needs of a run's checks, known before their verdicts."""
    by_cell = _ByCell(items, audit)
    return {scope: leak_reason(scope, items, audit, by_cell=by_cell) for scope in dict.fromkeys(scopes)}


def scope_of(entry: Mapping[str, object]) -> Scope:
    """The selector of a gate.json check entry."""
    def axis(key: str) -> str | None:
        v = entry.get(key)
        return None if v is None else str(v)

    return Scope(axis("part"), axis("modality"), axis("task"))


def options_only_prior(items: Sequence[Item], audit: Audit, part: str | None, modality: str | None,
                       task: str | None) -> float | None:
    """The mean options-only prior (the audit's text-only model) of the items of a scope (None: any
    value of that axis); None when the audit has none of them."""
    hits = [audit.prior_by_item[it.id] for it in items
            if (part is None or it.part == part) and (modality is None or it.modality == modality)
            and (task is None or it.task == task) and it.id in audit.prior_by_item]
    return sum(hits) / len(hits) if hits else None
