"""The gate against a bare client on a busy machine (issue 46).

    python -m benchmarks.busy_machine [--rounds 5] [--settings 0.1:10,0.02:32] [--no-busy] [--out FILE]

As a CI job meets it: beside a CPU-bound job that keeps one core busy (a child Python
process spinning, started before the rounds and ended after them) and with
`PYTHONDONTWRITEBYTECODE=1` in every child's environment, the checkout's bytecode written
once first (`compileall`, as pip compiles an installed wheel; `--no-compile` leaves the
modules to be compiled at every start, as a checkout without bytecode). One scripted server
(`ScriptedServer`, answering "A" after the setting's delay); per setting and round, the
bare stdlib client (`benchmarks/bare_client.py`: one ~48 KB chat request per item of the
bundled cube, each image file base64'd once, C threads with a keep-alive connection each)
then the gate (`pytest --pyargs medrcube.suite` with JUnit and Allure), measured by
`benchmarks.throughput_harnesses.one_run` (wall, start-up, request phase, last answer to
exit, CPU of the whole process and its reaped children, peak RSS). One untimed gate run
first fills the start-up cache, as on a user's second run. Figures: medians over the
rounds of the gate's wall over the bare client's of the same round, and of the gate's CPU
per request (whole process, start-up and tail included), with the load average at each
run's end; beside it, each client's CPU split at its first and last request as the server
reads them (`throughput_harnesses.HotPath`): CPU to the first request, the hot path's CPU
per request (all threads, first request to last; steady: from the request a quarter of the
way in, past the one-off work after the first answer), CPU from the last request to the exit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT, ROOT, python
from benchmarks.machine import calibration_ms, load_average
from benchmarks.throughput_harnesses import med_or_none, one_run, write_jobs
from medrcube.testing.server import ScriptedServer

RESULT = ROOT / "benchmarks" / "results" / "busy_machine.json"
SPIN = "while True:\n    pass\n"


def _ms(x: float | None) -> str:
    return "" if x is None else f"{x:.2f} ms"


def _s(x: float | None) -> str:
    return "" if x is None else f"{x:.2f} s"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.busy_machine", description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--settings", default="0.1:10,0.02:32", help="DELAY_S:IN_FLIGHT,...")
    ap.add_argument("--cube", default=str(ROOT / "fixtures" / "mini"))
    ap.add_argument("--harnesses", default="bare,gate")
    ap.add_argument("--no-busy", action="store_true", help="no CPU-bound job beside the runs")
    ap.add_argument("--bytecode", action="store_true", help="let the children write bytecode")
    ap.add_argument("--no-compile", action="store_true",
                    help="do not write the checkout's bytecode first (every module compiled at every start)")
    ap.add_argument("--out", default=str(RESULT))
    args = ap.parse_args(argv)
    settings = [(float(d), int(c)) for d, c in (s.split(":") for s in args.settings.split(","))]
    harnesses = args.harnesses.split(",")
    if not args.no_compile:
        # The source tree's bytecode written once, as pip writes an installed wheel's at install:
        # a user's CI runs an installed package whose bytecode exists and cannot be rewritten.
        subprocess.run([python(), "-m", "compileall", "-q", str(ROOT / "src" / "medrcube"), str(ROOT / "benchmarks")],
                       check=True, env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
                       stdout=subprocess.DEVNULL)
    if not args.bytecode:
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # every child's environment (run_proc copies ours)
    scratch = OUT / "busy_machine"
    scratch.mkdir(parents=True, exist_ok=True)
    jobs = scratch / "jobs.json"
    n_items = write_jobs(args.cube, jobs)
    spinner = None if args.no_busy else subprocess.Popen([python(), "-c", SPIN], stdin=subprocess.DEVNULL)
    runs: list[dict[str, Any]] = []
    load0, speed0 = load_average(), calibration_ms()  # the machine's speed now, on the core the spinner leaves
    try:
        with ScriptedServer({"default": "A"}) as srv:
            shutil.rmtree(scratch / "cache", ignore_errors=True)
            delay, conc = settings[-1]
            one_run(srv, "gate", delay=delay, conc=conc, cube=args.cube, n_items=n_items, jobs=jobs,
                    scratch=scratch, name="cold-gate", marginal=False)
            for delay, conc in settings:
                for rnd in range(args.rounds):
                    for h in harnesses:
                        name = f"{int(delay * 1000)}ms-c{conc}-{h}-{rnd}"
                        r = one_run(srv, h, delay=delay, conc=conc, cube=args.cube, n_items=n_items, jobs=jobs,
                                    scratch=scratch, name=name, marginal=False, hot_path=True)
                        r.update(round=rnd, load=load_average())
                        runs.append(r)
                        print(f"{name}: wall {r['wall_s']:.2f} s, start-up {r['startup_s']:.2f} s, requests "
                              f"{r['requests_s']:.2f} s, tail {r['tail_s']:.2f} s, CPU {r['cpu_s']:.2f} s "
                              f"({r['cpu_ms_per_request']:.2f} ms/request; hot path "
                              f"{_ms(r['hot_cpu_ms_per_request'])}, steady {_ms(r['steady_cpu_ms_per_request'])}), "
                              f"load {r['load'][0]}",
                              file=sys.stderr, flush=True)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    rows = []
    for delay, conc in settings:
        here = [r for r in runs if (r["delay_s"], r["concurrency"]) == (delay, conc)]
        bare = {r["round"]: r["wall_s"] for r in here if r["harness"] == "bare"}
        for h in harnesses:
            mine = [r for r in here if r["harness"] == h]

            def med(key: str, rs: list[dict[str, Any]] = mine) -> float:
                return float(statistics.median(r[key] for r in rs))

            ratios = [r["wall_s"] / bare[r["round"]] for r in mine if r["round"] in bare]
            rows.append({"delay_s": delay, "concurrency": conc, "harness": h, "n": len(mine),
                         "x_bare": float(statistics.median(ratios)) if ratios else None, "x_bare_each": ratios,
                         **{k: med(k) for k in ("wall_s", "startup_s", "requests_s", "tail_s", "cpu_s",
                                                "cpu_ms_per_request")},
                         **{k: med_or_none(k, mine) for k in ("cpu_at_first_request_s", "hot_cpu_s",
                                                              "cpu_from_last_request_s", "hot_cpu_ms_per_request",
                                                              "steady_cpu_ms_per_request")},
                         "maxrss_mib": max(r["maxrss_mib"] for r in mine)})
    doc = {"busy": not args.no_busy, "bytecode_written": args.bytecode, "compiled_first": not args.no_compile,
           "load_average_start": load0, "load_average_end": load_average(),
           "calibration_ms_start": speed0, "calibration_ms_end": calibration_ms(),
           "cpu_count": os.cpu_count(), "rows": rows, "runs": runs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print("| delay, in flight | harness | wall | x bare (median; each round) | start-up | requests | tail | "
          "CPU | CPU/request | CPU to the first request | hot-path CPU/request | steady | CPU from the last request |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        xb = "" if r["x_bare"] is None else (f"{r['x_bare']:.2f}x (" + ", ".join(f"{x:.2f}" for x in r["x_bare_each"])
                                            + ")")
        print(f"| {r['delay_s'] * 1000:.0f} ms, {r['concurrency']} | {r['harness']} | {r['wall_s']:.2f} s | {xb} | "
              f"{r['startup_s']:.2f} s | {r['requests_s']:.2f} s | {r['tail_s']:.2f} s | {r['cpu_s']:.2f} s | "
              f"{r['cpu_ms_per_request']:.2f} ms | {_s(r['cpu_at_first_request_s'])} | "
              f"{_ms(r['hot_cpu_ms_per_request'])} | {_ms(r['steady_cpu_ms_per_request'])} | "
              f"{_s(r['cpu_from_last_request_s'])} |")
    print(f"load average at start {load0}, at end {doc['load_average_end']}; calibration {speed0} -> "
          f"{doc['calibration_ms_end']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
