"""A user's first run on a cube: the gate with its start-up cache empty (issue 46).

    python -m benchmarks.first_run [--cube paper|PATH] [--delay 0.1] [--concurrency 10]
                                   [--variants standard] [--rounds 3] [--tag T] [--out FILE]

Every other speed benchmark measures a user's second run on a cube: its one run with the
start-up cache (`MEDRCUBE_CACHE_DIR`) empty is left out. That left-out run is what a
hospital meets on a cube it did not build here, and anyone on the paper's cube: every
image's content key decoded (cube/content.py) and the leakage audit computed
(cube/audit.py). Here each round empties the cache, then runs the gate with JUnit and
Allure against one scripted server (`throughput_harnesses.one_run`: wall, start-up from
spawn to the first request, tail from the last answer to the exit status, CPU of the
process and its reaped children, peak RSS); figures are the medians over the rounds.
`--cube paper` is the generated 7,626-item cube (`benchmarks.cubes.full_cube`, with
`--variants standard,blind,shuffled:3`, 20 ms and 64 in flight as `benchmarks.paper_scale`).
Comparing two trees: run it with each tree's `src` first on PYTHONPATH (an absolute path).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT, ROOT
from benchmarks.machine import load_average
from benchmarks.throughput_harnesses import one_run, write_jobs
from medrcube.testing.server import ScriptedServer

RESULT = ROOT / "benchmarks" / "results" / "first_run.json"
FIGURES = ("wall_s", "startup_s", "requests_s", "tail_s", "cpu_s", "maxrss_mib")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.first_run", description=__doc__.split("\n")[0])
    ap.add_argument("--cube", default=str(ROOT / "fixtures" / "mini"), help="a cube path, or 'paper'")
    ap.add_argument("--delay", type=float, help="the server's delay (default 0.1 s; 0.02 s for paper)")
    ap.add_argument("--concurrency", type=int, help="requests in flight (default 10; 64 for paper)")
    ap.add_argument("--variants", help="the gate's --variants (default standard; standard,blind,shuffled:3 for paper)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tag", default="", help="a prefix for this invocation's run folders")
    ap.add_argument("--out", default=str(RESULT))
    args = ap.parse_args(argv)

    paper = args.cube == "paper"
    delay = args.delay if args.delay is not None else (0.02 if paper else 0.1)
    conc = args.concurrency or (64 if paper else 10)
    variants = args.variants or ("standard,blind,shuffled:3" if paper else "standard")
    scratch = OUT / "first_run"
    scratch.mkdir(parents=True, exist_ok=True)
    jobs = scratch / "jobs.json"
    if paper:
        from benchmarks.cubes import full_cube
        from benchmarks.paper_scale import write_plan_jobs

        cube = str(full_cube(log=lambda m: print(m, file=sys.stderr)))
        n = write_plan_jobs(cube, variants, jobs)
    else:
        cube = args.cube
        n = write_jobs(cube, jobs)
    extra = [f"--variants={variants}", "lazy"]
    runs: list[dict[str, Any]] = []
    load0 = load_average()
    with ScriptedServer({"default": "A"}) as srv:
        for r in range(args.rounds):
            shutil.rmtree(scratch / "cache", ignore_errors=True)  # a first run: nothing derived from the cube yet
            res = one_run(srv, "gate", delay=delay, conc=conc, cube=cube, n_items=n, jobs=jobs, scratch=scratch,
                          name=f"{args.tag}{r}-gate", strict=False, marginal=False, extra=extra)
            res.update(round=r, load=load_average())
            runs.append(res)
            print(f"round {r}: wall {res['wall_s']:.2f} s, start-up {res['startup_s']:.2f} s, tail {res['tail_s']:.2f} s, "
                  f"CPU {res['cpu_s']:.1f} s, RSS {res['maxrss_mib']:.0f} MiB, load {res['load'][0]}", file=sys.stderr,
                  flush=True)
    medians = {k: float(statistics.median(r[k] for r in runs)) for k in FIGURES}
    doc = {"cube": "paper" if paper else cube, "variants": variants, "delay_s": delay, "concurrency": conc,
           "requests_planned": n, "pythonpath": os.environ.get("PYTHONPATH"), "load_average_start": load0,
           "load_average_end": load_average(), "cpu_count": os.cpu_count(), "medians": medians, "runs": runs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print("medians: " + ", ".join(f"{k} {v:.2f}" for k, v in medians.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
