"""What the Allure overview says about the run as a whole: the gate's verdict and a trend.

Allure knows test cases, not gates: without help its overview shows a pass ring over the
checks (8% green says nothing about QUALIFIED), an empty trend and the few milliseconds
the checks' bodies took. The controller therefore adds, when the run has `--alluredir`:

- one result of its own, "Gate verdict: <VERDICT>" (under the model's parent suite, in
  the suite "0 Gate verdict", so it sorts first), passed for QUALIFIED, failed for NOT
  QUALIFIED, broken for UNDECIDED, with the gate's one-line text as its message and the
  controller's wall clock as its duration;
- the verdict in the environment widget and in the executor's report and build names
  (allure.py `write_run_files`);
- a trend across runs: the results directory is cleaned at the start of a run, so the
  previous run's `history/` and its own counts are read before the clean (`carry_history`)
  and written back with this run's verdict (`write_history`): `allure generate` then draws
  the trend over every run made into that directory.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["VERDICT_STATUS", "carry_history", "verdict_result", "write_history"]

VERDICT_STATUS = {"QUALIFIED": "passed", "NOT QUALIFIED": "failed", "UNDECIDED": "broken"}
VERDICT_SUITE = "0 Gate verdict"
# This run's counts, read by the next run into its trend (Allure's own history-trend.json
# holds the previous runs only: `allure generate` adds the run it renders).
LAST_RUN = "medrcube-last-run.json"
TREND_KEPT = 50


def verdict_result(alluredir: str | Path, gate: Mapping[str, Any], meta: Mapping[str, Any],
                   started: float, finished: float | None = None) -> Path:
    """Write the "Gate verdict" result; returns its path."""
    verdict = str(gate.get("verdict", "UNDECIDED"))
    text = str((gate.get("gate") or {}).get("text") or verdict)
    counts = gate.get("counts") or {}
    stop = finished if finished is not None else time.time()
    model = str(meta.get("model"))
    result = {
        "uuid": str(uuid.uuid4()),
        # Per model, as the checks' cases are (allure.py label_case): two models' verdicts
        # in one report are two cases, not retries of one.
        "historyId": f"medrcube-gate-verdict:{model}",
        "testCaseId": "medrcube-gate-verdict",
        "name": f"Gate verdict: {verdict}",
        "fullName": "medrcube.gate.verdict",
        "status": VERDICT_STATUS.get(verdict, "broken"),
        "statusDetails": {"message": text},
        "stage": "finished",
        "description": (f"The qualification gate's verdict for {meta.get('model')} on {(meta.get('cube') or {}).get('source')}"
                        f" (thresholds {meta.get('thresholds')}): {verdict}. Checks: "
                        + ", ".join(f"{n} {s}" for s, n in counts.items())
                        + "".join(f"\n\n{line}" for line in _account_lines(gate.get("account")))),
        "start": int(started * 1000),
        "stop": int(stop * 1000),
        "labels": [{"name": "parentSuite", "value": model}, {"name": "suite", "value": VERDICT_SUITE},
                   {"name": "model", "value": model}, {"name": "epic", "value": "Gate verdict"},
                   {"name": "severity", "value": "blocker"}, {"name": "framework", "value": "medrcube"}],
        "parameters": [{"name": "verdict", "value": verdict}, {"name": "model", "value": model},
                       {"name": "run", "value": str(meta.get("run_id"))}],
    }
    out = Path(alluredir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{result['uuid']}-result.json"
    path.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return path


def _account_lines(account: Mapping[str, Any] | None) -> list[str]:
    """The run's account as gate.json holds it: its counts, coverage and failed checks."""
    if not account:
        return []
    failed = [f"{c['id']}{'' if c.get('required', True) else ' (reported-only)'}" for c in account.get("failed") or ()]
    return [str(account.get("summary", "")), *map(str, account.get("coverage_lines") or ()),
            *([f"failed: {', '.join(failed)}"] if failed else [])]


def carry_history(alluredir: str | Path, *, cleaned: bool = True) -> list[dict[str, Any]]:
    """The trend of the runs made into `alluredir` so far (newest first), read before the
    directory is cleaned: its history-trend.json, with the last run's own entry on top
    (`cleaned=False`, under --allure-keep: the last run's results stay in this report,
    so it is not a run of its own in the trend)."""
    out = Path(alluredir)
    trend = _read_list(out / "history" / "history-trend.json")
    last = _read(out / LAST_RUN) if cleaned else None
    # A history/ copied from the last generated report holds that run already.
    if isinstance(last, dict) and isinstance(last.get("data"), dict) and not (trend and trend[0].get("data") == last["data"]):
        trend.insert(0, last)
    return trend[:TREND_KEPT]


def write_history(alluredir: str | Path, previous: list[dict[str, Any]], verdict: str, model: str | None) -> None:
    """Write the previous runs' trend back, and this run's entry for the next run."""
    out = Path(alluredir)
    (out / "history").mkdir(parents=True, exist_ok=True)
    ordered = [dict(e, buildOrder=len(previous) - i) for i, e in enumerate(previous)]
    (out / "history" / "history-trend.json").write_text(json.dumps(ordered, indent=1), encoding="utf-8")
    entry = {"buildOrder": len(previous) + 1, "reportName": f"{model}: {verdict}", "reportUrl": "",
             "data": _status_counts(out)}
    (out / LAST_RUN).write_text(json.dumps(entry, indent=1), encoding="utf-8")


def _status_counts(out: Path) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for p in out.glob("*-result.json"):
        status = (_read(p) or {}).get("status")
        counts[status if status in ("passed", "failed", "broken", "skipped") else "unknown"] += 1
    data = {k: counts.get(k, 0) for k in ("failed", "broken", "skipped", "passed", "unknown")}
    data["total"] = sum(data.values())
    return data


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _read_list(path: Path) -> list[dict[str, Any]]:
    value = _read(path)
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []
