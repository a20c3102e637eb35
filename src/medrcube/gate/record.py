"""The policy on record: its digest, its profile, how its checks differ from those of the
shipped default policy, and the refusal of bounds a guesser meets.

A verdict is only as strong as the policy it was decided under, and a policy is a file
anyone can edit. So every output of the gate (gate.json, JUnit properties, the Allure
environment, the summary's verdict block) carries:
- `digest`: SHA-256 of the policy file's bytes, as it was read;
- `differences`: the checks of this run compared one by one with those the shipped
  default policy (same profile when it has it) builds on the same cube, variants and
  baseline: checks removed or added, bounds, rules, confidence levels, above_chance
  margins changed, required checks made optional;
- `summary`: one sentence of them ("87 cell checks removed, overall bound 0.5 -> 0.01").

An accuracy check whose bound is at or below chance on the cube's items (with no
above_chance margin to raise it) passes a model that guesses: such a policy is refused
(`below_chance`) unless the entry that sets the bound says `at_chance: true`.

Pure: reads the policy files, nothing else.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from medrcube.gate.checks import ACCURACY_KINDS, Check
from medrcube.gate.validate import AT_CHANCE

# Compared between this run's checks and the default's, in this order.
_FIELDS = ("bound", "rule", "confidence", "above_chance", "required")


def policy_digest(path: str | Path) -> str:
    """`sha256:<hex>` of the policy file's bytes."""
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


def differences(checks: Sequence[Check], default: Sequence[Check]) -> list[dict[str, Any]]:
    """Each way this run's checks differ from the default policy's, check by check."""
    mine = {c.id: c for c in checks}
    theirs = {c.id: c for c in default}
    out: list[dict[str, Any]] = []
    for cid, c in theirs.items():
        if cid not in mine:
            out.append({"change": "removed", "check": cid, "kind": str(c.kind)})
    for cid, c in mine.items():
        d = theirs.get(cid)
        if d is None:
            out.append({"change": "added", "check": cid, "kind": str(c.kind), "value": c.bound})
            continue
        for name in _FIELDS:
            before, after = getattr(d, name), getattr(c, name)
            if before != after:
                out.append({"change": name, "check": cid, "kind": str(c.kind), "default": before, "value": after})
    return out


def _num(x: Any) -> str:
    return "none" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def _changed(rows: list[dict[str, Any]], what: str) -> str:
    if len(rows) <= 3:
        return ", ".join(f"{r['check']} {what} {_num(r['default'])} -> {_num(r['value'])}" for r in rows)
    moves = Counter(f"{_num(r['default'])} -> {_num(r['value'])}" for r in rows)
    return f"{what} changed on {len(rows)} checks (" + ", ".join(f"{m}: {n}" for m, n in moves.most_common(3)) + ")"


def differences_summary(diffs: Sequence[Mapping[str, Any]]) -> str | None:
    """The differences in one sentence, or None when there are none."""
    if not diffs:
        return None
    parts: list[str] = []
    for change in ("removed", "added"):
        kinds = Counter(str(d["kind"]) for d in diffs if d["change"] == change)
        parts += [f"{n} {kind} check{'s' if n > 1 else ''} {change}" for kind, n in kinds.most_common()]
    for name in _FIELDS:
        rows = [dict(d) for d in diffs if d["change"] == name]
        if not rows:
            continue
        if name == "required":
            n = sum(1 for r in rows if not r["value"])
            parts += [f"{n} required checks made optional"] if n else []
            parts += [f"{len(rows) - n} optional checks made required"] if len(rows) - n else []
        else:
            parts.append(_changed(rows, name))
    return "policy differs from the shipped default: " + "; ".join(parts)


def chance_levels(checks: Iterable[Check], items: Iterable[tuple[tuple[str, str, str], int]]) -> dict[str, float]:
    """Chance accuracy (mean of 1/options) of each accuracy check over the cube's items,
    given as (cell, number of options)."""
    items = list(items)
    inverse = [1.0 / n if n else 0.0 for _, n in items]
    at: dict[tuple[str, str, str], list[int]] = {}  # cell -> the positions of its items with options
    for i, (cell, n) in enumerate(items):
        if n:
            at.setdefault(cell, []).append(i)
    by_selector: dict[tuple[str | None, ...], float | None] = {}  # the checks of a scope share it
    out: dict[str, float] = {}
    for c in checks:
        if c.kind not in ACCURACY_KINDS:
            continue
        key = tuple(c.selector)
        if key not in by_selector:
            # The check's cells first (a few hundred), then their items' positions back in the
            # items' order: the same terms summed in the same order as matching every item
            # against the selector (so the same float), without a pass over the items per check.
            mine = [at[cell] for cell in at if all(s is None or s == v for s, v in zip(key, cell, strict=True))]
            scope = mine[0] if len(mine) == 1 else sorted(chain.from_iterable(mine))
            by_selector[key] = sum(map(inverse.__getitem__, scope)) / len(scope) if scope else None
        if (level := by_selector[key]) is not None:
            out[c.id] = level
    return out


def _entry(doc: Any, source: str) -> Any:
    """The raw policy entry at a key path such as `cells[2]`, `profiles.deployment.overall`."""
    node = doc
    for piece in source.split("."):
        m = re.fullmatch(r"(.*?)\[(\d+)\]", piece)
        name, index = (m.group(1), int(m.group(2))) if m else (piece, None)
        node = node.get(name) if isinstance(node, Mapping) else None
        if index is not None:
            node = node[index] if isinstance(node, list) and index < len(node) else None
    return node


def below_chance(checks: Sequence[Check], chance: Mapping[str, float], policy_file: str | Path
                 ) -> tuple[list[str], list[str]]:
    """(refused, allowed): accuracy checks whose bound is at or below chance with no
    above_chance margin, each as a sentence; `allowed` are those whose entry says
    `at_chance: true`."""
    low = [c for c in checks if c.id in chance and c.bound is not None and c.above_chance <= 0
           and c.bound <= chance[c.id]]
    if not low:
        return [], []
    # only for a bound at chance: PyYAML is left unloaded otherwise (plugin/speed/policy_memo.py)
    from medrcube.yamlconf import YamlFileError, read_yaml_file

    try:
        doc = read_yaml_file(Path(policy_file), missing_fix="pass --thresholds PATH")
    except YamlFileError:
        doc = None
    refused, allowed = [], []
    for c in low:
        entry = _entry(doc, c.source)
        if isinstance(entry, Mapping) and entry.get(AT_CHANCE) is True:
            allowed.append(c.id)
        else:
            refused.append(f"{c.id}: bound {c.bound:g} (key {c.source}) is at or below chance "
                           f"({chance[c.id]:.3f} on this cube's items) with no above_chance margin")
    return refused, allowed
