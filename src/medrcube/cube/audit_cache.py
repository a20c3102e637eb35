"""The leakage audit of a cube, computed once per cube content (cube/derived_cache.py).

`cached_audit(items)` is `audit_items(items)` (cube/audit.py) for every caller that wants
the same figures again: the key is the SHA-256 of the items' whole content (ids,
questions, options, answers, cells, image keys), the bounds, and the source of the audit's
modules, so an edited item, other bounds or a changed audit is a miss. The gate runs the
audit at every start (seconds of CPU on a 7,626-item cube); from the second run on a
cube it reads a few hundred kilobytes instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from medrcube.cube import audit
from medrcube.cube.audit import Audit, AuditBounds, Finding, Scope, audit_items
from medrcube.cube.derived_cache import Slot, cached, items_digest, module_file, source_digest
from medrcube.cube.item import Item


def _code_digest() -> str:
    # audit_model's file, not its import: it imports numpy, which a hit does not need
    return source_digest([audit.__file__, module_file("medrcube.cube.audit_model"), __file__])


def _scope(d: dict[str, Any]) -> Scope:
    return Scope(n=int(d["n"]), chance=float(d["chance"]), prior=float(d["prior"]), sibling=float(d["sibling"]),
                 named=int(d["named"]), longest=float(d["longest"]), shortest=float(d["shortest"]),
                 letters={str(k): int(v) for k, v in d["letters"].items()})


def encode(a: Audit) -> dict[str, Any]:
    return {"tasks": {t: asdict(s) for t, s in a.tasks.items()},
            "cells": [[list(c), asdict(s)] for c, s in a.cells.items()],
            "constant_letter": a.constant_letter, "findings": [asdict(f) for f in a.findings],
            "bounds": asdict(a.bounds), "prior_by_item": a.prior_by_item}


def decode(d: dict[str, Any]) -> Audit:
    cells: dict[tuple[str, str, str], Scope] = {}
    for c, s in d["cells"]:
        part, modality, task = (str(x) for x in c)
        cells[(part, modality, task)] = _scope(s)
    return Audit(tasks={str(t): _scope(s) for t, s in d["tasks"].items()}, cells=cells,
                 constant_letter=d["constant_letter"], findings=tuple(Finding(**f) for f in d["findings"]),
                 bounds=AuditBounds(**d["bounds"]), prior_by_item={str(k): float(v) for k, v in d["prior_by_item"].items()})


def _parts(items: Sequence[Item], bounds: AuditBounds, digest: str | None) -> dict[str, Any]:
    return {"items": digest or items_digest(items), "bounds": asdict(bounds), "code": _code_digest()}


def cached_audit(items: Sequence[Item], bounds: AuditBounds | None = None, *, digest: str | None = None,
                 made: Audit | None = None) -> Audit:
    """`audit_items(items, bounds)`, from this user's cache when it holds this content.
    `digest` is `items_digest(items)` when the caller has it already (the gate computes it
    at start-up: 10 ms on the bundled cube not spent again after the last answer); `made`,
    that audit with these bounds when the caller has it already (cube/audit_child.py:
    computed in a child process from these items, checked by their digest), kept in the
    cache instead of computed."""
    b = bounds or AuditBounds()

    def compute() -> Audit:
        return made if made is not None else audit_items(items, b)

    return cached("leak-audit", _parts(items, b, digest), compute, encode, decode)


def stored_audit(items: Sequence[Item], *, digest: str | None = None) -> Audit | None:
    """The audit with the default bounds if this user's cache holds it for this content,
    else None (nothing computed: a caller that has other work to do first)."""
    slot = Slot.open("leak-audit", _parts(items, AuditBounds(), digest))
    hit = slot.read(decode) if slot is not None else None
    return hit[0] if hit is not None else None


__all__ = ["cached_audit", "items_digest", "stored_audit"]
