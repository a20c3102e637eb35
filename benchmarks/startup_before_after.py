"""Start-up to the first request of `medrcube run` and the gate, two source trees interleaved.

    python -m benchmarks.startup_before_after OLD_SRC [--new-src src] [--rounds 3] [--out FILE]

One scripted server (20 ms per answer by default, 32 in flight, bundled cube); per round,
in this order, `run` then the gate from OLD_SRC, then from NEW_SRC, each measured by
`benchmarks.throughput_harnesses.one_run` (spawn to the first chat request's arrival at
the server, request phase, last answer to exit, process CPU), with the same start-up
cache. Before the rounds each tree runs once untimed (its bytecode and its start-up cache
entries written, as on a user's second run). Figures: medians per tree and harness, every
round kept in the JSON with the load average at its end. Wall time on a shared machine
moves by tenths of a second from run to run: read it beside the CPU figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT, ROOT
from benchmarks.machine import load_average
from benchmarks.throughput_harnesses import one_run, write_jobs
from medrcube.testing.server import ScriptedServer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.startup_before_after", description=__doc__.split("\n")[0])
    ap.add_argument("old_src")
    ap.add_argument("--new-src", default=str(ROOT / "src"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay", type=float, default=0.02)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--cube", default=str(ROOT / "fixtures" / "mini"))
    ap.add_argument("--out", default=str(OUT / "startup_before_after.json"))
    args = ap.parse_args(argv)
    trees = {"old": str(Path(args.old_src).resolve()), "new": str(Path(args.new_src).resolve())}
    scratch = OUT / "startup_before_after"
    scratch.mkdir(parents=True, exist_ok=True)
    load0 = load_average()
    runs: list[dict[str, Any]] = []
    saved = os.environ.get("PYTHONPATH")
    try:
        with ScriptedServer({"default": "A"}) as srv:
            jobs = scratch / "jobs.json"
            n_items = write_jobs(args.cube, jobs)

            def once(tree: str, harness: str, name: str) -> dict[str, Any]:
                os.environ["PYTHONPATH"] = trees[tree]  # one_run puts the benchmarks' checkout before it
                return one_run(srv, harness, delay=args.delay, conc=args.concurrency, cube=args.cube,
                               n_items=n_items, jobs=jobs, scratch=scratch, name=name)

            for tree in trees:
                once(tree, "gate", f"{tree}-warm")
            for rnd in range(args.rounds):
                for tree in trees:
                    for harness in ("run", "gate"):
                        r = once(tree, harness, f"{tree}-{harness}-{rnd}")
                        r.update(tree=tree, round=rnd, load_average=load_average())
                        runs.append(r)
                        print(f"{tree} {harness} round {rnd}: start-up {r['startup_s']:.2f} s, tail "
                              f"{r['tail_s']:.2f} s, CPU {r['cpu_s']:.2f} s, load {r['load_average']}",
                              file=sys.stderr, flush=True)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    medians = {f"{tree} {harness}": {key: statistics.median(r[key] for r in runs
                                                            if r["tree"] == tree and r["harness"] == harness)
                                     for key in ("startup_s", "requests_s", "tail_s", "cpu_s")}
               for tree in trees for harness in ("run", "gate")}
    doc = {"trees": trees, "delay_s": args.delay, "concurrency": args.concurrency, "load_average_start": load0,
           "load_average_end": load_average(), "medians": medians, "runs": runs}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    for label, m in medians.items():
        print(f"{label}: start-up {m['startup_s']:.2f} s, requests {m['requests_s']:.2f} s, "
              f"tail {m['tail_s']:.2f} s, CPU {m['cpu_s']:.2f} s (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
