"""Scenario 3: throughput through the OpenAI-compatible path.

A client process (benchmarks/client.py: `run_cube` + `OpenAIAdapter` + a fresh response
store) asks N items with images of a scripted server running in its own process:

- fixed latency L at concurrency 16 and 64: wall time against the ideal N x L / c;
- zero latency: requests per second and the client's CPU milliseconds per request
  (image preparation, HTTP, parsing, storing, grading; the server's CPU is excluded,
  and shown apart);
- no barrier between batches: a few requests take `slow_s` while the rest take L. The
  lower bound is max(slow_s, total work / c); a runner that waited for every batch
  would lose about slow_s per batch holding a slow request (shown as "with barriers").

Every run is checked: N requests at the server, each answered once, no error.
"""

from __future__ import annotations

import json
import shutil
import statistics

from benchmarks.context import Context
from benchmarks.cubes import subset
from benchmarks.harness import BenchError, Metric, Target, python, run_proc
from benchmarks.server import BenchServer, each_once, mean_in_flight, span_s

NAME = "throughput"
TITLE = "3. Throughput, OpenAI-compatible path (scripted server in its own process)"


def client_run(ctx: Context, srv: BenchServer, cube: str, *, concurrency: int, name: str, slow: int = 0,
               slow_spread: int = 0, store: str | None = None, start_at: float = 0.0) -> dict:
    """One client process; returns its JSON result plus the process's measurements."""
    out = ctx.dir("throughput", fresh=False)
    store_dir = store or str(out / f"{name}-store")
    if store is None:
        shutil.rmtree(store_dir, ignore_errors=True)
    result_path = out / f"{name}.json"
    cmd = [python(), "-m", "benchmarks.client", "--cube", cube, "--base-url", srv.base_url, "--concurrency",
           str(concurrency), "--store", store_dir, "--out", str(result_path)]
    if slow:
        cmd += ["--slow", str(slow), "--slow-spread", str(slow_spread)]
    if start_at:
        cmd += ["--start-at", repr(start_at)]
    p = run_proc(cmd, log_dir=out, name=name, timeout=900)
    r = json.loads(result_path.read_text(encoding="utf-8"))
    if r["errors"]:
        raise BenchError(f"{name}: {r['errors']} request(s) failed; first: {r['first_error']}")
    r["proc_wall_s"], r["proc_maxrss_mib"] = p.wall_s, p.maxrss_mib
    return r


def measured(ctx: Context, srv: BenchServer, cube: str, script: dict, **kw) -> tuple[dict, dict, float]:
    """(client result, server stats with its log, server CPU seconds) of one run."""
    srv.script(script)
    cpu0 = srv.cpu_s() or 0.0
    r = client_run(ctx, srv, cube, **kw)
    stats = srv.stats(log=True)
    total, distinct, dups = each_once(stats)
    if total != r["requests_sent"] or dups:
        raise BenchError(f"{kw['name']}: the server saw {total} requests ({dups} duplicates) for "
                         f"{r['requests_sent']} sent")
    return r, stats, (srv.cpu_s() or 0.0) - cpu0


def run(ctx: Context) -> list[Metric]:
    sz = ctx.sizes
    cube = str(subset(ctx.cube, sz.throughput_items, images_only=True))
    n_runs = ctx.repeats("long")
    L = sz.latency_s
    judge = sz.judge_targets
    metrics: list[Metric] = []
    with BenchServer() as srv:
        for c, tol in ((16, 0.15), (64, 0.25)):
            walls, spans, cpu_ms, busy = [], [], [], []
            for i in range(n_runs):
                r, st, _ = measured(ctx, srv, cube, {"default": "A", "latency": L}, concurrency=c, name=f"lat-c{c}-{i}")
                walls.append(r["wall_s"])
                spans.append(span_s(st) or float("nan"))
                busy.append(mean_in_flight(st) or float("nan"))
                cpu_ms.append(r["cpu_ms_per_request"])
            n = r["requests_sent"]
            ctx.shared["throughput_requests"] = n
            ideal = n * L / c
            ctx.shared[f"c{c}_walls"] = walls
            ctx.log(f"throughput c={c}: median wall {sorted(walls)[len(walls) // 2]:.2f} s, ideal {ideal:.2f} s")
            metrics += [
                Metric(f"throughput.c{c}_wall_s", f"latency {L * 1000:.0f} ms, concurrency {c}: wall ({n} requests)", "s",
                       walls, note=f"ideal N x L / c = {ideal:.2f} s"),
                Metric(f"throughput.c{c}_ratio", f"  wall / ideal ({ideal:.2f} s)", "x", [w / ideal for w in walls],
                       Target("<", 1 + tol, f"< {1 + tol:.2f} (within {tol:.0%})") if judge else None,
                       extra={"ideal_s": ideal, "server_span_s": spans}),
                Metric(f"throughput.c{c}_cpu_ms", "  client CPU per request", "ms", cpu_ms),
                Metric(f"throughput.c{c}_busy", f"  requests in flight at the server, mean (of {c})", "req", busy,
                       note="Little's law over the server's log: busy slots; below c means the client or the "
                            "machine could not keep every slot filled"),
            ]

        # No barrier between batches.
        k, slow, c = sz.slow_count, sz.slow_s, 64
        spread = sz.throughput_items // 4
        marks = {f"[slow-{j}]": slow for j in range(k)}
        walls = []
        for i in range(n_runs):
            r, st, _ = measured(ctx, srv, cube, {"default": "A", "latency": L, "latency_by_question": marks},
                                concurrency=c, name=f"slow-{i}", slow=k, slow_spread=spread)
            slow_seen = sum(1 for q in st["requests"] if "[slow-" in q.get("question", ""))
            if slow_seen != k:
                raise BenchError(f"slow-{i}: the server saw {slow_seen} slow requests, expected {k}")
            walls.append(r["wall_s"])
        n = r["requests_sent"]
        work, plain_work = (n - k) * L + k * slow, n * L
        bound = max(slow, work / c)
        # What this machine achieves at c=64 without slow requests (measured above),
        # scaled by the extra work: the fair reference for "no barrier", since the
        # ratio to the theoretical bound also carries the machine's own c=64 overhead.
        plain = statistics.median(ctx.shared["c64_walls"])
        reference = max(slow, plain * work / plain_work)
        batches = -(-n // c)
        barrier = batches * L + k * (slow - L)  # every slow request in its own batch of c
        metrics += [
            Metric("throughput.slow_wall_s",
                   f"{k} requests of {slow:g} s among {n} of {L * 1000:.0f} ms, concurrency {c}: wall", "s", walls,
                   note=f"lower bound max({slow:g} s, work / c) = {bound:.2f} s; a runner with a barrier per batch "
                        f"would take about {barrier:.1f} s"),
            Metric("throughput.slow_vs_plain", f"  wall / the c={c} run without slow requests, scaled by work "
                   f"({reference:.2f} s)", "x", [w / reference for w in walls],
                   Target("<", 1.25, "< 1.25 (no barrier)") if judge else None,
                   extra={"reference_s": reference, "plain_median_s": plain}),
            Metric("throughput.slow_ratio", f"  wall / lower bound ({bound:.2f} s)", "x", [w / bound for w in walls],
                   extra={"bound_s": bound, "barrier_s": barrier},
                   note="carries the same machine overhead as the c=64 ratio above"),
        ]
        # Zero latency: what the suite itself costs and how fast it can go.
        rps, cpu_ms, srv_ms, rss = [], [], [], []
        for i in range(n_runs):
            r, st, srv_cpu = measured(ctx, srv, cube, {"default": "A", "latency": 0}, concurrency=16, name=f"zero-{i}")
            rps.append(r["requests_sent"] / r["wall_s"])
            cpu_ms.append(r["cpu_ms_per_request"])
            srv_ms.append(1000.0 * srv_cpu / r["requests_sent"])
            rss.append(r["proc_maxrss_mib"])
        ctx.shared["openai_rss"] = {sz.throughput_items: rss}
        metrics += [
            Metric("throughput.zero_rps", "zero latency, concurrency 16: requests per second", "req/s", rps,
                   note="client and server share this machine's cores"),
            Metric("throughput.zero_cpu_ms", "  client CPU per request (images, HTTP, parse, store, grade)", "ms",
                   cpu_ms, Target("<", 5.0, "< 5 ms") if judge else None,
                   note="getrusage(RUSAGE_SELF) of the client around run_cube; server excluded"),
            Metric("throughput.zero_server_cpu_ms", "  server CPU per request (not the suite's; for scale)", "ms",
                   srv_ms),
        ]

    return metrics
