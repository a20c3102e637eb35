"""The CPU of each piece of a gate's time after the last answer, in-process, on a finished
run's records (issue 46): the verdicts by kind of check, metrics_summary.json, results.jsonl.

    python -m benchmarks.tail_pieces RUN_DIR [--cube DIR] [--thresholds FILE] [--rounds 7] [--out FILE]

RUN_DIR is a gate's run directory (reports/<run-id>/): its results.jsonl are the records, its
run.json names the cube and the variants (`--cube` where the cube has moved since), and the
checks are built as the gate builds them (the packaged thresholds unless `--thresholds`),
assessed on the cube. Each piece runs `--rounds` times after the heap is frozen, as the gate's
heap is at its end (plugin/speed/frozen_heap.py); reported: the process time of each, median
and minimum. The pieces:

- `evaluate_gate`: every check's evidence and the family's decision (gate/evaluate.py), and the
  same split by kind (`collect` per check, `ByScope` once, `decide` once);
- `summary`: metrics_summary.json from sums fed beforehand (rundir/summary.SummaryTally, as the
  run feeds it while grading), the document only;
- `results`: results.jsonl written from lines made beforehand (rundir/files.ResultRows, fed in
  batches of 64 in a shuffled order, as answers come), with its fsync.

Comparing two trees: run it with each tree's `src` first on PYTHONPATH (an absolute path).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT
from benchmarks.machine import load_average

RESULT = ROOT / "benchmarks" / "results" / "tail_pieces.json"


def timed(fn: Callable[[], Any], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tail_pieces", description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--cube", help="the cube (default: run.json's cube source)")
    ap.add_argument("--thresholds", help="the policy (default: the packaged thresholds.yaml)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=str(RESULT))
    args = ap.parse_args(argv)

    from medrcube.cube import item_strata, load_cube
    from medrcube.gate.checks import build_checks
    from medrcube.gate.evaluate import evaluate_gate
    from medrcube.gate.evidence import ByScope, collect
    from medrcube.gate.family import decide
    from medrcube.gate.feasible import assess
    from medrcube.gate.thresholds import load_policy
    from medrcube.plugin.options import _parse_variants, packaged_thresholds
    from medrcube.rundir.files import ResultRows, atomic_write, read_results
    from medrcube.rundir.summary import SummaryTally

    run_dir = Path(args.run_dir)
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    records = read_results(run_dir / "results.jsonl")
    cube = load_cube(args.cube or run["cube"]["source"])
    variants_spec = ",".join(run.get("variants") or ["standard"])
    cells = sorted({it.cell for it in cube.items})
    offered: dict[tuple[str, str, str], set[str]] = {}
    for it in cube.items:
        offered.setdefault(it.cell, set()).update(it.options)
    policy = load_policy(args.thresholds or packaged_thresholds())
    checks = build_checks(cells, policy, variants=_parse_variants(variants_spec), has_baseline=False,
                          cell_options=offered, strata=item_strata(cube.items))
    checks = list(assess(checks, cube.items_by_content, policy, None))
    tally = SummaryTally()
    tally.add(records)
    rows = ResultRows()
    fed = list(records)
    random.Random(0).shuffle(fed)
    for start in range(0, len(fed), 64):
        rows.add(fed[start:start + 64])
    gc.collect()
    gc.freeze()  # the gate's heap at its end: settled and frozen while the answers came in

    figures: dict[str, list[float]] = {
        "evaluate_gate": timed(lambda: evaluate_gate(checks, records), args.rounds),
        "summary": timed(lambda: tally.document(records, run.get("variants")), args.rounds),
    }
    def write_results(fh: Any) -> None:
        if hasattr(rows, "write"):
            rows.write(fh, records)
        else:  # a tree from before ResultRows.write: its lines, as its write_run_dir wrote them
            for start in range(0, len(records), 2048):
                fh.write("".join(f"{rows.line(r)}\n" for r in records[start:start + 2048]))

    with tempfile.TemporaryDirectory(prefix="medrcube-tail-pieces-") as tmp:
        figures["results"] = timed(lambda: atomic_write(Path(tmp) / "results.jsonl", write_results), args.rounds)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for _ in range(args.rounds):
        spent: dict[str, float] = defaultdict(float)
        t0 = time.process_time()
        scoped = ByScope(records)
        spent["(by scope)"] += time.process_time() - t0
        evidences = []
        for check in checks:
            t0 = time.process_time()
            evidences.append(collect(check, scoped))
            spent[str(check.kind)] += time.process_time() - t0
        t0 = time.process_time()
        decide(evidences)
        spent["(decide)"] += time.process_time() - t0
        for kind, s in spent.items():
            by_kind[kind].append(s)
    rows.close()

    def summary(values: list[float]) -> dict[str, float]:
        return {"median_ms": 1000 * statistics.median(values), "min_ms": 1000 * min(values)}

    counts: dict[str, int] = defaultdict(int)
    for check in checks:
        counts[str(check.kind)] += 1
    doc = {"run_dir": str(run_dir), "records": len(records), "checks": len(checks), "rounds": args.rounds,
           "load_average": load_average(), "pieces": {k: summary(v) for k, v in figures.items()},
           "by_kind": {k: {**summary(v), "checks": counts.get(k, 0)} for k, v in
                       sorted(by_kind.items(), key=lambda kv: -statistics.median(kv[1]))}}
    print(f"{len(records)} records, {len(checks)} checks, {args.rounds} rounds (process time, median / min):")
    for name, s in doc["pieces"].items():
        print(f"  {name:16s} {s['median_ms']:7.1f} / {s['min_ms']:7.1f} ms")
    for name, s in doc["by_kind"].items():
        n = f" ({s['checks']} checks)" if s["checks"] else ""
        print(f"    {name:22s} {s['median_ms']:7.1f} / {s['min_ms']:7.1f} ms{n}")
    Path(args.out).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
