"""`medrcube verify RUN_DIR...`: check a sealed run directory against its manifest.

Recomputes the SHA-256 of every file and the manifest's signature (HMAC-SHA256 under
MEDRCUBE_SIGNING_KEY when the run was sealed with it; rundir/seal.py) and says exactly
what changed: each file changed, removed or added, the manifest edited, a signed seal
with no key set to check it, an unsigned seal while a key is set; the page's own seal
(report.html and plots/), an unsealed page that is not the placeholder shown while it is
drawn, and a page showing another verdict than gate.json's. Then reads gate.json,
run.json and results.jsonl with the strict reader, and a validation dossier beside them
(dossier/dossier.json, `medrcube dossier`) against the one they give. Exit 0 when every
directory verifies, 1 otherwise. What the seal proves and what it does not: docs/guarantees.md.
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


def _dossier(run_dir: Path, check: object) -> list[str]:
    """A validation dossier beside the sealed files (`medrcube dossier`) must be the one they give."""
    import json

    from medrcube.report.dossier import DOSSIER_DIR, build_dossier

    path = run_dir / DOSSIER_DIR / "dossier.json"
    if not path.is_file():
        return []
    try:
        written = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return [f"{DOSSIER_DIR}/dossier.json: not readable JSON ({e}): write it again with `medrcube dossier {run_dir}`"]
    if written != json.loads(json.dumps(build_dossier(run_dir, check))):
        return [f"{DOSSIER_DIR}/dossier.json: differs from the dossier of the sealed files (edited, or written from "
                f"another run): write it again with `medrcube dossier {run_dir}`"]
    return []


def run(args: argparse.Namespace) -> int:
    from medrcube.report.after_exit import wait_drawn
    from medrcube.rundir.seal import verify_run_dir

    failed = 0
    for given in args.runs:
        run_dir = Path(given)
        if not run_dir.is_dir():
            print(f"medrcube verify: {run_dir}: no such run directory", file=sys.stderr)
            failed += 1
            continue
        # A page still being drawn after the run's exit: wait for it (and its seal); still a
        # placeholder after that, its drawer died, and figures left beside it are unsealed.
        wait_drawn(run_dir, timeout_s=60.0)
        check = verify_run_dir(run_dir, drawing=False)
        if check.ok:
            check.problems += _readable(run_dir)
        if check.ok:
            check.problems += _dossier(run_dir, check)
        print(check.describe())
        for problem in check.problems:
            print(f"  {problem}")
        failed += not check.ok
    return EXIT_FAILED if failed else EXIT_OK
