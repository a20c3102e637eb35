"""The gate of two source trees against one server, interleaved: the CPU a change saves.

    git archive 008cf64 src | tar -x -C /tmp/base
    python -m benchmarks.gate_before_after /tmp/base/src [--rounds 3] [--delay 0.005] [--concurrency 64]

One scripted server (answer "A" after `--delay`) on a thread of this process; per round the
gate of the old tree (`PYTHONPATH=OLD`) and of this checkout run one after the other
(`pytest --pyargs medrcube.suite --model=openai:bench@URL --junitxml --alluredir`, fresh
stores, the bundled cube), measured by `benchmarks.harness.run_proc` (process CPU, wall,
peak RSS), with the requests and the TCP connections the server saw, start-up (spawn to the
first request's arrival) and last answer to exit; a report.html drawn after the exit is
waited for before the next run starts. The start-up cache
(`MEDRCUBE_CACHE_DIR` under benchmarks/out/) is shared, so the new tree runs warm after its
first round, as a user's second run does; the old tree has none. Writes
benchmarks/results/gate_before_after.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from typing import Any

from benchmarks.harness import OUT, ROOT, python, run_proc
from medrcube.report.after_exit import wait_drawn
from medrcube.testing.server import ScriptedServer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gate_before_after", description=__doc__.split("\n")[0])
    ap.add_argument("old_src")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay", type=float, default=0.005)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--cube", default=str(ROOT / "fixtures" / "mini"))
    args = ap.parse_args(argv)
    out = OUT / "gate_before_after"
    shutil.rmtree(out, ignore_errors=True)
    res: dict[str, list[dict[str, Any]]] = {"base": [], "new": []}
    with ScriptedServer({"default": "A", "latency": args.delay}) as srv:
        for rnd in range(args.rounds):
            for ver, src in (("base", args.old_src), ("new", str(ROOT / "src"))):
                w = out / f"{ver}-{rnd}"
                w.mkdir(parents=True)
                srv.reset_stats()
                cmd = [python(), "-m", "pytest", "--pyargs", "medrcube.suite", f"--model=openai:bench@{srv.base_url}",
                       f"--cube={args.cube}", f"--concurrency={args.concurrency}", f"--response-store={w / 'store'}",
                       f"--junitxml={w / 'j.xml'}", f"--alluredir={w / 'al'}", "-p", "no:cacheprovider", "-q"]
                t_spawn = time.monotonic()
                p = run_proc(cmd, log_dir=w, name="gate", cwd=w, timeout=1200, ok_codes=(0, 10, 11),
                             env={"PYTHONPATH": src, "OPENAI_API_KEY": "bench", "MEDRCUBE_CACHE_DIR": str(OUT / "cache")})
                t_exit = time.monotonic()
                st = srv.stats(log=True)
                # The phases as throughput_harnesses splits them, on the server's clock.
                starts = [srv.clock_origin + r["t_start"] for r in st["requests"] if r.get("t_end") is not None]
                ends = [srv.clock_origin + r["t_end"] for r in st["requests"] if r.get("t_end") is not None]
                res[ver].append({"cpu_s": p.cpu_s, "wall_s": p.wall_s, "requests": st["total"], "rss": p.maxrss_mib,
                                 "connections": st.get("connections"), "load": os.getloadavg(),
                                 "startup_s": min(starts) - t_spawn, "tail_s": t_exit - max(ends)})
                # A report.html drawn after the exit (report/after_exit.py) finishes before the next run starts.
                for page in w.rglob("report.html"):
                    wait_drawn(page.parent)
                print(ver, rnd, res[ver][-1], file=sys.stderr, flush=True)
    (ROOT / "benchmarks" / "results" / "gate_before_after.json").write_text(json.dumps(res, indent=1) + "\n")
    for ver, xs in res.items():
        print(f"{ver}: CPU {statistics.median(x['cpu_s'] for x in xs):.2f} s, "
              f"wall {statistics.median(x['wall_s'] for x in xs):.2f} s, "
              f"start-up {statistics.median(x['startup_s'] for x in xs):.2f} s, "
              f"last answer to exit {statistics.median(x['tail_s'] for x in xs):.2f} s (medians of {len(xs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
