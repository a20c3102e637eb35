"""Scenario 5: peak RSS against the number of items.

Two curves over subsets of the full cube (JSON Lines files beside its images):
- the qualification run (`pytest tests_benchmark --model=random`, one process) at
  2,000 / 4,000 / 7,626 items: what the suite itself holds (items, records, checks);
- the OpenAI-path client (zero latency) at 2,000 / 4,000 / every item with an image:
  the path that reads and encodes images, where holding them all would show.
Peak RSS is measured by `os.wait4` on the process (benchmarks/harness.py). "Flat"
means the growth from the smallest to the largest point stays a small fraction of the
smallest point (target: under 25%), i.e. nothing grows with the images.
"""

from __future__ import annotations

import statistics

from benchmarks.context import Context
from benchmarks.cubes import subset
from benchmarks.gate_run import run_gate
from benchmarks.harness import Metric, Target
from benchmarks.scenarios.throughput import client_run
from benchmarks.server import BenchServer

NAME = "memory"
TITLE = "5. Peak memory (RSS) against the number of items"


def run(ctx: Context) -> list[Metric]:
    out = ctx.dir("memory")
    judge = ctx.sizes.judge_targets
    metrics: list[Metric] = []
    gate_points: dict[int, float] = {}
    for n in ctx.sizes.memory_points:
        cube = subset(ctx.cube, n, images_only=False)
        rss, items = [], n
        for i in range(ctx.repeats("pair")):
            g = run_gate(cube=cube, store=out / f"store-{n}-{i}", out=out, name=f"gate-{n}-{i}")
            rss.append(g.proc.maxrss_mib)
            items = g.run["counts"]["records"]
        gate_points[items] = statistics.median(rss)
        metrics.append(Metric(f"memory.gate_rss_{items}", f"qualification run, {items} items: peak RSS", "MiB", rss,
                              Target("<", 1024.0, "< 1 GiB") if judge and n == max(ctx.sizes.memory_points) else None))
    metrics.append(_flatness("memory.gate_growth", "  growth of the qualification run's RSS, fewest to most items",
                             gate_points, judge))

    # The OpenAI path: images read, encoded, sent.
    api_points: dict[int, float] = {}
    known = ctx.shared.get("openai_rss", {})
    with BenchServer() as srv:
        srv.script({"default": "A", "latency": 0})
        for n in ctx.sizes.memory_points:
            cube = subset(ctx.cube, n, images_only=True)
            if n in known:
                rss = list(known[n])
                items = n
            else:
                r = client_run(ctx, srv, str(cube), concurrency=16, name=f"api-{n}")
                rss, items = [r["proc_maxrss_mib"]], r["items"]
            api_points[items] = statistics.median(rss)
            metrics.append(Metric(f"memory.api_rss_{items}", f"OpenAI-path client, {items} items with images: peak RSS",
                                  "MiB", rss))
    metrics.append(_flatness("memory.api_growth", "  growth of the client's RSS, fewest to most items", api_points,
                             judge))
    ctx.log("memory: gate " + ", ".join(f"{k}: {v:.0f} MiB" for k, v in gate_points.items())
            + "; api " + ", ".join(f"{k}: {v:.0f} MiB" for k, v in api_points.items()))
    return metrics


def _flatness(mid: str, label: str, points: dict[int, float], judge: bool) -> Metric:
    lo, hi = min(points), max(points)
    growth = (points[hi] - points[lo]) / points[lo]
    per_k = (points[hi] - points[lo]) / max(hi - lo, 1) * 1000
    return Metric(mid, label, "%", [100.0 * growth], Target("<", 25.0, "< 25 %") if judge else None,
                  note=f"{per_k:+.1f} MiB per 1,000 items between {lo} and {hi}",
                  extra={"points_mib": {str(k): v for k, v in sorted(points.items())}})
