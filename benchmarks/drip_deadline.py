"""How precisely the total deadline cuts a body dripped byte by byte, on the wire.

    python -m benchmarks.drip_deadline [--reps 5] [--timeout 2] [--n 6]

The real OpenAIAdapter (the `openai` client, `timeout` as models.yaml sets it, no retry)
sends N requests at once to the scripted server in a process of its own
(benchmarks/server.py), whose `drip` fault sends the headers at once and then the body
one byte a second (about 300 s for a whole answer): each read is quick, so only a total
deadline stops the wait. Per request: the error kind and the client's latency, against
the deadline; per repetition, the client's CPU time. tests/reliability/test_endpoint.py
asserts what the client did (a timeout error, then the retried answer graded), never how
long it took: the duration is this benchmark's figure (RESULTS.md section 14). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from benchmarks.adapter_probe import ask


def _one(base_url: str, timeout: float, n: int) -> dict[str, Any]:
    _, out, cpu, wall = ask(base_url, n, timeout=timeout, max_retries=0, concurrency=n)
    return {"kinds": sorted({str(r.error_kind) for r in out}), "latencies": [r.latency_s for r in out],
            "client_cpu_s": cpu, "wall_s": wall}


def measure(reps: int, timeout: float, n: int) -> list[dict[str, Any]]:
    from benchmarks.server import BenchServer

    rows = []
    with BenchServer() as srv:
        for rep in range(reps):
            srv.script({"default": "A", "faults": [{"fault": "drip", "interval": 1.0}]})
            client = _one(srv.base_url, timeout, n)
            stats = srv.stats(log=False)
            ratios = [lat / timeout for lat in client["latencies"]]
            rows.append({
                "rep": rep, "n": n, "timeout_s": timeout, "error_kinds": client["kinds"],
                "requests_at_server": int(stats["total"]),
                "cut_at_median_ratio": round(statistics.median(ratios), 3),
                "cut_at_max_ratio": round(max(ratios), 3), "cut_at_min_ratio": round(min(ratios), 3),
                "run_wall_s": round(client["wall_s"], 2), "client_cpu_s": round(client["client_cpu_s"], 3),
            })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.drip_deadline")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--n", type=int, default=6)
    args = ap.parse_args(argv)
    from benchmarks.machine import load_average

    start = load_average()
    rows = measure(args.reps, args.timeout, args.n)
    print(json.dumps({"load_average": {"start": start, "end": load_average()}, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
