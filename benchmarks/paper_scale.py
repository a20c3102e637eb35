"""The gate at the paper's scale with the variants a careful user asks for (issue 46).

    python -m benchmarks.paper_scale [--variants standard,blind,shuffled:3] [--delay 0.02]
                                     [--concurrency 64] [--rounds 1] [--busy] [--workers N] [--out FILE]

The generated 7,626-item cube (`benchmarks.cubes.full_cube`: 36 datasets, 3,000 PNGs of
512 px, restricted items without their image), one scripted server, and per round the
bare stdlib client then the gate with JUnit and Allure, both sending exactly the gate's
plan: the bare client's jobs are `run.plan.plan_asks` of the cube and variants (each asked
prompt as the gate renders it, its image file or none), built into bodies as they are sent
(`bare_client ... lazy`: the bodies would not fit in memory). Before the rounds one gate run
with the start-up cache empty (kept as "cold": the leakage audit and the feasibility pass
computed). Figures per run (`throughput_harnesses.one_run`): wall, start-up (spawn to the
first request), the request phase, the tail (last answer to the exit status), CPU of the
whole process and its reaped children, peak RSS. `--busy` adds a CPU-bound job beside;
`--workers N` runs the gate as the README's command does, with pytest-xdist (`-n N`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT, ROOT, python
from benchmarks.machine import calibration_ms, load_average
from benchmarks.throughput_harnesses import one_run
from medrcube.testing.server import ScriptedServer

RESULT = ROOT / "benchmarks" / "results" / "paper_scale.json"


def write_plan_jobs(cube_path: str, variants: str, dest: Path) -> int:
    """The bare client's jobs: every ask of the gate's plan (prompt, image file or none)."""
    from medrcube.cube import load_cube
    from medrcube.run.plan import plan_asks

    cube = load_cube(cube_path)
    root = Path(cube.root or ".")
    jobs = []
    seen: set[str] = set()
    for ask in plan_asks(cube, variants, fingerprint="bench"):
        # asked once per store key, as the gate asks: the generated cube repeats questions on one image
        if not ask.key or not ask.available or ask.key in seen:
            continue
        seen.add(ask.key)
        image = str(root / ask.item.image) if ask.images and ask.item.image is not None else None
        jobs.append({"prompt": ask.prompt, "image": image})
    dest.write_text(json.dumps(jobs), encoding="utf-8")
    return len(jobs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.paper_scale", description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default="standard,blind,shuffled:3")
    ap.add_argument("--delay", type=float, default=0.02)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--busy", action="store_true", help="a CPU-bound job beside the runs")
    ap.add_argument("--workers", type=int, default=0, help="the gate with pytest-xdist, -n WORKERS (default: without)")
    ap.add_argument("--warm", action="store_true", help="keep the start-up cache of an earlier invocation (no cold run)")
    ap.add_argument("--tag", default="", help="a prefix for this invocation's run folders (with --warm: each run of a "
                    "store keeps its ledger of attempts)")
    ap.add_argument("--out", default=str(RESULT))
    args = ap.parse_args(argv)
    from benchmarks.cubes import full_cube

    cube = str(full_cube(log=lambda m: print(m, file=sys.stderr)))
    scratch = OUT / "paper_scale"
    scratch.mkdir(parents=True, exist_ok=True)
    jobs = scratch / "jobs.json"
    n = write_plan_jobs(cube, args.variants, jobs)
    print(f"{n} requests planned", file=sys.stderr, flush=True)
    spinner = subprocess.Popen([python(), "-c", "while True:\n    pass\n"]) if args.busy else None
    extra = [f"--variants={args.variants}", "lazy", *(["-n", str(args.workers)] if args.workers else [])]
    runs: list[dict[str, Any]] = []
    load0, speed0 = load_average(), calibration_ms()  # the machine's speed now (machine.calibration_ms)
    try:
        with ScriptedServer({"default": "A"}) as srv:
            if not args.warm:
                shutil.rmtree(scratch / "cache", ignore_errors=True)
            order = ([] if args.warm else [("cold", "gate")]) + [(args.tag + ("w" if args.warm else "") + str(r), h) for r in range(args.rounds) for h in ("bare", "gate")]
            for rnd, h in order:
                r = one_run(srv, h, delay=args.delay, conc=args.concurrency, cube=cube, n_items=n, jobs=jobs,
                            scratch=scratch, name=f"{rnd}-{h}", strict=False, marginal=False, extra=extra)
                r.update(round=rnd, load=load_average())
                runs.append(r)
                print(f"{rnd}-{h}: {r['requests']} requests, wall {r['wall_s']:.1f} s (limit {r['limit_s']:.1f} s), "
                      f"start-up {r['startup_s']:.2f} s, requests {r['requests_s']:.1f} s, tail {r['tail_s']:.2f} s, "
                      f"CPU {r['cpu_s']:.1f} s ({r['cpu_ms_per_request']:.2f} ms/request), "
                      f"RSS {r['maxrss_mib']:.0f} MiB, load {r['load'][0]}", file=sys.stderr, flush=True)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    bare = {r["round"]: r["wall_s"] for r in runs if r["harness"] == "bare"}
    for r in runs:
        r["x_bare"] = r["wall_s"] / bare[r["round"]] if r["harness"] == "gate" and r["round"] in bare else None
    doc = {"variants": args.variants, "delay_s": args.delay, "concurrency": args.concurrency, "busy": args.busy,
           "workers": args.workers,
           "requests_planned": n, "load_average_start": load0, "load_average_end": load_average(),
           "calibration_ms_start": speed0, "calibration_ms_end": calibration_ms(),
           "cpu_count": os.cpu_count(), "runs": runs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    for r in runs:
        xb = "" if r["x_bare"] is None else f", {r['x_bare']:.2f}x bare"
        print(f"{r['round']} {r['harness']}: wall {r['wall_s']:.1f} s{xb}, start-up {r['startup_s']:.2f} s, "
              f"tail {r['tail_s']:.2f} s, CPU {r['cpu_ms_per_request']:.2f} ms/request, RSS {r['maxrss_mib']:.0f} MiB")
    print(f"calibration {doc['calibration_ms_start']} -> {doc['calibration_ms_end']} ms (benchmarks/machine.calibration_ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
