"""What the processes of a run hand to the controller, merged into one run: the records
(with `cached` meaning the run's, not one worker's), the request counts and the usage.

A module of its own beside summary.py (which writes what is merged here).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

from medrcube.records import GradedRecord, Outcome

__all__ = ["merge_handovers", "merged_usage", "records_out", "without_records"]


def records_out(records: Iterable[GradedRecord]) -> dict[str, str]:
    """An xdist worker's records for its hand-over: one JSON string of their dicts, and the
    (item, variant) of those it asked itself, one per line. Strings, because pytest-xdist
    sends a worker's output through execnet's serializer, which walks every object in
    Python: 36,478 records as dicts cost each worker about 1 s of CPU to send and the
    controller more to receive, after the last answer (docs/speed.md, "Tenth pass")."""
    records = list(records)
    return {"records_json": json.dumps([r.to_dict() for r in records], ensure_ascii=False),
            "asked": "\n".join(f"{r.item_id}\t{r.variant}" for r in records if not r.cached)}


def without_records(handover: Mapping[str, Any]) -> dict[str, Any]:
    """A hand-over with its records dropped, its `asked` keys kept: every process of a run
    agrees on the records (`merge_handovers` takes the first's), so the controller keeps one copy."""
    out = dict(handover)
    if "records_json" in out or "records" in out:
        out["asked"] = "\n".join(f"{item}\t{variant}" for item, variant, cached in _keys(out) if not cached)
        out.pop("records_json", None)
        out.pop("records", None)
    return out


def _records(handover: Mapping[str, Any]) -> list[GradedRecord]:
    if "records_json" in handover:
        return [GradedRecord.from_dict(d) for d in json.loads(handover["records_json"])]
    return [d if isinstance(d, GradedRecord) else GradedRecord.from_dict(d) for d in handover.get("records") or ()]


def _keys(handover: Mapping[str, Any]) -> Iterable[tuple[str, str, bool]]:
    """(item, variant, cached) of a hand-over's records; from its `asked` lines when it carries those (all not cached)."""
    if "asked" in handover and "records" not in handover:
        return ((item, variant, False) for item, _, variant in
                (line.partition("\t") for line in str(handover["asked"]).split("\n") if line))
    if "records_json" in handover:
        return map(_key, json.loads(handover["records_json"]))
    return map(_key, handover.get("records") or ())


def merge_handovers(handovers: Iterable[Mapping[str, Any]]) -> Any:
    """One RunResult for the whole run: the records every inferring process agrees on
    (they all read the same store; the first is taken), and the request counts summed
    over processes. None if no process ran inference."""
    from medrcube.run.runner import RunResult

    handovers = [h for h in handovers if h]
    if not handovers:
        return None
    # The first hand-over that carries records (`without_records` dropped the others').
    first = next((h for h in handovers if "records" in h or "records_json" in h), handovers[0])
    # `cached` means answered from a store written before this run: an ask one worker
    # sent is not cached for the run, although the other workers read it from the store.
    # A handover's records are a JSON string of dicts (an xdist worker's: `records_out`), or
    # from this process itself the records (GateSession.handover(live=True)).
    records = _records(first)
    if any(rec.cached for rec in records):  # else nothing to correct (a run on a new store)
        fresh = {(item, variant) for h in handovers for item, variant, cached in _keys(h) if not cached}
        records = [rec if not rec.cached or (rec.item_id, rec.variant) not in fresh
                   else dataclasses.replace(rec, cached=False) for rec in records]
    requests = sum(int(h["requests_sent"]) for h in handovers)
    unavailable = sum(r.outcome is Outcome.UNAVAILABLE for r in records)
    return RunResult(
        records=records,
        requests_sent=requests,
        # Asks answered from the store without any process of this run asking them.
        cache_hits=sum(r.cached for r in records),
        errors=sum(r.outcome is Outcome.ERROR for r in records),
        unavailable=unavailable,
        wall_s=max(float(h["wall_s"]) for h in handovers),
        judge_requests=sum(int(h.get("judge_requests", 0)) for h in handovers),
        started=min(float(h["started"]) for h in handovers),
        finished=max(float(h["finished"]) for h in handovers),
        aborted=next((h["aborted"] for h in handovers if h.get("aborted")), None),
        info={
            **dict(first.get("info") or {}),
            # How the asks were spread over the processes (xdist workers) of this run.
            "requests_by_process": {str(h.get("worker", i)): int(h["requests_sent"]) for i, h in enumerate(handovers)},
        },
    )


def _key(d: GradedRecord | Mapping[str, Any]) -> tuple[str, str, bool]:
    """(item, variant, cached) of a handed-over record or of its dict."""
    if isinstance(d, GradedRecord):
        return d.item_id, d.variant, bool(d.cached)
    return d["item_id"], d["variant"], bool(d.get("cached"))


def merged_usage(handovers: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Usage per model role, summed over the processes of the run."""
    from medrcube.run.metering import Usage

    out: dict[str, Usage] = {}
    for h in handovers:
        for role, u in (h.get("usage") or {}).items():
            out.setdefault(role, Usage()).add(u)
    return {role: u.to_dict() for role, u in out.items()}
