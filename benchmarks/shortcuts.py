"""Blind shortcut models through the real gate, on a cube (default: the bundled mini cube).

    PYTHONPATH=src python -m benchmarks.shortcuts [--cube DIR] [--out DIR] [--strategies a,b]

For each strategy of `medrcube.testing.shortcuts` (constant letters, longest option, the
options-only prior, the sibling-question reader), writes its answers as a replay file and
runs `pytest tests_benchmark --model=replay:FILE` under the default policy and the
`screening` profile, in its own process, then reads gate.json back: the verdict, the
accuracy overall, and every credibility check's verdict and grounding. Prints one table
(Markdown, for benchmarks/RESULTS.md section 17) and writes it as JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from medrcube.cube import load_cube
from medrcube.testing.shortcuts import STRATEGIES, write_replay

REPO = Path(__file__).resolve().parents[1]


def gate(cube: Path, replay: Path, profile: str | None, work: Path) -> dict[str, Any]:
    """One gate run; returns gate.json."""
    reports = work / f"reports-{replay.stem}-{profile or 'default'}"
    cmd = [sys.executable, "-m", "pytest", "tests_benchmark", f"--model=replay:{replay}", f"--cube={cube}",
           f"--response-store={work / 'store'}", f"--medrcube-report={reports}", "-q", "-p", "no:cacheprovider",
           "-p", "no:hypothesispytest"]  # fmt: skip
    if profile:
        cmd.append(f"--profile={profile}")
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    if p.returncode not in (0, 1, 10, 11):  # QUALIFIED, failed tests, NOT QUALIFIED, UNDECIDED
        raise SystemExit(f"gate run failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    (doc,) = [json.loads(f.read_text(encoding="utf-8")) for f in reports.glob("*/gate.json")]
    return doc


def summarise(doc: dict[str, Any]) -> dict[str, Any]:
    checks = doc["checks"]
    cred = {c["id"]: (c["verdict"], c.get("observed")) for c in checks if c["kind"] == "credibility"}
    overall = next((c for c in checks if c["id"] == "overall"), None)
    return {
        "verdict": doc["gate"]["verdict"],
        "overall_accuracy": round(overall["observed"], 3) if overall and overall.get("observed") is not None else None,
        "passed": sum(c["verdict"] == "pass" for c in checks),
        "failed": sum(c["verdict"] == "fail" for c in checks),
        "credibility": cred,
    }


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished gate subprocesses so far: the gate runs
    in its own process, so this process's own CPU time would miss it."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.shortcuts")
    ap.add_argument("--cube", default=str(REPO / "fixtures" / "mini"))
    ap.add_argument("--out", default=None, help="write the JSON results here (default: print only)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    args = ap.parse_args(argv)
    cube = load_cube(args.cube)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for strategy in args.strategies.split(","):
            replay = write_replay(cube.items, strategy, work / f"{strategy.replace(':', '-')}.jsonl")
            for profile in (None, "screening"):
                t0 = _children_cpu()
                s = summarise(gate(Path(args.cube).resolve(), replay, profile, work))
                rows.append({"strategy": strategy, "profile": profile or "default", **s, "cpu_s": round(_children_cpu() - t0, 2)})
                cred = ", ".join(f"{k.split('/', 1)[1]} {v[0]}" + (f" {v[1]:+.3f}" if v[1] is not None else "") for k, v in s["credibility"].items())
                print(f"| {strategy} | {profile or 'default'} | {s['verdict']} | {s['overall_accuracy']} | {s['passed']} | {s['failed']} | {cred} |", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
