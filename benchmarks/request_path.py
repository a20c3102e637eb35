"""The request path alone: CPU per request of `run_cube` through each transport, interleaved.

    python -m benchmarks.request_path [--rounds 3] [--delay 0.005] [--concurrency 64] [--cube fixtures/mini]

One scripted server in a child process (its CPU is not ours: `ServerProcess`), the cube
loaded once; per round `run_cube` through the OpenAI adapter with `transport="sdk"` and
with `transport="light"` (order alternating between rounds), each twice with a fresh
response store (a real SQLite file): "cold" with a fresh image cache (every distinct image
prepared: repacked or decoded and re-encoded, base64'd), then "warm" with that cache (none prepared:
its bound is above the cube's data URLs; `images_prepared` in each run says so), so
that cold - warm is the image preparation and warm is the rest of the request path.
Measured per run: process CPU over the `run_cube` call only (`time.process_time`: the
request phase, grading and the store included; start-up, cube loading and outputs not),
divided by the chat requests the server counted, the wall time, and the connections the
server saw opened. Writes benchmarks/results/request_path.json. The figures are CPU, not
wall, because the machine it runs on is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT

TRANSPORTS = ("sdk", "light")


def one_run(cube: Any, url: str, transport: str, concurrency: int, srv: Any, images: Any) -> dict[str, Any]:
    from medrcube.models.openai_adapter import OpenAIAdapter
    from medrcube.run.runner import run_cube
    from medrcube.run.store import ResponseStore

    srv.reset_stats()
    with tempfile.TemporaryDirectory(prefix="medrcube-request-path-") as tmp:
        store = ResponseStore(Path(tmp) / "store.sqlite")
        adapter = OpenAIAdapter("bench", base_url=url, concurrency=concurrency, timeout=60.0, transport=transport,
                                image_cache=images)
        cpu0, wall0 = time.process_time(), time.monotonic()
        result = run_cube(cube, adapter, store=store, concurrency=concurrency, close_adapters=True)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        store.close()
    st = srv.stats(log=False)
    n = int(st["total"])
    errors = result.errors + result.unavailable
    return {"transport": transport, "requests": n, "cpu_s": cpu, "cpu_ms_per_request": 1000 * cpu / max(n, 1),
            "wall_s": wall, "connections": st.get("connections"), "errors": errors, "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.request_path", description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay", type=float, default=0.005)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--cube", default=str(ROOT / "fixtures" / "mini"))
    ap.add_argument("--transports", default=",".join(TRANSPORTS), help="sdk,light or one of them")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "request_path.json"))
    args = ap.parse_args(argv)
    from medrcube.cube.load import load_cube
    from medrcube.models.images import ImageCache
    from medrcube.testing.server import ServerProcess

    transports = tuple(t for t in TRANSPORTS if t in args.transports.split(","))
    cube = load_cube(args.cube)
    runs: list[dict[str, Any]] = []
    with ServerProcess({"default": "A", "latency": args.delay}) as srv:
        for rnd in range(args.rounds):
            order = transports if rnd % 2 == 0 else transports[::-1]
            for transport in order:
                # Bound above the cube's data URLs (16 MB on the bundled cube; the default is
                # 8 MB), so that "warm" prepares none: at the default it prepared them all again.
                images = ImageCache(256 * 2**20)
                for cache in ("cold", "warm"):
                    before = images.prepared
                    run = one_run(cube, srv.base_url, transport, args.concurrency, srv, images)
                    run["images_prepared"] = images.prepared - before
                    runs.append({"round": rnd, "images": cache, **run})
                    print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    def med(t: str, cache: str, field: str) -> float:
        return statistics.median(r[field] for r in runs if r["transport"] == t and r["images"] == cache)

    summary: dict[str, Any] = {f"{t}/{c}": {"cpu_ms_per_request_median": med(t, c, "cpu_ms_per_request"),
                                            "wall_s_median": med(t, c, "wall_s")}
                               for t in transports for c in ("cold", "warm")}
    for c in ("cold", "warm") if len(transports) == 2 else ():
        light = [r["cpu_s"] for r in runs if r["transport"] == "light" and r["images"] == c]
        sdk = [r["cpu_s"] for r in runs if r["transport"] == "sdk" and r["images"] == c]
        summary[f"light_over_sdk_cpu_per_round/{c}"] = [a / b for a, b in zip(light, sdk, strict=True)]
    doc = {"delay_s": args.delay, "concurrency": args.concurrency, "cube": args.cube, "runs": runs, "summary": summary,
           "bytecode_written": not os.environ.get("PYTHONDONTWRITEBYTECODE")}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=1))
    return 0 if all(r["errors"] == 0 for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
