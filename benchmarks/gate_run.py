"""One `pytest tests_benchmark ...` qualification run, measured, with its outputs read back.

The run is what a user starts (the main job's command, with Allure results), in a
fresh report folder, so that its run.json tells what happened: requests sent to the
model (zero for a warm store), cache hits, and per xdist worker.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness import BenchError, Proc, python, run_proc

_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


@dataclass
class GateRun:
    proc: Proc
    run: dict[str, Any]  # run.json
    outcomes: dict[str, int]  # pytest's closing line: passed, failed, skipped, error
    report_dir: Path

    @property
    def requests_sent(self) -> int:
        return int(self.run["requests_sent"])

    @property
    def tests(self) -> int:
        return sum(self.outcomes.values())


def run_gate(
    *,
    cube: Path | str,
    store: Path,
    out: Path,
    name: str,
    model: str = "random",
    extra: list[str] | None = None,
    timeout: float = 600.0,
) -> GateRun:
    """Run the gate once; `out` receives the reports, Allure results and the logs."""
    report_dir = out / f"{name}-reports"
    cmd = [
        python(), "-m", "pytest", "tests_benchmark", f"--model={model}", f"--cube={cube}",
        f"--response-store={store}", f"--medrcube-report={report_dir}", f"--alluredir={out / (name + '-allure')}",
        "-q", "-p", "no:cacheprovider", *(extra or []),
    ]
    # Exit 1 is the gate failing, as it must for the random baseline; anything else
    # (usage error 4, internal error 3, interrupted 2) is a broken run.
    p = run_proc(cmd, log_dir=out, name=name, timeout=timeout, ok_codes=(0, 1))
    runs = sorted(report_dir.glob("*/run.json"))
    if len(runs) != 1:
        raise BenchError(f"{name}: expected one run directory under {report_dir}, found {len(runs)}\n{p.tail()}")
    run = json.loads(runs[0].read_text(encoding="utf-8"))
    last = next((line for line in reversed(p.text().splitlines()) if _COUNT.search(line)), "")
    outcomes: dict[str, int] = {}
    for k, kind in _COUNT.findall(last):
        outcomes["error" if kind.startswith("error") else kind] = int(k)
    if not outcomes:
        raise BenchError(f"{name}: no pytest summary line in the output\n{p.tail()}")
    if outcomes.get("error"):
        raise BenchError(f"{name}: {outcomes['error']} check(s) ended in error (API errors?)\n{p.tail()}")
    return GateRun(p, run, outcomes, runs[0].parent)
