"""What machine the figures came from: cores, memory, CPU model, load, Python, packages."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from typing import Any

from benchmarks.harness import ROOT

PACKAGES = ("medrcube", "pytest", "pytest-xdist", "openai", "httpx", "httpx2", "Pillow", "numpy", "pandas", "matplotlib",
            "allure-pytest", "scipy")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _git() -> dict[str, Any]:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "src"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": head, "src_modified": bool(dirty)}


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def describe() -> dict[str, Any]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": _memory_gib(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_impl": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "packages": versions,
        "git": _git(),
    }


def calibration_ms(rounds: int = 5) -> float:
    """This machine's speed now: the median wall time of a fixed single-threaded workload (dicts,
    sorting, JSON: the interpreter's common work), in ms. The same machine ran up to 1.5x slower in
    some hours than in others (benchmarks/RESULTS.md, section 24's sixteenth pass); a figure quoted
    beside this one can be compared with another window's by the ratio of the two."""
    import json
    import statistics
    import time

    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        table = {f"item-{i}": i * 7 % 1009 for i in range(12_000)}
        ordered = sorted(table.items(), key=lambda kv: (kv[1], kv[0]))
        json.loads(json.dumps(ordered[:4_000]))
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 1)
