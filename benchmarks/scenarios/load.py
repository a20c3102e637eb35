"""Scenario 1: load and validate the full cube, every image file read, hashed and its
header checked (`medrcube validate`, as a user runs it: interpreter start included), and
the same `load_cube` call timed inside a process (imports excluded)."""

from __future__ import annotations

import json

from benchmarks.context import Context
from benchmarks.harness import BenchError, Metric, Target, bin_path, python, run_proc

NAME = "load"
TITLE = "1. Load and validate the full cube"

_IN_PROCESS = """
import json, sys, time
from medrcube.cube import load_cube
t = time.perf_counter()
cube = load_cube(sys.argv[1])
print(json.dumps({"load_s": time.perf_counter() - t, "items": len(cube), "images": len(cube.digests)}))
"""


def run(ctx: Context) -> list[Metric]:
    n = ctx.repeats("short")
    logs = ctx.dir("load")
    walls, cpus, rss, inproc = [], [], [], []
    expected = None
    for i in range(n):
        p = run_proc([bin_path("medrcube"), "validate", str(ctx.cube), "--json"], log_dir=logs, name=f"validate-{i}")
        report = json.loads(p.text())
        if not report["loaded"] or report["errors"]:
            raise BenchError(f"the benchmark cube does not validate cleanly: {report['errors']} error(s); see {p.stdout}")
        expected = report["n_items"]
        walls.append(p.wall_s)
        cpus.append(p.cpu_s)
        rss.append(p.maxrss_mib)
        q = run_proc([python(), "-c", _IN_PROCESS, str(ctx.cube)], log_dir=logs, name=f"load-{i}")
        got = json.loads(q.text())
        if got["items"] != expected:
            raise BenchError(f"load_cube gave {got['items']} items, validate {expected}")
        inproc.append(got["load_s"])
    ctx.shared["cube_items"] = expected
    ctx.log(f"load: {expected} items, images checked: {got['images']}")
    target = Target("<", 5.0, "< 5 s") if ctx.sizes.judge_targets else None
    return [
        Metric("load.validate_cmd_s", f"`medrcube validate` ({expected} items, {got['images']} images)", "s", walls,
               target, note="wall clock of the command, interpreter start and imports included"),
        Metric("load.validate_cmd_cpu_s", "  its CPU time (user + system)", "s", cpus),
        Metric("load.validate_cmd_rss_mib", "  its peak RSS", "MiB", rss),
        Metric("load.load_cube_s", "`load_cube` in process (imports excluded)", "s", inproc),
    ]
