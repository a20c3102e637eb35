"""The leakage audit beside the gate's verdicts: gate.json's `leak_flags` (the
cells of the cube the audit flags, with the kinds of leak), and for every image-dependence
check the options-only prior of its items (`details.options_only_prior`), printed beside
the blind drop: a small drop means little when the options alone give the answer.

The audit also reaches the verdict: a required check whose items leak (gate/leaking.py)
is made reported-only, with its reason in its entry (`details.not_required`, as for a
check the cube cannot decide), in gate.json's `leaking` and in the summary's verdict block."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def leak_meta(session: Any, entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from medrcube.gate.kinds import entry_of
    from medrcube.gate.leaking import leaking, options_only_prior, scope_of
    from medrcube.plugin.speed.tail_ahead import leak_audit

    items = list(session.cube.items_by_content)  # copies of an image are one image
    audit = leak_audit(session)  # the same figures as audit_items, once per cube content
    judged = session.blind_priors  # while the answers came in (tail_ahead.judge_leaks): taken for this audit only
    priors = judged[1] if judged is not None and judged[0] is audit else {}
    for e in entries.values():
        entry = entry_of(str(e.get("kind")))
        if entry is None or entry.against != "blind":  # the image-dependence checks: standard against blind
            continue
        scope = (e.get("part"), e.get("modality"), e.get("task"))
        prior = priors[scope] if scope in priors else options_only_prior(items, audit, *scope)
        if prior is not None:
            e.setdefault("details", {})["options_only_prior"] = prior
    ahead = session.leak_reasons  # (the audit, each scope's reason) taken while the answers came in
    leaks = leaking(((cid, str(e.get("kind")), scope_of(e), bool(e.get("required", True))) for cid, e in entries.items()),
                    items, audit, reasons=ahead[1] if ahead is not None and ahead[0] is audit else None)
    for cid, why in leaks.items():  # not counted toward QUALIFIED, and said so in its entry
        e = entries[cid]
        e["required"] = False
        e.setdefault("details", {})["not_required"] = why
        e["message"] = f"{e.get('message', '')} [not required: {why}]".strip()
    return {"leak_flags": {"/".join(c): kinds for c, kinds in sorted(audit.flagged_cells().items())},
            "leaking": dict(sorted(leaks.items()))}


def leak_lines(meta: Mapping[str, Any]) -> list[str]:
    """The verdict block's line on required checks made reported-only by a leak."""
    leaks = meta.get("leaking") or {}
    if not leaks:
        return []
    shown = "; ".join(f"{cid}: {why}" for cid, why in list(leaks.items())[:3]) + ("; ..." if len(leaks) > 3 else "")
    return [f"leaking: {len(leaks)} required checks not counted toward QUALIFIED, their items answerable without "
            f"the image ({shown})"]
