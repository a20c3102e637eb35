"""What each of the gate's outputs costs: `python -m benchmarks.gate_outputs [--reps 3] [--cube DIR]`.

The gate runs (`pytest --pyargs medrcube.suite --model=random`, so that no request is
made and only the gate's own work is measured) on the bundled cube three ways,
interleaved: with neither JUnit nor Allure, with `--junitxml`, with `--alluredir`, with
report.html drawn in the process (`MEDRCUBE_REPORT_HTML=now`; else a detached child draws
it after the exit status, outside the process measured); the
difference in process CPU (user + system, `benchmarks.harness.run_proc`) is the cost of
that output. The run directory of the plain run is then drawn again in this process:
report.html with its figures (`write_report_html`), the page without figures
(`build_page(plots_dir=None)` and the template) and each figure alone, CPU by
`time.process_time`. Medians over `--reps`; prints a Markdown table and writes
benchmarks/results/gate_outputs.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT, ROOT, python, run_proc
from benchmarks.machine import load_average
from medrcube.report.after_exit import wait_drawn

RESULT = ROOT / "benchmarks" / "results" / "gate_outputs.json"
MODES = {"plain": [], "junit": ["--junitxml=junit.xml"], "allure": ["--alluredir=allure"], "report_now": []}
# report.html is drawn after the exit status by a detached child (report/after_exit.py), whose
# CPU the gate process's does not include; `report_now` draws it in the process, as before.
ENV = {"report_now": {"MEDRCUBE_REPORT_HTML": "now"}}


def gate_cpu(cube: str, mode: str, work: Path) -> tuple[float, Path]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cmd = [python(), "-m", "pytest", "--pyargs", "medrcube.suite", "--model=random", f"--cube={cube}",
           f"--response-store={work / 'store'}", "-p", "no:cacheprovider", "-q", *MODES[mode]]
    proc = run_proc(cmd, log_dir=work, name="gate", cwd=work, timeout=900, ok_codes=(0, 10, 11),
                    env={"MEDRCUBE_CACHE_DIR": str(OUT / "gate_outputs" / "cache"), **ENV.get(mode, {})})
    [run_dir] = [p for p in (work / "reports").iterdir() if p.is_dir()]
    wait_drawn(run_dir)  # the child's CPU must not fall on the next measurement
    return proc.cpu_s, run_dir


def report_costs(run_dir: Path) -> dict[str, float]:
    from medrcube.report import plots
    from medrcube.report.analysis import profile
    from medrcube.report.html import _axis_order, build_page, render_run_page, write_report_html
    from medrcube.report.readers import read_run

    out: dict[str, float] = {}
    t = time.process_time()
    write_report_html(run_dir)
    out["report.html with figures"] = time.process_time() - t
    run = read_run(run_dir)
    t = time.process_time()
    render_run_page(build_page(run, plots_dir=None))
    out["report.html, page alone (figures in memory, no files)"] = time.process_time() - t
    p = profile(run.of_variant("standard"))
    t = time.process_time()
    plots.save(plots.axis_bars(p.axes, _axis_order(p)), "bars", None, tight=False)
    out["accuracy-by-axis figure (PNG)"] = time.process_time() - t
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gate_outputs", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cube", default=str(ROOT / "fixtures" / "mini"))
    ap.add_argument("--out", default=str(RESULT))
    args = ap.parse_args(argv)
    scratch = OUT / "gate_outputs"
    load0 = load_average()
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    report: dict[str, list[float]] = {}
    for rnd in range(args.reps):
        for mode in MODES:
            c, run_dir = gate_cpu(args.cube, mode, scratch / f"{mode}-{rnd}")
            cpu[mode].append(c)
            if mode == "plain":
                for k, v in report_costs(run_dir).items():
                    report.setdefault(k, []).append(v)
        print(f"round {rnd}: " + ", ".join(f"{m} {cpu[m][-1]:.2f} s" for m in MODES), file=sys.stderr, flush=True)
    med = {m: statistics.median(v) for m, v in cpu.items()}
    rows: list[tuple[str, float]] = [("gate process, no JUnit, no Allure (CPU)", med["plain"]),
                                     ("JUnit XML (--junitxml), extra CPU", med["junit"] - med["plain"]),
                                     ("Allure results (--alluredir), extra CPU", med["allure"] - med["plain"]),
                                     ("report.html drawn before the exit (MEDRCUBE_REPORT_HTML=now), extra CPU",
                                      med["report_now"] - med["plain"])]
    rows += [(k, statistics.median(v)) for k, v in report.items()]
    doc: dict[str, Any] = {"load_average_start": load0, "load_average_end": load_average(), "cpu": cpu,
                           "report": report, "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"| output | CPU s (median of {args.reps}) |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v:.2f} |")
    print(f"load average at start {load0}, at end {doc['load_average_end']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
