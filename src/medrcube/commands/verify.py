"""`medrcube verify RUN_DIR...`: check a sealed run directory against its manifest.

Recomputes the SHA-256 of every file and the manifest's signature (HMAC-SHA256 under
MEDRCUBE_SIGNING_KEY when the run was sealed with it; rundir/seal.py) and says exactly
what changed: each file changed, removed or added, the manifest edited, a signed seal
with no key set to check it, an unsigned seal while a key is set. Then reads gate.json,
run.json and results.jsonl with the strict reader. Exit 0 when every directory
verifies, 1 otherwise. What the seal proves and what it does not: docs/guarantees.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (reports/<run-id>)")


def _readable(run_dir: Path) -> list[str]:
    """Problems the strict reader finds in the run's documents (they verified byte for byte)."""
    from medrcube.rundir.reading import RunDirError, read_gate_document, read_results, read_run_document

    problems = []
    for name, read in (("gate.json", read_gate_document), ("run.json", read_run_document), ("results.jsonl", read_results)):
        if (run_dir / name).is_file():
            try:
                read(run_dir / name)
            except RunDirError as e:
                problems.append(str(e))
    return problems


def run(args: argparse.Namespace) -> int:
    from medrcube.rundir.seal import verify_run_dir

    failed = 0
    for given in args.runs:
        run_dir = Path(given)
        if not run_dir.is_dir():
            print(f"medrcube verify: {run_dir}: no such run directory", file=sys.stderr)
            failed += 1
            continue
        check = verify_run_dir(run_dir)
        if check.ok:
            check.problems += _readable(run_dir)
        print(check.describe())
        for problem in check.problems:
            print(f"  {problem}")
        failed += not check.ok
    return EXIT_FAILED if failed else EXIT_OK
