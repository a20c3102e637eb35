"""Scenario 4: two processes at once, through the OpenAI-compatible path.

- `pytest tests_benchmark -n 2 --model=openai:...@<server> --concurrency=16`: two xdist
  workers, each with 16 requests in flight, sharing one response store. Measured: the
  whole pytest run, and the inference span at the server (first request in to last
  answer out) against the ideal N x L / (2 x 16).
- two client processes started together on one store (a fresh one), each asking the
  whole cube at concurrency 16: the store's claims must make every request reach the
  server once (counted at the server), and the pair finish in about N x L / 32.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from benchmarks.context import Context
from benchmarks.cubes import subset
from benchmarks.gate_run import run_gate
from benchmarks.harness import BenchError, Metric, Target
from benchmarks.scenarios.throughput import client_run
from benchmarks.server import BenchServer, each_once, span_s

NAME = "parallel"
TITLE = "4. Two processes: pytest -n 2, and two runs on one store"

CONCURRENCY = 16


def run(ctx: Context) -> list[Metric]:
    sz = ctx.sizes
    cube = subset(ctx.cube, sz.throughput_items, images_only=True)
    L, c, judge = sz.latency_s, CONCURRENCY, sz.judge_targets
    out = ctx.dir("parallel")
    metrics: list[Metric] = []
    with BenchServer() as srv:
        # pytest -n 2 through the OpenAI path.
        walls, spans, n_req = [], [], 0
        for i in range(ctx.repeats("pair")):
            srv.script({"default": "A", "latency": L})
            store = out / f"xdist-store-{i}"
            g = run_gate(cube=cube, store=store, out=out, name=f"xdist-{i}", model=f"openai:bench-model@{srv.base_url}",
                         extra=["-n", "2", f"--concurrency={c}"])
            st = srv.stats(log=True)
            total, distinct, dups = each_once(st)
            by_proc = g.run.get("requests_by_process", {})
            if dups or total != distinct or total != g.requests_sent:
                raise BenchError(f"xdist-{i}: server saw {total} requests, {distinct} distinct, {dups} duplicates; "
                                 f"run.json says {g.requests_sent} sent ({by_proc})")
            if len(by_proc) != 2 or min(by_proc.values()) == 0:
                raise BenchError(f"xdist-{i}: the two workers did not share the work: {by_proc}")
            walls.append(g.proc.wall_s)
            spans.append(span_s(st) or float("nan"))
            n_req = total
        ideal = n_req * L / (2 * c)
        metrics += [
            Metric("parallel.xdist_wall_s", f"pytest -n 2, concurrency {c} per worker: whole run ({n_req} requests)",
                   "s", walls, note="collection, inference, checks and reports; each request once at the server"),
            Metric("parallel.xdist_span_ratio", f"  inference span at the server / ideal ({ideal:.2f} s)", "x",
                   [s / ideal for s in spans], Target("<", 1.15, "< 1.15") if judge else None,
                   extra={"ideal_s": ideal, "span_s": spans}),
        ]

        # Two processes on one (fresh) store.
        walls, solo_ref = [], None
        for i in range(ctx.repeats("long")):
            srv.script({"default": "A", "latency": L})
            store = out / f"pair-store-{i}"
            shutil.rmtree(store, ignore_errors=True)
            start_at = time.time() + 6.0  # both past their imports and cube load
            results: dict[int, dict] = {}
            errors: list[BaseException] = []

            # The round's values are passed in, not read from the loop's scope, so what a thread
            # runs with cannot change under it.
            def one(k: int, name: str, store: Path, start_at: float,
                    results: dict[int, dict], errors: list[BaseException]) -> None:
                try:
                    results[k] = client_run(ctx, srv, str(cube), concurrency=c, name=name, store=str(store),
                                            start_at=start_at)
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=one, args=(k, f"pair-{i}-{k}", store, start_at, results, errors))
                       for k in (0, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
            st = srv.stats(log=True)
            total, distinct, dups = each_once(st)
            sent = results[0]["requests_sent"] + results[1]["requests_sent"]
            solo = ctx.shared.get("throughput_requests", total)  # what one process alone sends
            if dups or total != distinct or total != sent or total != solo:
                raise BenchError(f"pair-{i}: server saw {total} requests ({distinct} distinct, {dups} duplicates); "
                                 f"the clients sent {sent}; one process alone sends {solo}")
            if min(results[0]["requests_sent"], results[1]["requests_sent"]) == 0:
                raise BenchError(f"pair-{i}: one process did all the work ({sent} requests)")
            walls.append(max(results[0]["wall_s"], results[1]["wall_s"]))
            solo_ref = total
        ideal = solo_ref * L / (2 * c)
        metrics += [
            Metric("parallel.pair_wall_s", f"two processes on one store, concurrency {c} each: wall ({solo_ref} items)",
                   "s", walls, note="each request reached the server exactly once (counted there)"),
            Metric("parallel.pair_ratio", f"  wall / ideal N x L / 32 ({ideal:.2f} s)", "x", [w / ideal for w in walls],
                   Target("<", 1.15, "< 1.15") if judge else None, extra={"ideal_s": ideal}),
        ]
    return metrics
