"""Precision of the requests-per-minute limiter, on the wire.

    python -m benchmarks.rate_limiter [--n 200] [--reps 3]

The real OpenAIAdapter (the `openai` client, `rpm` and `rpm_burst` as models.yaml sets
them) sends N requests at concurrency 32 to the scripted server in a process of its own
(benchmarks/server.py), which answers at once. From the server's log of arrivals:

- the achieved rate: (N - burst) requests over the span from the burst's last arrival
  to the last request's, per minute, against the configured rpm (the first `burst`
  requests may go at once, so they are not part of the spaced stream);
- the gaps between consecutive arrivals after the burst, against the nominal 60 / rpm:
  the median and the smallest (a send delayed by load lets the next arrive closer to it,
  though never before its own due time on the client's clock), and the share of gaps
  under half the nominal one;
- what a provider's limiter counts: the most arrivals in any window of 20 nominal
  intervals, against the 20 + burst the bucket allows in one;
- requests the server saw beyond N (must be 0).

And from the client's own schedule (TokenBucket.first_due / last_due, the times the
bucket granted): its span against (N - burst) x 60 / rpm, which load cannot shorten (the
figure the test suite asserts). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from benchmarks.adapter_probe import ask

CONFIGS = ((600.0, 1.0), (1200.0, 1.0), (3000.0, 5.0))


def _one(base_url: str, rpm: float, burst: float, n: int) -> dict[str, Any]:
    adapter, out, cpu, _ = ask(base_url, n, rpm=rpm, rpm_burst=burst, concurrency=32, max_retries=0)
    bucket = adapter.rate_limiter
    assert bucket is not None and bucket.first_due is not None and bucket.last_due is not None
    return {"ok": sum(r.ok for r in out), "client_span_s": bucket.last_due - bucket.first_due,
            "granted": bucket.granted, "client_cpu_s": cpu}


def _most_in_window(times: list[float], width: float) -> int:
    """The most of `times` (sorted) inside any half-open window [t, t + width)."""
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while times[lo] <= t - width:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def measure(n: int, reps: int) -> list[dict[str, Any]]:
    from benchmarks.server import BenchServer

    rows = []
    with BenchServer() as srv:
        for rpm, burst in CONFIGS:
            for rep in range(reps):
                srv.script({"default": "A"})
                client = _one(srv.base_url, rpm, burst, n)
                stats = srv.stats(log=True)
                arrivals = sorted(r["t_start"] for r in stats["requests"])
                b = int(burst)
                stream = arrivals[b - 1:]  # from the burst's last arrival on
                gaps = [y - x for x, y in zip(stream, stream[1:], strict=False)]
                nominal = 60.0 / rpm
                rows.append({
                    "rpm": rpm, "burst": burst, "rep": rep, "n": n, "answered": client["ok"],
                    "beyond_n": int(stats["total"]) - n,
                    "achieved_rpm": 60.0 * (len(stream) - 1) / (stream[-1] - stream[0]),
                    "gap_median_ratio": statistics.median(gaps) / nominal,
                    "gap_min_ratio": min(gaps) / nominal,
                    "gaps_under_half": sum(g < nominal / 2 for g in gaps) / len(gaps),
                    "max_in_window": _most_in_window(arrivals, 20 * nominal),
                    "allowed_in_window": 20 + burst,
                    "client_span_ratio": client["client_span_s"] / ((n - burst) * nominal),
                    "client_granted": client["granted"],
                    "client_cpu_s": round(client["client_cpu_s"], 3),
                })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.rate_limiter")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    from benchmarks.machine import load_average

    start = load_average()
    rows = measure(args.n, args.reps)
    print(json.dumps({"load_average": {"start": start, "end": load_average()}, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
