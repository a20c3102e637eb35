"""`python -m benchmarks [--quick] [--only NAMES] [--merge] [--repeat N] [--fail-on-miss]`.

Runs the scenarios (benchmarks/scenarios/), prints the table and writes:
- full run:        benchmarks/results/latest.json and benchmarks/RESULTS.md
- `--only` run:    benchmarks/out/partial.json; with `--merge`, its scenarios replace
                   theirs in results/latest.json and RESULTS.md is rewritten
- `--quick`:       benchmarks/out/quick.json (a smoke check; targets not judged)

Exit status: 1 when a scenario failed (a command broke, or a check of its output did
not hold), else 0; with `--fail-on-miss`, also 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import time
import traceback
from typing import Any

from benchmarks import cubes, machine, results
from benchmarks.context import FULL_SIZES, QUICK_SIZES, Context, scratch_root
from benchmarks.harness import OUT, ROOT, BenchError
from benchmarks.scenarios import SCENARIOS

LATEST = ROOT / "benchmarks" / "results" / "latest.json"
RESULTS_MD = ROOT / "benchmarks" / "RESULTS.md"


def main(argv: list[str] | None = None) -> int:
    names = [s.NAME for s in SCENARIOS]
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small cube and short runs: check that everything works")
    ap.add_argument("--only", default=None, metavar="NAMES", help=f"comma-separated, from: {', '.join(names)}")
    ap.add_argument("--merge", action="store_true", help="with --only: update results/latest.json and RESULTS.md")
    ap.add_argument("--repeat", type=int, default=None, metavar="N", help="runs per figure (default: 3 long, 5 short)")
    ap.add_argument("--fail-on-miss", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    chosen = names if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in names]
    if unknown:
        ap.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    if args.merge and (args.only is None or args.quick):
        ap.error("--merge goes with --only (a full run writes results/latest.json anyway), not with --quick")

    profile = "quick" if args.quick else "full"
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    scratch = scratch_root(profile)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True, exist_ok=True)
    load_start = machine.load_average()
    t0 = time.perf_counter()
    ctx = Context(profile=profile, sizes=sizes, cube=cubes.full_cube(log=lambda m: print(m, file=sys.stderr),
                                                                      params=sizes.cube),
                  scratch=scratch, repeat_override=args.repeat)
    cube_s = time.perf_counter() - t0

    done: list[dict[str, Any]] = []
    for scenario in SCENARIOS:
        if scenario.NAME not in chosen:
            continue
        ctx.log(f"{scenario.TITLE} ...")
        t = time.perf_counter()
        entry: dict[str, Any] = {"name": scenario.NAME, "title": scenario.TITLE, "metrics": [], "error": None}
        try:
            entry["metrics"] = [m.to_json() for m in scenario.run(ctx)]
        except BenchError as exc:
            entry["error"] = str(exc)
            ctx.log(f"{scenario.NAME} FAILED: {exc}")
        except Exception as exc:  # noqa: BLE001 - one broken scenario must not hide the others' figures
            entry["error"] = f"{type(exc).__name__}: {exc}"
            ctx.log(f"{scenario.NAME} FAILED:\n{traceback.format_exc()}")
        entry["elapsed_s"] = round(time.perf_counter() - t, 1)
        done.append(entry)

    doc = _document(done, profile, load_start, time.perf_counter() - t0, cube_s)
    if args.only is not None and args.merge:
        doc = _merge(doc)
    print(results.table(doc))
    summary = doc["summary"]
    print(f"\n{summary['ok']} target(s) met, {summary['miss']} missed, {len(summary['failed'])} scenario(s) failed; "
          f"{doc['elapsed_s']:.0f} s in all")
    if profile == "quick":
        results.write_json(doc, OUT / "quick.json")
    elif args.only is not None and not args.merge:
        results.write_json(doc, OUT / "partial.json")
        print(f"written: {OUT / 'partial.json'} (use --merge to update results/latest.json)")
    else:
        results.write_json(doc, LATEST)
        RESULTS_MD.write_text(results.markdown(doc), encoding="utf-8")
        print(f"written: {LATEST.relative_to(ROOT)}, {RESULTS_MD.relative_to(ROOT)}")
    if summary["failed"]:
        return 1
    return 1 if args.fail_on_miss and summary["miss"] else 0


def _summary(scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    metrics = [m for s in scenarios for m in s["metrics"]]
    return {
        "ok": sum(1 for m in metrics if m["status"] == "ok"),
        "miss": sum(1 for m in metrics if m["status"] == "MISS"),
        "missed": [m["id"] for m in metrics if m["status"] == "MISS"],
        "failed": [s["name"] for s in scenarios if s["error"]],
    }


def _document(scenarios: list[dict[str, Any]], profile: str, load_start: Any, elapsed: float,
              cube_s: float) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "profile": profile,
        "elapsed_s": round(elapsed, 1),
        "cube_setup_s": round(cube_s, 1),
        "load_average": {"start": load_start, "end": machine.load_average()},
        "machine": machine.describe(),
        "summary": _summary(scenarios),
        "scenarios": scenarios,
    }


def _merge(partial: dict[str, Any]) -> dict[str, Any]:
    """The recorded results with `partial`'s scenarios replacing theirs (same order)."""
    if not LATEST.is_file():
        raise SystemExit(f"--merge: no {LATEST} yet; run the full benchmark first")
    base = json.loads(LATEST.read_text(encoding="utf-8"))
    fresh = {s["name"]: s for s in partial["scenarios"]}
    base["scenarios"] = [fresh.pop(s["name"], s) for s in base["scenarios"]] + list(fresh.values())
    base["summary"] = _summary(base["scenarios"])
    base["merged"] = base.get("merged", []) + [{"date": partial["date"], "scenarios": [s["name"] for s in partial["scenarios"]],
                                                "load_average": partial["load_average"]}]
    return base


if __name__ == "__main__":
    sys.exit(main())
