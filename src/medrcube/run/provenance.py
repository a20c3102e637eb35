"""Where a run's answers came from: its run token, and the counts gate.json, run.json, the
summary and report.html show (asked live in this run, or taken from the response store,
and from which runs); and answers whose endpoint named another model than the one asked.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from medrcube.models.base import ModelAdapter, same_model

log = logging.getLogger("medrcube.run")


def new_run_token() -> str:
    """The identity of one run in the provenance of the answers it stores: a UTC time and
    a random part, e.g. 20260101T120000Z-3f2a9c1d (the xdist workers of a gate run share one)."""
    return f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"


def provenance_counts(run: str, origins: Iterable[tuple[str | None, bool]], *, signing: bool) -> dict[str, Any]:
    """The provenance block of run.json and gate.json, one origin (the run that asked the
    answer, whether its digest is signed) per graded ask: `live` were asked by this run
    (by any of its processes), `stored` came from the store, written by the runs in
    `from_runs`; `signed` says whether this run signs (MEDRCUBE_SIGNING_KEY was set)."""
    by_run: Counter[str] = Counter()
    live = stored = unsigned = 0
    for origin_run, signed in origins:
        if origin_run == run:
            live += 1
            continue
        stored += 1
        unsigned += 0 if signed else 1
        by_run[origin_run or "(unknown)"] += 1
    return {"run": run, "signed": signing, "live": live, "stored": stored, "stored_unsigned": unsigned,
            "from_runs": dict(sorted(by_run.items()))}


def merged_counts(blocks: Iterable[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One provenance block for several passes of one run (a sequential run's batches)."""
    present = [b for b in blocks if b]
    if not present:
        return None
    runs: Counter[str] = Counter()
    for b in present:
        runs.update(b.get("from_runs") or {})
    out = dict(present[0])
    for name in ("live", "stored", "stored_unsigned"):
        out[name] = sum(int(b.get(name) or 0) for b in present)
    out["from_runs"] = dict(sorted(runs.items()))
    return out


def provenance_line(provenance: Mapping[str, Any] | None) -> str | None:
    """Answers asked live vs taken from the store, and from which runs."""
    if not provenance:
        return None
    runs = provenance.get("from_runs") or {}
    line = f"answers: {provenance['live']} asked live in this run, {provenance['stored']} from the response store"
    if runs:
        shown = ", ".join(f"{run} ({n})" for run, n in list(runs.items())[:3]) + (", ..." if len(runs) > 3 else "")
        line += f" (asked by runs {shown})"
    if provenance.get("stored_unsigned"):
        line += f", {provenance['stored_unsigned']} of them UNSIGNED"
    if not provenance.get("signed"):
        line += "; UNSIGNED: set MEDRCUBE_SIGNING_KEY to sign answers and the run directory"
    return line


def served_mismatches(adapter: ModelAdapter, served: Counter[str]) -> dict[str, int]:
    """Answers whose endpoint named another model than the one asked for: kept in run.json
    and logged, so that a gateway routing to another model is seen (strict_model makes
    them errors instead)."""
    requested = adapter.model
    if requested is None:
        return {}
    other = {name: n for name, n in served.items() if not same_model(requested, name)}
    for name, n in other.items():
        log.warning("%d answers of %s name the model %r, not the requested %r (see served_models in run.json)",
                    n, adapter.spec, name, requested)
    return other
