"""The leakage audit beside the gate's verdicts (issue 28): gate.json's `leak_flags` (the
cells of the cube the audit flags, with the kinds of leak), and for every image-dependence
check the options-only prior of its items (`details.options_only_prior`), printed beside
the blind drop: a small drop means little when the options alone give the answer."""

from __future__ import annotations

from typing import Any


def leak_meta(session: Any, entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from medrcube.plugin.ahead import leak_audit

    items = list(session.cube.items)
    audit = leak_audit(session)  # the same figures as audit_items, once per cube content
    for e in entries.values():
        if e.get("kind") != "image_dependence":
            continue
        scope = [it for it in items if all(e.get(k) in (None, v) for k, v in (("part", it.part), ("modality", it.modality), ("task", it.task)))]
        hits = [audit.prior_by_item[it.id] for it in scope if it.id in audit.prior_by_item]
        if hits:
            e.setdefault("details", {})["options_only_prior"] = sum(hits) / len(hits)
    return {"leak_flags": {"/".join(c): kinds for c, kinds in sorted(audit.flagged_cells().items())}}
