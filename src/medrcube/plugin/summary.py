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
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from medrcube.records import GradedRecord, Outcome

GATE_SCHEMA_VERSION = 1
PROPERTY = "medrcube_verdict"  # the user property carrying the payload as JSON
HANDOVER = "medrcube_handover"  # the workeroutput key carrying a worker's records
STATUSES = ("pass", "fail", "undecided", "error")
MARKS = {"pass": "pass", "fail": "FAIL", "undecided": "und", "error": "ERR"}
KIND_ORDER = ("overall", "slice", "cell", "credibility", "image_dependence", "position", "regression")


# -- payloads ------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    """JSON-safe and deterministic: tuples become lists, NaN/inf become None."""
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
        "required": getattr(check, "required", True),
        "params": _clean(check.params),
        "labels": _clean(check.labels),
    }


def verdict_payload(check: Any, verdict: Any, questions: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The gate.json entry of a decided check (what a worker sends to the controller)."""
    questions = questions or {}
    worst = []
    for w in verdict.worst:
        row = w.to_dict()
        row["question"] = questions.get(w.item_id)
        worst.append(row)
    payload = _base_payload(check)
    payload.update(
        {
            "verdict": str(verdict.status),
            "bound": verdict.bound,
            "observed": verdict.observed,
            "interval": list(verdict.interval) if verdict.interval is not None else None,
            "n": verdict.n,
            "chance": verdict.chance,
            "error_rate": verdict.error_rate,
            "message": verdict.message,
            "worst": worst,
            "details": verdict.details,
            "decided_by": verdict.decided_by,
            "guarantee": verdict.guarantee,
            "method": verdict.method,
            "p_pass": verdict.p_pass,
            "p_fail": verdict.p_fail,
            "p_fail_adjusted": verdict.p_fail_adjusted,
            "needed_n": verdict.needed_n,
        }
    )
    return _clean(payload)


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
    return _clean(payload)


def report_properties(payload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """user_properties for a test report: the full payload, and the numbers one by one so
    that a JUnit consumer can read them without parsing JSON."""
    interval = payload.get("interval")
    props = [
        (PROPERTY, json.dumps(payload, sort_keys=True)),
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


def payload_of(report: pytest.TestReport) -> dict[str, Any] | None:
    for name, value in report.user_properties:
        if name == PROPERTY:
            return json.loads(value)
    return None


# -- records handed over by the processes that ran inference -------------------------------


def merge_handovers(handovers: Iterable[Mapping[str, Any]]) -> Any:
    """One RunResult for the whole run: the records every inferring process agrees on
    (they all read the same store; the first is taken), and the request counts summed
    over processes. None if no process ran inference."""
    from medrcube.run.runner import RunResult

    handovers = [h for h in handovers if h]
    if not handovers:
        return None
    first = handovers[0]
    records = [GradedRecord.from_dict(d) for d in first["records"]]
    requests = sum(int(h["requests_sent"]) for h in handovers)
    unavailable = sum(r.outcome is Outcome.UNAVAILABLE for r in records)
    asked = len(records) - unavailable
    return RunResult(
        records=records,
        requests_sent=requests,
        # Asks answered from the store without any process of this run asking them.
        cache_hits=max(0, asked - requests),
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


# -- files ---------------------------------------------------------------------------------


def gate_document(entries: Iterable[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, Any]:
    """gate.json: every decided check, in a stable order, with the run's identity."""
    rank = {k: i for i, k in enumerate(KIND_ORDER)}
    checks = sorted(entries, key=lambda e: (rank.get(e["kind"], len(rank)), e.get("order", 0), e["id"]))
    counts = {s: sum(e["verdict"] == s for e in checks) for s in STATUSES}
    doc: dict[str, Any] = {"schema_version": GATE_SCHEMA_VERSION}
    doc.update(meta)
    gate = gate_outcome(checks, meta.get("guarantee", ""), meta.get("not_run", ()))
    doc["gate"] = gate.to_dict()
    doc["passed"] = gate.exit_code == 0  # QUALIFIED only
    doc["counts"] = counts
    doc["checks"] = [{k: v for k, v in e.items() if k != "order"} for e in checks]
    return doc


def gate_outcome(entries: Iterable[Mapping[str, Any]], guarantee: str = "", not_run: Iterable[str] = ()) -> Any:
    """The gate's verdict (medrcube.gate.verdict.GateVerdict) from the payloads; a required
    check that produced no payload (deselected, or the run stopped) counts as undecided."""
    from medrcube.gate.verdict import gate_verdict

    missing = [{"id": cid, "verdict": "undecided", "required": True, "needed_n": None} for cid in not_run]
    return gate_verdict([*entries, *missing], guarantee)


def new_run_dir(report_dir: Path, model_spec: str) -> Path:
    """reports/<run-id>/, unique even for two runs started within the same second."""
    from medrcube.rundir.files import default_run_id

    base = default_run_id(model_spec)
    path = report_dir / base
    i = 2
    while path.exists():
        path, i = report_dir / f"{base}-{i}", i + 1
    path.mkdir(parents=True)
    return path


def write_outputs(
    run_dir: Path, entries: list[dict[str, Any]], result: Any, meta: Mapping[str, Any]
) -> list[Path]:
    """Write results.jsonl, metrics_summary.json, run.json (when there are records) and
    gate.json into `run_dir`; return the paths written."""
    from medrcube.rundir.files import atomic_write, write_run_dir

    written: list[Path] = []
    if result is not None:
        write_run_dir(run_dir, result, meta)
        written += [run_dir / "results.jsonl", run_dir / "metrics_summary.json", run_dir / "run.json"]
    doc = gate_document(entries, meta)
    atomic_write(run_dir / "gate.json", lambda fh: json.dump(doc, fh, indent=2, ensure_ascii=False))
    written.append(run_dir / "gate.json")
    return written


# -- terminal summary ----------------------------------------------------------------------


def _fmt(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _interval(e: Mapping[str, Any]) -> str:
    iv = e.get("interval")
    return f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else ""


def _ordered(values: Iterable[str], canonical: Iterable[str]) -> list[str]:
    """Values in the taxonomy's order, unknown ones (a site's own part) after, by name."""
    rank = {v: i for i, v in enumerate(canonical)}
    return sorted(set(values), key=lambda v: (rank.get(v, len(rank)), v))


def cell_tables(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """Per modality, a part x task table of the cell verdicts."""
    from medrcube.taxonomy import MODALITIES, PARTS, TASK_NAMES, task_abbrev

    cells = {(e["part"], e["modality"], e["task"]): e["verdict"] for e in entries if e["kind"] == "cell"}
    if not cells:
        return []
    lines: list[str] = []
    for modality in _ordered({c[1] for c in cells}, MODALITIES):
        parts = _ordered({c[0] for c in cells if c[1] == modality}, PARTS)
        tasks = _ordered({c[2] for c in cells if c[1] == modality}, TASK_NAMES)
        heads = [task_abbrev(t) for t in tasks]
        width = max(4, *(len(h) for h in heads))
        first = max(len(modality), *(len(p) + 2 for p in parts))
        lines.append((modality.ljust(first) + "  " + "  ".join(h.ljust(width) for h in heads)).rstrip())
        for part in parts:
            marks = [MARKS.get(cells.get((part, modality, t), ""), ".") for t in tasks]
            lines.append((f"  {part}".ljust(first) + "  " + "  ".join(m.ljust(width) for m in marks)).rstrip())
    lines.append("(pass, FAIL, und: undecided, insufficient evidence, ERR: not graded, .: no check)")
    return lines


def number_lines(entries: list[Mapping[str, Any]]) -> list[str]:
    """Overall accuracy, credibility, image dependence, position and regression numbers."""
    by_id = {e["id"]: e for e in entries}
    lines: list[str] = []
    overall = by_id.get("overall")
    if overall:
        lines.append(
            f"overall accuracy {_fmt(overall['observed'])}{_interval(overall)} n={overall['n']}"
            f" (bound {_fmt(overall['bound'], 2)}, {overall['rule']}): {overall['verdict']}"
        )
    for e in entries:
        if e["kind"] != "credibility":
            continue
        d = e.get("details") or {}
        groups = " ".join(f"{g}={d[g]}" for g in "ABCD" if g in d)
        g = d.get("grounding") or {}
        expected = d.get("expected_D_independent")
        lines.append(
            f"credibility {e['id'].removeprefix('credibility/')}: grounding {_fmt(g.get('difference'))}"
            f"{_interval(e)}, rationality {_fmt(d.get('rationality'))}, "
            f"shortcut probability {_fmt(d.get('shortcut_prob'))}, {d.get('pairs', e['n'])} pairs"
            f"{f' ({groups}' if groups else ''}"
            f"{f', D expected if independent {expected:.1f}' if groups and expected is not None else ''}"
            f"{')' if groups else ''}: {e['verdict']}"
        )
    for e in entries:
        d = e.get("details") or {}
        if e["kind"] == "image_dependence":
            lines.append(
                f"image dependence: standard {_fmt(d.get('standard_acc'))}, blind {_fmt(d.get('blind_acc'))}, "
                f"drop {_fmt(e['observed'])}{_interval(e)} on {e['n']} items: {e['verdict']}"
            )
        elif e["kind"] == "position":
            lines.append(
                f"position: circular accuracy {_fmt(e['observed'])}, standard {_fmt(d.get('standard_acc'))}, "
                f"gap {_fmt(d.get('gap'))} on {e['n']} items: {e['verdict']}"
            )
    regression = [e for e in entries if e["kind"] == "regression"]
    if regression:
        worse = sum(e["verdict"] == "fail" for e in regression)
        lines.append(f"regression against the baseline: {worse} of {len(regression)} checks significantly worse")
    return lines


def summary_lines(entries: list[Mapping[str, Any]], meta: Mapping[str, Any], written: list[Path]) -> list[str]:
    lines = [
        f"model {meta.get('model')} on cube {meta.get('cube', {}).get('source')} "
        f"({meta.get('cube', {}).get('items')} items); thresholds {meta.get('thresholds')}"
        + (f", profile {meta['profile']}" if meta.get("profile") else "")
    ]
    lines += cell_tables(entries)
    lines += number_lines(entries)
    counts = {s: sum(e["verdict"] == s for e in entries) for s in STATUSES}
    lines.append(
        f"checks: {counts['pass']} passed, {counts['fail']} failed, {counts['undecided']} undecided "
        f"(insufficient evidence), {counts['error']} errors (not graded)"
    )
    gate = gate_outcome(entries, meta.get("guarantee", ""), meta.get("not_run", ()))
    lines.append(gate.text())
    lines.append(f"exit status {gate.exit_code} (QUALIFIED 0, NOT QUALIFIED 10, UNDECIDED 11)")
    if meta.get("requests_sent") is not None:
        lines.append(f"model requests sent this run: {meta['requests_sent']}")
    if written:
        lines.append(f"written: {written[0].parent}/ (" + ", ".join(p.name for p in written) + ")")
    return lines


# -- the controller's state ----------------------------------------------------------------


@dataclass
class GateReport:
    """What the controller gathers during a run (kept in `config.stash`)."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # check id -> payload
    handovers: list[dict[str, Any]] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def add_report(self, report: pytest.TestReport) -> None:
        payload = payload_of(report)
        if payload is not None:
            payload["nodeid"] = report.nodeid
            self.entries[payload["id"]] = payload

    def add_handover(self, handover: Mapping[str, Any] | None) -> None:
        if handover:
            self.handovers.append(dict(handover))

    def finish(self, session: Any) -> None:
        """Write reports/<run-id>/ (controller only, once every process has reported)."""
        if not self.entries:
            return
        order = {c.id: i for i, c in enumerate(session.checks)}
        for e in self.entries.values():
            e["order"] = order.get(e["id"], len(order))
        result = merge_handovers(self.handovers)
        run_dir = new_run_dir(session.options.report_dir, session.options.model)
        self.meta = run_meta(session, run_dir.name, result)
        self.meta.update(gate_meta(session, self.entries))
        self.written = write_outputs(run_dir, list(self.entries.values()), result, self.meta)
        report = _write_report(run_dir, session.cube)
        if report is not None:
            self.written.append(report)

    def lines(self) -> list[str]:
        if not self.entries:
            return []
        entries = sorted(self.entries.values(), key=lambda e: e.get("order", 0))
        return summary_lines(entries, self.meta, self.written)


def gate_meta(session: Any, entries: Mapping[str, Any]) -> dict[str, Any]:
    """What gate.json and the summary need to state the gate's verdict: its guarantee on
    this policy, and the required checks of the run that produced no verdict."""
    from medrcube.gate.evaluate import guarantee_text

    not_run = [c.id for c in session.checks if c.required and c.id not in entries]
    return {"guarantee": guarantee_text(session.checks), "not_run": not_run}


def run_meta(session: Any, run_id: str, result: Any) -> dict[str, Any]:
    """The run's identity, for gate.json and run.json (a spec, never a key)."""
    opts = session.options
    return {
        "run_id": run_id,
        "model": opts.model,
        "model_fingerprint": session.adapter.fingerprint,
        "cube": {"source": session.cube.source, "fingerprint": session.cube.fingerprint, "items": len(session.cube)},
        "thresholds": session.thresholds_label,
        "profile": opts.profile,
        "variants": opts.variants,
        "baseline": opts.baseline,
        "judge": opts.judge,
        "requests_sent": result.requests_sent if result is not None else None,
        "requests_by_process": result.info.get("requests_by_process") if result is not None else None,
    }


def _write_report(run_dir: Path, cube: Any) -> Path | None:
    from medrcube.report.html import write_report_after_run

    path, warning = write_report_after_run(run_dir, cube=cube)
    if warning:
        warnings.warn(f"medrcube: {warning}", stacklevel=1)
    return path
