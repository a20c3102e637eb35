"""`medrcube run`: ask a model every item of a cube and write reports/<run-id>/.

The cube is loaded and validated first, then the model spec is resolved: a bad cube or
spec stops the command (exit 1) before any model is called. The response store makes
the command resumable: run it again after an interruption and only what is missing is
asked.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from medrcube.commands.numbers import whole_number
    from medrcube.models.ceilings import CEILINGS
    from medrcube.models.registry import spec_help  # the grammar, written once

    parser.add_argument("--model", required=True, metavar="SPEC", help=spec_help())
    parser.add_argument("--cube", required=True, metavar="CUBE",
                        help="a release-layout directory, a .jsonl file, parquet, a save_to_disk directory or hf:NAME")
    parser.add_argument("--variant", default="standard", metavar="V",
                        help="comma-separated: standard, blind, shuffled:K, abstain, and image perturbations "
                             "such as jpeg:30, lowres:256, noise:0.03, window:0.8, flip (docs/robustness.md; "
                             "default: standard)")
    parser.add_argument("--concurrency", type=whole_number("--concurrency", minimum=1, example="8", maximum=int(CEILINGS["concurrency"][0])), default=None, metavar="N",
                        help="requests in flight at once (default: the model's own setting)")
    parser.add_argument("--response-store", default=".medrcube", metavar="DIR",
                        help="directory of the response store (default: .medrcube)")
    parser.add_argument("--no-store", action="store_true", help="do not read or write the response store")
    parser.add_argument("--refresh", action="store_true", help="ask again even where a response is stored")
    parser.add_argument("--fresh", action="store_true",
                        help="take no answer another run stored: every item asked live (docs/guarantees.md, evidence)")
    parser.add_argument("--judge", default=None, metavar="SPEC", help="a model that resolves unparsed responses")
    parser.add_argument("--template", default="default", help="prompt template: default, reasoning or verbal (asks for a stated confidence)")
    parser.add_argument("--models-file", default=None, metavar="FILE", help="models.yaml to read model names from")
    parser.add_argument("--out", default="reports", metavar="DIR", help="where run directories go (default: reports)")
    parser.add_argument("--run-id", default=None, metavar="ID", help="default: <UTC timestamp>-<model>")
    parser.add_argument("--strict", action="store_true", help="refuse a cube with any invalid item")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _err(message: str) -> int:
    print(f"medrcube run: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def run(args: argparse.Namespace) -> int:
    from medrcube.cube import CubeError, load_cube
    from medrcube.run.prompts import get_template
    from medrcube.run.variants import parse_variants

    try:
        variants = parse_variants(args.variant)
        get_template(args.template)
    except ValueError as exc:
        return _err(str(exc))
    if args.run_id is not None and (not args.run_id.strip() or "/" in args.run_id or args.run_id in (".", "..")):
        return _err(f"--run-id {args.run_id!r} must be a plain directory name")

    try:
        cube = load_cube(args.cube, strict=args.strict)
    except CubeError as exc:
        return _err(f"cannot load the cube {args.cube}:\n{exc}")
    skipped = len(cube.skipped)
    warnings = len(cube.problems) - skipped
    if skipped or warnings:
        print(
            f"cube {cube.source}: {len(cube)} items loaded, {skipped} skipped as invalid, {warnings} warnings "
            "(`medrcube validate` lists them)",
            file=sys.stderr,
        )

    from medrcube.models.registry import load_adapter

    try:
        adapter = load_adapter(args.model, cube=cube, models_file=args.models_file, concurrency=args.concurrency)
        judge = (
            load_adapter(args.judge, cube=cube, models_file=args.models_file) if args.judge is not None else None
        )
    except ValueError as exc:  # ModelSpecError, ModelsFileError
        return _err(str(exc))

    from medrcube.run.store import StoreError
    from medrcube.service import EndpointError, infer, new_run_dir, preflight, write_run

    try:
        preflight([adapter, judge])
    except EndpointError as exc:
        return _err(str(exc))
    try:
        inference = infer(
            cube,
            adapter,
            variants=variants,
            store_dir=None if args.no_store else Path(args.response_store),
            judge=judge,
            concurrency=args.concurrency,
            refresh=args.refresh,
            fresh=args.fresh,
            template=args.template,
            progress=not args.no_progress,
        )
    except KeyboardInterrupt:
        print("interrupted: every response received so far is stored; run the same command to resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except StoreError as exc:
        return _err(str(exc))
    finally:
        if "medrcube.models.vllm_engine" in sys.modules:  # a `vllm:` engine stops with the asking
            from medrcube.models.vllm_engine import stop_engines

            stop_engines()
    result = inference.result
    if result.info.get("store_recovered"):
        print(
            f"warning: the response store was damaged; it was moved aside to {result.info['store_recovered']} "
            "and a fresh one started",
            file=sys.stderr,
        )

    from medrcube.tally import skipped_items, tally

    counters = tally(result.records, requests=result.requests_sent, loaded=len(cube),
                     skipped=skipped_items(cube.problems), stop=result.aborted,
                     failed_requests=inference.usage["candidate"].errors)  # as the gate counts
    try:
        run_dir = new_run_dir(Path(args.out), adapter.spec, args.run_id)
        meta: dict[str, Any] = {
            "run_id": run_dir.name,
            "cube_spec": str(args.cube),
            "strict": bool(args.strict),
            "usage": {name: u.to_dict() for name, u in inference.usage.items()},
            "tally": counters.to_dict(),
        }
        _, warning = write_run(run_dir, result, meta, cube=cube, ahead=inference.ahead)
    except OSError as exc:
        return _err(
            f"cannot write the run directory under {args.out}: {exc}. The responses are safe in the store; "
            "free space or pass another --out and run the same command again (nothing is re-asked)"
        )
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    _print_summary(run_dir, result)
    for line in counters.lines():
        print(f"  {line}")
    for name, u in inference.usage.items():
        print(f"  usage {name}: {u.requests} requests, {u.prompt_tokens:,} prompt + {u.completion_tokens:,} completion tokens")
    if result.aborted:
        return _err(f"the run stopped early: {result.aborted}")
    if result.asked and result.errors == result.asked:
        first = next((r.error for r in result.records if r.error), "")
        return _err(f"every request failed; the first error: {first}")
    return EXIT_OK


def _print_summary(run_dir: Path, result: Any) -> None:
    from medrcube.metrics.accuracy import accuracy

    print(run_dir)
    print(
        f"{len(result.records)} records: {result.requests_sent} requests sent, {result.cache_hits} from the store, "
        f"{result.errors} errors, {result.unavailable} unavailable ({result.wall_s:.1f} s)"
    )
    from medrcube.run.provenance import provenance_line

    if line := provenance_line(result.info.get("provenance")):
        print(f"  {line}")
    by_variant: dict[str, list[Any]] = {}
    for r in result.records:
        by_variant.setdefault(r.variant, []).append(r)
    for name, records in by_variant.items():
        a = accuracy(records)
        acc = "n/a" if a.acc is None else f"{a.acc:.1%} [{a.lo:.1%}, {a.hi:.1%}]"
        print(f"  {name}: accuracy {acc} over {a.n} graded ({a.unparsed} unparsed, {a.refused} refused)")
    truncated = sum(1 for r in result.records if r.outcome.value == "truncated")
    if truncated:
        print(f"  {truncated} answers cut at the token limit (truncated, not graded): raise max_completion_tokens")
    for served, n in (result.info.get("served_model_mismatches") or {}).items():
        print(f"  warning: {n} answers name the model {served!r}, not the one asked for (served_models in run.json)")
