"""Scenario 2: the whole qualification run on the full cube with the `random` baseline,
`pytest tests_benchmark --model=random --cube=<full cube>` (collection, inference, every
check, the terminal summary, run directory and Allure results): cold (a fresh response
store) and warm (the store the cold runs filled). Warm runs must ask the model nothing:
run.json's requests_sent is checked to be 0 and every asked item a cache hit."""

from __future__ import annotations

from benchmarks.context import Context
from benchmarks.gate_run import run_gate
from benchmarks.harness import BenchError, Metric, Target

NAME = "qualify"
TITLE = "2. Qualification run (pytest tests_benchmark, random baseline, full cube)"


def run(ctx: Context) -> list[Metric]:
    n = ctx.repeats("long")
    out = ctx.dir("qualify")
    cold, warm = [], []
    last_store = None
    for i in range(n):
        store = out / f"store-{i}"
        g = run_gate(cube=ctx.cube, store=store, out=out, name=f"cold-{i}")
        if g.requests_sent == 0:
            raise BenchError(f"cold run {i}: no request was sent to the model; was the store not fresh? ({store})")
        cold.append(g)
        last_store = store
    for i in range(n):
        g = run_gate(cube=ctx.cube, store=last_store, out=out, name=f"warm-{i}")
        asked = g.run["counts"]["asked"]
        if g.requests_sent != 0 or g.run["counts"]["cache_hits"] != asked:
            raise BenchError(
                f"warm run {i}: {g.requests_sent} model calls and {g.run['counts']['cache_hits']} cache hits for "
                f"{asked} asks; a warm store must answer everything")
        warm.append(g)
    c0 = cold[0]
    ctx.shared["qualify_full_rss_mib"] = [g.proc.maxrss_mib for g in cold]
    ctx.log(f"qualify: {c0.tests} tests {c0.outcomes}, {c0.requests_sent} requests cold, 0 warm")
    judge = ctx.sizes.judge_targets
    items = c0.run["counts"]["records"]
    return [
        Metric("qualify.cold_s", f"cold: fresh store ({items} items, {c0.tests} checks)", "s",
               [g.proc.wall_s for g in cold], Target("<", 30.0, "< 30 s") if judge else None,
               extra={"requests_sent": [g.requests_sent for g in cold], "outcomes": c0.outcomes}),
        Metric("qualify.cold_cpu_s", "  its CPU time", "s", [g.proc.cpu_s for g in cold]),
        Metric("qualify.warm_s", "warm: every answer from the store", "s", [g.proc.wall_s for g in warm],
               Target("<", 15.0, "< 15 s") if judge else None,
               note="run.json: requests_sent = 0 and cache hits = asks, checked on every warm run"),
        Metric("qualify.warm_model_calls", "  model calls in warm runs", "calls", [float(g.requests_sent) for g in warm],
               Target("<", 0.5, "= 0")),
        Metric("qualify.warm_cpu_s", "  its CPU time", "s", [g.proc.cpu_s for g in warm]),
        Metric("qualify.cold_rss_mib", "peak RSS of the full-cube run (cold)", "MiB",
               [g.proc.maxrss_mib for g in cold], Target("<", 1024.0, "< 1 GiB") if judge else None),
    ]
