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
from medrcube.run.signing import NONE, SITE, USER, Signer

log = logging.getLogger("medrcube.run")


def new_run_token() -> str:
    """The identity of one run in the provenance of the answers it stores: a UTC time and
    a random part, e.g. 20260101T120000Z-3f2a9c1d (the xdist workers of a gate run share one)."""
    return f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"


Origin = tuple[str | None, str]  # the run that asked an answer, who signed it (run/signing.SITE, USER or NONE)


def provenance_counts(run: str, origins: Mapping[Origin, int], *, signer: Signer | None,
                      unsigned_asked_again: int = 0) -> dict[str, Any]:
    """The provenance block of run.json and gate.json from the number of graded asks each
    origin answered (the runner counts them as the answers come in): `live` were asked by
    this run (by any of its processes), `stored` came from the store, written by the runs in
    `from_runs`; `signers` counts the graded answers by who signed them; `signer` says whom
    this run signs with, `signed` whether that is the site key (MEDRCUBE_SIGNING_KEY);
    `unsigned_asked_again` counts stored answers bound by a plain digest only, asked again."""
    by_run: Counter[str] = Counter()
    signers: Counter[str] = Counter()
    live = stored = unsigned = 0
    for (origin_run, who), n in origins.items():
        signers[who] += n
        if origin_run == run:
            live += n
            continue
        stored += n
        unsigned += n if who == NONE else 0
        by_run[origin_run or "(unknown)"] += n
    me = signer or Signer(NONE, None)
    return {"run": run, "signed": me.who == SITE, "signer": me.who, "key_id": me.key_id, "live": live,
            "stored": stored, "stored_unsigned": unsigned, "unsigned_asked_again": unsigned_asked_again,
            "signers": dict(sorted(signers.items())), "from_runs": dict(sorted(by_run.items()))}


def merged_counts(blocks: Iterable[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One provenance block for several passes of one run (a sequential run's batches)."""
    present = [b for b in blocks if b]
    if not present:
        return None
    runs: Counter[str] = Counter()
    signers: Counter[str] = Counter()
    for b in present:
        runs.update(b.get("from_runs") or {})
        signers.update(b.get("signers") or {})
    out = dict(present[0])
    for name in ("live", "stored", "stored_unsigned"):
        out[name] = sum(int(b.get(name) or 0) for b in present)
    out["unsigned_asked_again"] = max(int(b.get("unsigned_asked_again") or 0) for b in present)
    out["from_runs"] = dict(sorted(runs.items()))
    out["signers"] = dict(sorted(signers.items()))
    return out


def provenance_line(provenance: Mapping[str, Any] | None) -> str | None:
    """Answers asked live vs taken from the store, from which runs, and who signed them."""
    if not provenance:
        return None
    runs = provenance.get("from_runs") or {}
    line = f"answers: {provenance['live']} asked live in this run, {provenance['stored']} from the response store"
    if runs:
        shown = ", ".join(f"{run} ({n})" for run, n in list(runs.items())[:3]) + (", ..." if len(runs) > 3 else "")
        line += f" (asked by runs {shown})"
    if provenance.get("stored_unsigned"):
        line += f", {provenance['stored_unsigned']} of them UNSIGNED"
    signers = provenance.get("signers") or {}
    if signers:
        line += "; signed: " + ", ".join(f"{n} with the {who}" for who, n in signers.items())
    who = provenance.get("signer")
    if who == USER:
        line += (f" (this run signs with the {USER}{' ' + provenance['key_id'] if provenance.get('key_id') else ''}: "
                 "answers and the ledger are checked on this account only; set MEDRCUBE_SIGNING_KEY to sign with "
                 "the site key)")
    elif who == SITE:
        line += f" (this run signs with the {SITE}{' ' + provenance['key_id'] if provenance.get('key_id') else ''})"
    elif not provenance.get("signed"):
        line += "; UNSIGNED: set MEDRCUBE_SIGNING_KEY to sign answers and the run directory"
    return line


def unsigned_line(provenance: Mapping[str, Any] | None) -> str | None:
    """Stored answers bound by a plain digest only: not graded, asked again, and the way forward."""
    n = int((provenance or {}).get("unsigned_asked_again") or 0)
    if not n:
        return None
    return (f"{n} stored answer(s) bound by a plain digest only (a store written before medrcube authenticated "
            "stored answers by default, or edited by hand) were not graded and were asked again; the new answers "
            "are signed in their place. To keep the old store as it was, move it away before the next run")


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


def served_line(mismatches: Mapping[str, int] | None, requested: str | None, strict: bool = False) -> str | None:
    """One line for the verdict block when answers name another model than the one asked for."""
    if not mismatches:
        return None
    named = ", ".join(f"{n} answer(s) name {name!r}" for name, n in sorted(mismatches.items(), key=lambda kv: -kv[1]))
    tail = ("; the deployment profile treats this as an error: no check is graded" if strict else
            "; the verdict is about whatever answered (`strict_model: true` in models.yaml, or the deployment "
            "profile, makes this an error)")
    return f"ANOTHER MODEL ANSWERED: {named}, not the requested {requested!r} (served_models in run.json){tail}"
