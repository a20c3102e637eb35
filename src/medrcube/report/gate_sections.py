"""The sections of report.html read from gate.json and run.json: the verdict banner, the
cells' verdicts for the heatmaps, the regression rows, one panel per kind of check
(titled by the kind registry, gate/kinds.py), and the run's usage and cost.
(Split from html.py, which builds and writes the page.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medrcube.gate.account import Account, CheckLine, account_of, short_method
from medrcube.gate.coverage import coverage_of
from medrcube.gate.kinds import entry_of, rank, title_of
from medrcube.gate.verdict import gate_verdict
from medrcube.report.analysis import Cell
from medrcube.report.forest import subgroup_figures


def usage_rows(usage: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Requests, tokens and cost per model role (candidate, judge, baseline) of run.json."""
    rows = []
    for role in ("candidate", "judge", "baseline"):
        u = (usage or {}).get(role)
        if u:
            rows.append({"role": role, **u})
    return rows


def tally_lines(tally: Mapping[str, Any] | None) -> list[str]:
    """What became of every item of the cube (run.json's `tally`, medrcube/tally.py), in the
    terminal summary's words; none for a run written before it existed."""
    from medrcube.tally import Tally

    return Tally.from_dict(tally).lines(shown=50) if tally else []


# -- the gate ---------------------------------------------------------------------------------


def gate_section(gate: Mapping[str, Any] | None) -> dict[str, Any]:
    """The verdict banner: qualified / not qualified with the counts, or "no gate run"."""
    if not gate:
        return {"ran": False}
    checks = gate.get("checks") or []
    counts = dict(gate.get("counts") or {})
    for s in ("pass", "fail", "undecided", "error"):
        counts.setdefault(s, sum(1 for c in checks if c.get("verdict") == s))
    # Older gate.json files (and the gate core before its Verdict rewrite) say "skip".
    counts["undecided"] = counts.get("undecided", 0) + counts.pop("skip", 0)
    passed = gate.get("passed")
    verdict = gate.get("gate") or {}  # the gate core's verdict and its guarantee (gate.json)
    word = verdict.get("verdict") or gate.get("verdict")
    if passed is None or not word:  # an older gate.json: the gate's own rule on its checks, not the report's
        decided = gate_verdict(checks)
        passed = decided.exit_code == 0 if passed is None else passed
        word = word or decided.status.value
    account = run_account_of(gate, checks)
    return {
        "ran": True,
        "passed": bool(passed),
        "word": word,
        "guarantee": verdict.get("guarantee", ""),
        "counts": counts,
        "total": sum(counts.values()),
        "account": account,
        "summary": account.counts_line(),
        "coverage": account.coverage.lines(account.verdict),
        "failing": [_row(c) for c in account.failed],
        "open_required": [_row(c) for c in account.open_required],
        "reported_only": [_row(c) for c in account.reported_only if c.status != "error"],
        "errors": [_row(c) for c in account.errors if not c.required],
        "thresholds": gate.get("thresholds"),
        "profile": gate.get("profile"),
        "evidence": evidence_lines(gate),
    }


def run_account_of(gate: Mapping[str, Any], checks: list[Mapping[str, Any]]) -> Account:
    """The run's account as gate.json carries it (the one the terminal printed); for an
    older gate.json without one, the gate's own rule over its checks."""
    if gate.get("account"):
        return Account.from_dict(gate["account"])
    decided = gate_verdict(checks)
    return account_of(checks, decided, coverage_of(checks))


def _row(c: CheckLine) -> dict[str, Any]:
    return {"id": c.id, "kind": c.kind, "verdict": c.status, "required": c.required, "metric": c.metric,
            "observed": c.observed, "bound": c.bound, "interval": c.interval, "method": short_method(c.method),
            "n": c.n, "needed_n": c.needed_n, "message": c.why, "not_required": c.not_required}


def evidence_lines(gate: Mapping[str, Any]) -> list[str]:
    """Where the answers came from and the policy on record (gate.json version 2)."""
    from medrcube.run.ledger import ledger_line
    from medrcube.run.provenance import provenance_line, served_line, unsigned_line

    provenance = gate.get("provenance")
    strict = gate.get("profile") == "deployment"
    lines = [line for line in (provenance_line(provenance), unsigned_line(provenance),
                               served_line(gate.get("served_model_mismatches"), gate.get("requested_model"), strict),
                               ledger_line(gate.get("attempt"))) if line]
    policy = gate.get("policy") or {}
    if policy.get("digest"):
        lines.append(f"policy digest {policy['digest']}")
    if policy.get("summary"):
        lines.append(str(policy["summary"]))
    return lines


def _kind_says(check: Mapping[str, Any], flag: str) -> bool:
    """Whether the registry entry of the check's kind sets `flag` (gate/kinds.py)."""
    entry = entry_of(str(check.get("kind")))
    return bool(entry is not None and getattr(entry, flag))


def cell_verdicts(gate: Mapping[str, Any] | None) -> dict[Cell, str]:
    out: dict[Cell, str] = {}
    for c in (gate or {}).get("checks") or []:
        if _kind_says(c, "per_cell") and c.get("part") and c.get("modality") and c.get("task"):
            out[(c["part"], c["modality"], c["task"])] = c.get("verdict", "")
    return out


def regression_rows(gate: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    rows = []
    for c in (gate or {}).get("checks") or []:
        if not _kind_says(c, "needs_baseline"):  # the checks against the baseline
            continue
        d = c.get("details") or {}
        counts = d.get("counts") or {}
        rows.append({
            "id": c.get("id"),
            "verdict": c.get("verdict"),
            "candidate": counts.get("first_acc"),
            "baseline": counts.get("second_acc"),
            "drop": c.get("observed"),
            "interval": c.get("interval"),
            "n": c.get("n"),
            "p": (d.get("mcnemar") or {}).get("p_first_worse"),
            "lost": counts.get("c"),
            "gained": counts.get("b"),
        })
    return rows


def kind_panels(gate: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One panel per kind of check in gate.json, in the registry's order and under its
    title (a kind this medrcube does not know keeps its name): each check's verdict, as
    the gate decided it, with its number, interval, bound and n."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for c in (gate or {}).get("checks") or []:
        by_kind.setdefault(str(c.get("kind")), []).append({
            "id": c.get("id"), "verdict": c.get("verdict"), "required": c.get("required", True),
            "observed": c.get("observed"), "bound": c.get("bound"), "interval": c.get("interval"), "n": c.get("n"),
            "detector": bool((c.get("params") or {}).get("detector")),  # a harm detector (gate/subgroups.py)
        })
    panels = []
    for kind in sorted(by_kind, key=lambda k: (rank(k), k)):
        rows = by_kind[kind]
        tally: dict[str, int] = {}
        for r in rows:
            tally[str(r["verdict"])] = tally.get(str(r["verdict"]), 0) + 1
        entry = entry_of(kind)
        figures = subgroup_figures(rows) if entry is not None and entry.per_stratum else []  # a forest plot per attribute
        panels.append({"kind": kind, "title": title_of(kind), "checks": rows, "counts": sorted(tally.items()),
                       "figures": figures})
    return panels
