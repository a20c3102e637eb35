"""Start-up cost of the registries that discover, two source trees interleaved.

    python -m benchmarks.registry_startup OLD_SRC [--new-src src] [--rounds 9] [--out FILE]

Per round, for OLD_SRC then NEW_SRC (each with PYTHONPATH set to it, the checkout's
root as working directory), three child processes:
- `import medrcube.plugin.hooks` (the pytest11 entry point) timed inside the child with
  `time.perf_counter` and `time.process_time` (what the plugin costs pytest at every start);
- the same import and then the three tables the gate reads at every start (the kinds,
  the `--model` grammar, the variants parsed), CPU time inside the child;
- `python -X importtime -c "import medrcube.plugin.hooks"`: the cumulative microseconds of
  `medrcube.plugin.hooks` as the interpreter reports them;
- `pytest --co -q --model=random -p no:cacheprovider --pyargs medrcube.suite` (the gate's
  start-up to its collection: options, the cube, the suite's test functions made from the
  kind registry), wall time around the child and the child's CPU time (user + system).
On a machine shared with other work the CPU figures move less than the wall ones.
Bytecode is written by one untimed round first. OLD_SRC needs the checkout's fixtures/
beside it (its suite's bundled cube is a link to ../../../fixtures/mini). Figures: the median, min and max per tree
over the rounds; every value is kept in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT, ROOT

IMPORT = ("import time; t, c = time.perf_counter(), time.process_time(); import medrcube.plugin.hooks; "
          "print(time.perf_counter() - t, time.process_time() - c)")


def _env(src: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": src}


# The plugin's import and the three tables the gate reads at every start (the kinds for the
# suite's functions, the spec grammar for --model's help, the variants parsed from the
# options), the same calls in both trees: what the registries' first reads replace.
TABLES = ("import time; c = time.process_time(); import medrcube.plugin.hooks; "
          "from medrcube.gate import kinds; kinds.registered(); "
          "from medrcube.models.registry import spec_help; spec_help(); "
          "from medrcube.run.variants import parse_variants; parse_variants('standard,jpeg:30'); "
          "print(time.process_time() - c)")


def _tables_cpu_s(src: str) -> float:
    out = subprocess.run([sys.executable, "-c", TABLES], env=_env(src), cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip())


def _import(src: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", IMPORT], env=_env(src), cwd=ROOT, capture_output=True, text=True,
                         check=True)
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def _import_s(src: str) -> float:
    return _import(src)[0]


def _import_cpu_s(src: str) -> float:
    return _import(src)[1]


def _importtime_us(src: str) -> int:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import medrcube.plugin.hooks"], env=_env(src), cwd=ROOT,
                         capture_output=True, text=True, check=True)
    line = next(ln for ln in out.stderr.splitlines() if ln.rstrip().endswith("| medrcube.plugin.hooks"))
    return int(line.split("|")[1])


def _collect(src: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "--model=random", "-p", "no:cacheprovider",
                           "--pyargs", "medrcube.suite"],
                          env=_env(src), cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"pytest --co failed under {src}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _collect_s(src: str) -> float:
    return _collect(src)[0]


def _collect_cpu_s(src: str) -> float:
    return _collect(src)[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.registry_startup", description=__doc__.split("\n")[0])
    ap.add_argument("old_src")
    ap.add_argument("--new-src", default=str(ROOT / "src"))
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--out", default=str(OUT / "registry_startup.json"))
    args = ap.parse_args(argv)
    trees = {"old": str(Path(args.old_src).resolve()), "new": str(Path(args.new_src).resolve())}
    measures = {"import_s": _import_s, "import_cpu_s": _import_cpu_s, "importtime_us": _importtime_us,
                "tables_cpu_s": _tables_cpu_s,
                "collect_s": _collect_s, "collect_cpu_s": _collect_cpu_s}
    for src in trees.values():  # bytecode written, untimed
        for fn in measures.values():
            fn(src)
    values: dict[str, dict[str, list[float]]] = {t: {m: [] for m in measures} for t in trees}
    for _ in range(args.rounds):
        for tree, src in trees.items():
            for name, fn in measures.items():
                values[tree][name].append(float(fn(src)))
    summary: dict[str, Any] = {
        tree: {m: {"median": statistics.median(v), "min": min(v), "max": max(v)} for m, v in per.items()}
        for tree, per in values.items()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rounds": args.rounds, "trees": trees, "summary": summary,
                                          "values": values}, indent=2), encoding="utf-8")
    for m in measures:
        old, new = summary["old"][m], summary["new"][m]
        print(f"{m:14s} old {old['median']:.4g} [{old['min']:.4g}, {old['max']:.4g}]  "
              f"new {new['median']:.4g} [{new['min']:.4g}, {new['max']:.4g}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
