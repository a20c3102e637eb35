"""What the gate leaves behind: verdict payloads, gate.json, the run directory and the
terminal summary. All of it is produced by the controller only (the xdist controller, or
the single process of a run without xdist).

The controller never asks the model. It learns each verdict from the test reports (the
payload travels in `report.user_properties`, which xdist forwards and `--junitxml` turns
into properties) and the records from the processes that ran inference (xdist's
`workeroutput`, or the local session): both are exactly what the workers decided on.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from medrcube.gate.kinds import entry_of, rank, registered  # the kinds' order is their registration's
from medrcube.gate.numbers import fmt as _fmt
from medrcube.gate.numbers import labelled
from medrcube.plugin.evidence import verdict_block_lines
from medrcube.plugin.handover import carries_records, merged_run, without_records
from medrcube.plugin.summary_kinds import kind_lines
from medrcube.rundir.jsontext import compact_sorted

PROPERTY = "medrcube_verdict"  # the user property carrying the payload as JSON
# Said in the header and the summary of a run given no --model.
NO_MODEL = ("no --model given: the random baseline, which must not qualify; "
            "qualify a model with --model=SPEC")
HANDOVER = "medrcube_handover"  # the workeroutput key carrying a worker's records


# -- payloads ------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    """JSON-safe and deterministic: tuples become lists, NaN/inf become None."""
    # The plain types by their exact type first: a payload is thousands of values, and the checks
    # against the abstract Mapping below were most of cleaning the 110 payloads at the paper's scale.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        return {str(k): _clean(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_clean(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [_clean(v) for v in items]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def _clean_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """`_clean` of a gate.json entry (its keys are strings already)."""
    return {str(k): _clean(v) for k, v in entry.items()}


def _base_payload(check: Any) -> dict[str, Any]:
    return {
        "id": check.id,
        "kind": str(check.kind),
        "metric": check.metric,
        "part": check.part,
        "modality": check.modality,
        "task": check.task,
        "rule": check.rule,
        "confidence": check.confidence,
        "min_n": check.min_n,
        "max_error_rate": check.max_error_rate,
        "source": check.source,
        "params": _clean(check.params),
        "labels": _clean(check.labels),
        "required": bool(getattr(check, "required", True)),
    }


def verdict_payload(check: Any, verdict: Any, questions: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The gate.json entry of a decided check (what a worker sends to the controller):
    the check's identity, then the typed Verdict's own serialisation (`to_dict`), with
    each worst item's question attached as a field."""
    from medrcube.plugin.render import canonical

    questions = questions or {}
    doc = dict(verdict.to_dict())
    worst = []
    for row in doc.pop("worst", None) or []:
        row = dict(row)
        row["question"] = questions.get(row.get("item_id", ""))
        worst.append(row)
    payload = _base_payload(check)
    payload.update({k: v for k, v in doc.items() if k not in ("check_id", "status")})
    payload["verdict"] = canonical(doc.get("status", verdict.status))
    payload["worst"] = worst
    return _clean_entry(payload)


def error_payload(check: Any, message: str) -> dict[str, Any]:
    """The entry of a check that could not be decided because inference failed."""
    payload = _base_payload(check)
    payload.update(
        {
            "verdict": "error",
            "bound": check.bound,
            "observed": None,
            "interval": None,
            "n": 0,
            "chance": None,
            "error_rate": None,
            "message": message,
            "worst": [],
            "details": {},
        }
    )
    return _clean_entry(payload)


def report_properties(payload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """user_properties for a test report: the full payload, and the numbers one by one so
    that a JUnit consumer can read them without parsing JSON."""
    interval = payload.get("interval")
    props = [
        (PROPERTY, compact_sorted(payload)),
        ("medrcube_check", payload["id"]),
        ("medrcube_status", payload["verdict"]),
        ("medrcube_required", str(payload.get("required", True)).lower()),
    ]
    if payload.get("guarantee"):
        props.append(("medrcube_guarantee", payload["guarantee"]))
    for key in ("observed", "bound", "n", "chance", "error_rate"):
        if payload.get(key) is not None:
            props.append((f"medrcube_{key}", _num(payload[key])))
    if interval:
        props.append(("medrcube_interval", f"{_num(interval[0])},{_num(interval[1])}"))
    return props


def _num(x: Any) -> str:
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def raw_payload(report: pytest.TestReport) -> object | None:
    """The payload a case's report carries, as the JSON text it travels in (None: not a gate case)."""
    return next((value for name, value in report.user_properties if name == PROPERTY), None)


# -- records handed over by the processes that ran inference -------------------------------


# -- files ---------------------------------------------------------------------------------


def gate_typed(entries: Iterable[Mapping[str, Any]], meta: Mapping[str, Any],
               decided: tuple[Any, Any] | None = None) -> Any:
    """gate.json as its typed document (rundir.documents.GateDocument): every decided
    check in a stable order, the gate's verdict, the run's account and its identity."""
    from medrcube.plugin.render import counts as count_statuses
    from medrcube.rundir.documents import GateDocument

    checks = sorted(entries, key=lambda e: (rank(e["kind"]), e.get("order", 0), e["id"]))
    gate, account = decided if decided is not None else run_account(checks, meta)
    doc_meta = {k: v for k, v in meta.items() if k != COVERAGE_INPUT}
    return GateDocument.build(checks, doc_meta, gate, count_statuses(e["verdict"] for e in checks), account=account)


def gate_document(entries: Iterable[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, Any]:
    """gate.json's JSON object (`gate_typed`, checked against its schema)."""
    return dict(gate_typed(entries, meta).to_json())


COVERAGE_INPUT = "coverage_input"  # meta key: the cube's axis values, those left outside the scope, coverage.require


def run_account(entries: Iterable[Mapping[str, Any]], meta: Mapping[str, Any]) -> tuple[Any, Any]:
    """The gate's verdict (medrcube.gate.verdict.GateVerdict) and the run's account
    (medrcube.gate.account.Account), computed once from the payloads and the run's meta:
    every output renders these two values."""
    from medrcube.gate.account import account_of
    from medrcube.gate.coverage import coverage_of

    entries = sorted(entries, key=lambda e: (rank(e["kind"]), e.get("order", 0), e["id"]))
    given = meta.get(COVERAGE_INPUT) or {}
    coverage = coverage_of(entries, given.get("axes"), outside=given.get("outside"), require=given.get("require"))
    gate = gate_outcome(entries, meta.get("guarantee", ""), meta.get("not_run", ()), coverage.missing)
    return gate, account_of(entries, gate, coverage, run_counters(meta))


def run_counters(meta: Mapping[str, Any]) -> dict[str, int | None]:
    """The run's counters as gate.json's `tally` keeps them (medrcube/tally.py): rendered, never recomputed."""
    t = meta.get("tally") or {}
    return {"asked": t.get("asks"), "answered": t.get("answered"), "cached": t.get("cached"),
            "failed": t.get("failed"), "stopped_before_asking": t.get("not_asked"),
            "skipped": len(t.get("skipped") or ()), "requests_sent": t.get("requests")} if t else {}


def gate_outcome(entries: Iterable[Mapping[str, Any]], guarantee: str = "", not_run: Iterable[str] = (),
                 uncovered: Iterable[str] = ()) -> Any:
    """The gate's verdict (medrcube.gate.verdict.GateVerdict) from the payloads; a required
    check that produced no payload (deselected, or the run stopped) counts as undecided."""
    from medrcube.gate.verdict import gate_verdict

    missing = [{"id": cid, "verdict": "undecided", "required": True, "needed_n": None} for cid in not_run]
    return gate_verdict([*entries, *missing], guarantee, uncovered)


def run_tally(result: Any, cube: Any, sampling: Mapping[str, Any] | None = None, failed_requests: int = 0) -> Any:
    """The run's medrcube.tally.Tally: the candidate's records (run/runner.RunResult), the
    requests its adapter sent, the cube's items loaded and skipped at load, and what a
    --sequential run (`sampling`, gate.json's) did not ask and why it stopped."""
    from medrcube.tally import skipped_items, tally

    budget = (sampling or {}).get("stop") or ""
    stop = result.aborted or (budget if budget.startswith("budget") else None)
    return tally(result.records, requests=result.requests_sent, loaded=len(cube), skipped=skipped_items(cube.problems),
                 stop=stop, not_needed=int((sampling or {}).get("items_saved") or 0), failed_requests=failed_requests,
                 pairs=getattr(result, "outcome_pairs", None))


# -- terminal summary ----------------------------------------------------------------------


def _ordered(values: Iterable[str], canonical: Iterable[str]) -> list[str]:
    """Values in the taxonomy's order, unknown ones (a site's own part) after, by name."""
    rank = {v: i for i, v in enumerate(canonical)}
    return sorted(set(values), key=lambda v: (rank.get(v, len(rank)), v))


def _per_cell(kind: str) -> bool:
    entry = entry_of(kind)
    return bool(entry and entry.per_cell)


def cell_tables(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """Per modality, a part x task table of the cell verdicts, then the legend of the
    task codes and marks shown."""
    from medrcube.plugin.render import STATUSES, view
    from medrcube.taxonomy import MODALITIES, PARTS, TASK_NAMES, task_abbrev

    cells = {(e["part"], e["modality"], e["task"]): e["verdict"] for e in entries if _per_cell(e["kind"])}
    if not cells:
        return []
    lines: list[str] = []
    shown: dict[str, str] = {}
    for modality in _ordered({c[1] for c in cells}, MODALITIES):
        parts = _ordered({c[0] for c in cells if c[1] == modality}, PARTS)
        tasks = _ordered({c[2] for c in cells if c[1] == modality}, TASK_NAMES)
        heads = [task_abbrev(t) for t in tasks]
        shown.update(zip(heads, tasks, strict=True))
        width = max(5, *(len(h) for h in heads))
        first = max(len(modality), *(len(p) + 2 for p in parts))
        lines.append((modality.ljust(first) + "  " + "  ".join(h.ljust(width) for h in heads)).rstrip())
        for part in parts:
            marks = [view(cells[(part, modality, t)]).mark if (part, modality, t) in cells else "." for t in tasks]
            lines.append((f"  {part}".ljust(first) + "  " + "  ".join(m.ljust(width) for m in marks)).rstrip())
    lines.append("tasks: " + ", ".join(f"{code} {name}" for code, name in shown.items() if code != name))
    lines.append("marks: " + ", ".join(f"{v.mark} {v.word}" for v in STATUSES.values()) + ", . no check")
    return lines


def number_lines(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Overall accuracy, then each kind's own lines of numbers (KindEntry.numbers: credibility,
    image dependence, position, regression, site checks, ...), then the generic line of
    the other `summary_line` kinds."""
    by_id = {e["id"]: e for e in entries}
    lines: list[str] = []
    overall = by_id.get("overall")
    if overall:
        lines.append(
            f"overall {labelled('accuracy', overall['observed'], overall.get('interval'), overall.get('method'))}"
            f" n={overall['n']} (bound {_fmt(overall['bound'], 2)}, {overall['rule']}): {overall['verdict']}"
        )
    for k in registered():
        mine = [e for e in entries if e["kind"] == k.name]
        if mine and k.numbers is not None:
            lines += k.numbers(mine)
    return lines + kind_lines(entries)


def tally_lines(meta: Mapping[str, Any]) -> list[str]:
    """What became of every item of the cube (medrcube/tally.py), as gate.json's `tally` says."""
    from medrcube.tally import Tally

    return Tally.from_dict(meta["tally"]).lines() if meta.get("tally") else []


def usage_lines(meta: Mapping[str, Any]) -> list[str]:
    """Requests and tokens per model of the run, the cost and the full public cube's."""
    usage = meta.get("usage") or {}
    lines = []
    for role in ("candidate", "judge", "baseline"):
        u = usage.get(role)
        if not u:
            continue
        line = (
            f"usage {role}: {u['requests']} requests, {u['prompt_tokens']:,} prompt + "
            f"{u['completion_tokens']:,} completion tokens"
        )
        if u.get("cost") is not None:
            line += f", cost {u['currency']} {u['cost']:.4f}"
            if u.get("projected_full_cube") is not None:
                line += f" (full public cube, {u['full_cube_items']:,} items: ~{u['currency']} {u['projected_full_cube']:.2f})"
        lines.append(line)
    return lines


def error_cause_lines(meta: Mapping[str, Any], top: int = 3) -> list[str]:
    """The most frequent causes of failed requests, once for the whole run."""
    causes: dict[str, int] = {}
    for u in (meta.get("usage") or {}).values():
        for cause, n in (u.get("error_causes") or {}).items():
            causes[cause] = causes.get(cause, 0) + int(n)
    if not causes:
        return []
    total = sum(causes.values())
    ranked = sorted(causes.items(), key=lambda kv: -kv[1])[:top]
    return [f"failed requests: {total}; most frequent causes:"] + [f"  {n} x {cause}" for cause, n in ranked]


def off_lines(meta: Mapping[str, Any]) -> list[str]:
    off = meta.get("kinds_off") or {}
    if not off:
        return []
    return ["not requested: " + "; ".join(f"{kind} ({how})" for kind, how in off.items())]


def sampling_lines(meta: Mapping[str, Any]) -> list[str]:
    """How a --sequential run sampled: seed, items asked of the cube, why it stopped."""
    if not (s := meta.get("sampling")):
        return []
    cost = f"; cost {s['cost']:.4g}" if s.get("cost") is not None else ""
    return [f"sequential: seed {s['seed']}, asked {s['items_asked']} of {s['items_total']} items ({s['units_asked']} "
            f"of {s['units_total']} images, {s['items_saved']} items not asked) in {s['batches']} batches; "
            f"stopped: {s['stop']}{cost}"]


def summary_lines(entries: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], written: list[Path],
                  decided: tuple[Any, Any] | None = None) -> list[str]:
    """The terminal summary: the run, the cube's tables and numbers, then the run's
    account (gate/account.py) as the last block, the verdict on its last line."""
    cube = meta.get("cube", {})
    served = meta.get("served_model")
    lines = [
        f"model {meta.get('model')}" + (f" (served as {served})" if served and " " not in served else f" ({served})" if served else "")
        + (f" ({NO_MODEL})" if meta.get("model_given") is False else "")
        + f" on cube {cube.get('source')} ({cube.get('items')} items"
        + (f", {len(skipped)} more skipped at load: named below" if (skipped := (meta.get("tally") or {}).get("skipped"))
           else "") + "); "
        f"thresholds {meta.get('thresholds')}" + (f", profile {meta['profile']}" if meta.get("profile") else "")
    ]
    engine = meta.get("model_engine")
    if engine:
        args = engine.get("args") or {}
        shown = ", ".join(f"{k}={v}" for k, v in args.items() if k != "model")
        lines.append(f"engine {engine.get('engine')}" + (" (started by the gate)" if engine.get("managed") else "")
                     + (f": {shown}" if shown else ""))
    if meta.get("scope") and meta["scope"] != EVERYTHING:
        lines.append(f"scope: {meta['scope']} (only its items were asked; overall, slices and credibility within it)")
    lines += cell_tables(entries)
    lines += number_lines(entries)
    lines += off_lines(meta)
    lines += tally_lines(meta)
    lines += usage_lines(meta)
    lines += sampling_lines(meta)
    lines += error_cause_lines(meta)
    if meta.get("aborted"):
        lines.append(f"the run stopped early: {meta['aborted']}")
    if written:
        lines.append(f"written: {written[0].parent}/ (" + ", ".join(p.name for p in written) + ")")
    from medrcube.plugin.leakage import leak_lines

    lines += leak_lines(meta)  # required checks whose items leak, made reported-only
    lines += verdict_block_lines(meta)  # where the answers came from; the policy's differences
    gate, account = decided if decided is not None else run_account(entries, meta)
    lines.append("-" * 30 + " account " + "-" * 30)
    lines += account.lines()
    lines.append(f"exit status {account.exit_code} (QUALIFIED 0, NOT QUALIFIED 10, UNDECIDED 11)")
    lines.append(gate.text())  # last: the verdict is the last line a reader sees
    return lines


EVERYTHING = "every part, modality and task of the cube"


# -- the controller's state ----------------------------------------------------------------


@dataclass
class GateReport:
    """What the controller gathers during a run (kept in `config.stash`)."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # check id -> payload
    started: float = field(default_factory=time.time)  # the controller's wall clock: run.json's start
    handovers: list[dict[str, Any]] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)  # gate.json, once written
    tally: Any = None  # medrcube.tally.Tally, once the run is written
    decided: tuple[Any, Any] | None = None  # (GateVerdict, Account): computed once, in `finish`
    preread: Any = None  # plugin/handover.Preread: the workers' records read while they decided (xdist)
    _parsed: dict[str, Any] = field(default_factory=dict, repr=False)  # nodeid -> the payload's JSON last read

    def add_report(self, report: pytest.TestReport) -> None:
        # A case's setup, call and teardown reports carry the same payload (the item's
        # user_properties): it is parsed once per case, not three times.
        raw = raw_payload(report)
        if raw is None or self._parsed.get(report.nodeid) == raw:
            return
        self._parsed[report.nodeid] = raw
        payload = json.loads(str(raw))
        payload["nodeid"] = report.nodeid
        self.entries[payload["id"]] = payload

    def add_handover(self, handover: Mapping[str, Any] | None) -> None:
        if handover:
            # One copy of the records is kept (the processes agree on them: plugin/handover.py).
            held = any(carries_records(h) for h in self.handovers)
            self.handovers.append(without_records(handover) if held else dict(handover))

    def finish(self, session: Any, kinds_off: Mapping[str, str] | None = None) -> None:
        """Write reports/<run-id>/ (controller only, once every process has reported)."""
        from medrcube.plugin.leakage import leak_meta
        from medrcube.service import new_run_dir, warn, write_run

        if not self.entries:
            self.drop_preread()
            return
        order = {c.id: i for i, c in enumerate(session.checks)}
        for e in self.entries.values():
            e["order"] = order.get(e["id"], len(order))
        # `handed`: an xdist worker's lines and the summary's sums (read while the workers decided, or here)
        result, handed = merged_run(self.handovers, self.preread)
        self.preread = None
        if result is not None:  # the run's times are the controller's, not a worker's last pass
            result.started, result.finished = self.started, time.time()
            result.wall_s = result.finished - result.started
        run_dir = new_run_dir(session.options.report_dir, session.adapter.spec)  # as `medrcube run` names it
        from medrcube.plugin.run_meta import gate_meta, run_meta

        self.meta = run_meta(session, run_dir.name, result, self.handovers)
        self.meta["kinds_off"] = dict(kinds_off or {})
        if result is not None:  # the one set of counters every output names (medrcube/tally.py)
            failed = int(((self.meta.get("usage") or {}).get("candidate") or {}).get("errors") or 0)
            self.tally = run_tally(result, session.cube, self.meta.get("sampling"), failed)
            self.meta["tally"] = self.tally.to_dict()
        if result is not None and result.aborted:  # said once in the summary, and kept in gate.json
            self.meta["aborted"] = result.aborted
        self.meta.update(gate_meta(session, self.entries), **leak_meta(session, self.entries))
        from medrcube.plugin.ledger import attempt_meta, conclude

        self.meta["attempt"] = attempt_meta(session)  # this run's attempt on its cube (plugin/ledger.py)
        if self.meta["attempt"] and self.meta.get("guarantee") and "QUALIFIED is wrong" in self.meta["guarantee"]:
            self.meta["guarantee"] += "; " + self.meta["attempt"]["guarantee"]
        self.decided = run_account(self.entries.values(), self.meta)  # once: every output renders it
        self.meta.pop(COVERAGE_INPUT, None)  # stated in the account's coverage, not again in run.json
        doc = gate_typed(self.entries.values(), self.meta, self.decided)
        try:
            self.written, warning = write_run(run_dir, result, self.meta, cube=session.cube, gate=doc,
                                              policy_file=session.thresholds_path, ahead=session.graded_ahead or handed)
        finally:
            if handed is not None:  # closed by write_run once written; here also when it failed (no file left behind)
                handed.close()
        warn(conclude(session, doc.verdict, run_dir.name))
        # gate.json as written (checked against its schema once, by write_run): what the Allure overview states.
        self.gate = json.loads((run_dir / "gate.json").read_text(encoding="utf-8"))
        warn(warning)

    def drop_preread(self) -> None:
        """Let go of the controller's read when no run directory is written (its lines' file and
        its results.jsonl written ahead: rundir/files.GradedAhead.close)."""
        if self.preread is not None:
            self.preread.ahead.close()
            self.preread = None

    def lines(self) -> list[str]:
        if not self.entries:
            return []
        entries = sorted(self.entries.values(), key=lambda e: e.get("order", 0))
        return summary_lines(entries, self.meta, self.written, self.decided)
