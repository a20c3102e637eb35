"""The CPU of single commands, interleaved (start-up figures of issue 29).

    python -m benchmarks.command_cpu N 'CMD' ['CMD' ...]

Runs every command N times, in turn (so that a changing load falls on all of them
alike), through the shell with its output discarded, and prints per command the median
CPU time (user + system of the command and the children it reaped) and the median wall
time, with the load average. For an import or a collect-only run, e.g.
`PYTHONPATH=OLD/src python -c 'import medrcube.plugin.hooks'` against the checkout's.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time


def measure(command: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(command, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def main(argv: list[str]) -> int:
    n, commands = int(argv[0]), argv[1:]
    runs: dict[str, list[tuple[float, float]]] = {c: [] for c in commands}
    for _ in range(n):
        for c in commands:
            runs[c].append(measure(c))
    print("load average", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    for c, xs in runs.items():
        print(f"CPU {statistics.median(x[0] for x in xs):.3f} s, wall {statistics.median(x[1] for x in xs):.3f} s: {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
