"""The OpenAI-path client of the throughput runs: `python -m benchmarks.client ...`.

One process = one run of `run_cube` through `OpenAIAdapter` (the real `openai` client)
against a scripted server, with a response store. It measures itself around `run_cube`
only (plan, image preparation, HTTP, parsing, storing, grading; not interpreter start,
imports or the cube load): wall time by `time.perf_counter`, CPU by
`resource.getrusage(RUSAGE_SELF)`, which sums every thread of this process (image
preparation runs on worker threads) and nothing of the server's. Prints one JSON object.

`--start-at T` (a `time.time()` value) makes two clients start their runs together.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.client")
    ap.add_argument("--cube", required=True)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--store", required=True, help="response store directory")
    ap.add_argument("--slow", type=int, default=0, help="mark this many items for the server to delay")
    ap.add_argument("--slow-spread", type=int, default=0, help="spread the marked items over the first N")
    ap.add_argument("--start-at", type=float, default=0.0)
    ap.add_argument("--image-cache-mb", type=float, default=None,
                    help="bound of the prepared-image cache (default: the adapter's shared cache)")
    ap.add_argument("--out", required=True, help="write the JSON result here")
    args = ap.parse_args(argv)

    import openai  # noqa: F401  (imported before the clock starts, as in any real run)

    from benchmarks.cubes import with_slow_marks
    from benchmarks.harness import self_cpu_s, self_maxrss_mib
    from medrcube.cube import load_cube
    from medrcube.models.openai_adapter import OpenAIAdapter
    from medrcube.run.runner import run_cube
    from medrcube.run.store import ResponseStore

    cube = load_cube(args.cube)
    if args.slow:
        cube, _ = with_slow_marks(cube, args.slow, args.slow_spread or len(cube))
    cache = None
    if args.image_cache_mb is not None:
        from medrcube.models.images import ImageCache

        cache = ImageCache(max_bytes=int(args.image_cache_mb * 1024 * 1024))
    adapter = OpenAIAdapter("bench-model", base_url=args.base_url, concurrency=args.concurrency, max_retries=0,
                            timeout=120.0, image_cache=cache)
    store = ResponseStore(args.store)
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.time()))
    cpu0, t0 = self_cpu_s(), time.perf_counter()
    result = run_cube(cube, adapter, store=store, close_adapters=True)
    wall, cpu = time.perf_counter() - t0, self_cpu_s() - cpu0
    store.close()
    first_error = next((r.error for r in result.records if r.error), None)
    out = {
        "items": len(cube),
        "records": len(result.records),
        "requests_sent": result.requests_sent,
        "cache_hits": result.cache_hits,
        "errors": result.errors,
        "first_error": first_error,
        "unavailable": result.unavailable,
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_ms_per_request": 1000.0 * cpu / max(result.requests_sent, 1),
        "process_cpu_s": self_cpu_s(),
        "maxrss_mib": self_maxrss_mib(),
        "max_in_flight": adapter.stats.max_in_flight,
        "attempts": adapter.stats.attempts,
        "images_prepared": adapter.images.prepared,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
