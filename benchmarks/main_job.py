"""The figures of README.md's "What the main job shows", from a real run of the gate.

    .venv/bin/python -m benchmarks.main_job           # print the block from two real runs
    .venv/bin/python -m benchmarks.main_job --write   # and rewrite it in README.md

The main job (`./scripts/qualify`) runs the qualification suite on the bundled mini cube
under the shipped default policy three times: the random baseline, a simulated excellent
model and that model at chance on one task. This module runs the same three pytest runs (in subprocesses, each with its own
response store and report directory), reads their gate.json and writes the block
between README's `<!-- main-job-figures -->` markers. tests/test_readme_figures.py
reruns them and compares, so the README cannot drift from the code.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from medrcube.report import after_exit

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARK = "<!-- main-job-figures -->"
RANDOM = "random"
EXCELLENT = "simulate:accuracy=0.95,grounded=true,icc=0.3,seed=1"  # as in scripts/qualify
ONE_TASK_AT_CHANCE = f"{EXCELLENT},RG=chance"


def run_gate(model: str, work: Path) -> tuple[int, dict[str, Any]]:
    """(exit status, gate.json) of `pytest --model=MODEL` at the repository's root."""
    reports, store = work / "reports", work / "store"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--model={model}",
           f"--medrcube-report={reports}", f"--response-store={store}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False)
    docs = sorted(reports.glob("*/gate.json"))
    for doc in docs:  # report.html is drawn by a detached child after the exit status; let it finish
        after_exit.wait_drawn(doc.parent, timeout_s=120)  # before the caller removes the directory
    if not docs:
        raise RuntimeError(f"{' '.join(cmd)} wrote no gate.json (exit {proc.returncode}):\n{proc.stdout[-2000:]}")
    return proc.returncode, json.loads(docs[-1].read_text(encoding="utf-8"))


def line(label: str, status: int, doc: dict[str, Any]) -> str:
    """The run's verdict and its account's counts, as the run printed them (gate.json's
    `account.summary` is the terminal's line), and the failed checks it named."""
    account = doc["account"]
    out = f"- {label}: **{doc['verdict']}** (exit status {status}); {account['summary']}"
    failed = [c["id"] + ("" if c["required"] else " (reported-only)") for c in account["failed"]]
    if failed and len(failed) <= 8:
        out += f"; failed: {', '.join(failed)}"
    elif failed:
        out += f"; {len(failed)} failed checks, named in the run's account"
    return out


def block() -> str:
    with tempfile.TemporaryDirectory(prefix="medrcube-main-job-") as tmp:
        lines = []
        for label, model in (("the random baseline (`--model=random`)", RANDOM),
                             (f"a simulated excellent model (`--model={EXCELLENT}`)", EXCELLENT),
                             (f"the same model at chance on one task (`--model={ONE_TASK_AT_CHANCE}`)",
                              ONE_TASK_AT_CHANCE)):
            work = Path(tmp) / re.sub(r"\W+", "-", model)
            work.mkdir()
            status, doc = run_gate(model, work)
            lines.append(line(label, status, doc))
    return "\n".join(lines)


def readme_block(text: str) -> str:
    """The figures between the two markers of README.md."""
    parts = text.split(MARK)
    if len(parts) != 3:
        raise ValueError(f"README.md must hold exactly two {MARK} markers")
    return parts[1].strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.main_job", description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the block in README.md")
    a = ap.parse_args(argv)
    new = block()
    print(new)
    if a.write:
        text = README.read_text(encoding="utf-8")
        old = readme_block(text)
        README.write_text(text.replace(f"{MARK}\n{old}\n{MARK}", f"{MARK}\n{new}\n{MARK}", 1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
