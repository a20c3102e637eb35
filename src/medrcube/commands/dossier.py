"""`medrcube dossier RUN_DIR`: the validation dossier of a sealed run, for a review board.

Verifies the run directory as `medrcube verify` does (the seal, then the strict reader of
gate.json, run.json and results.jsonl) and refuses a run that does not verify (an edited
file, a removed one, an unsealed directory), naming what failed. Then writes
RUN_DIR/dossier/dossier.html (for people) and dossier.json (for machines, valid against
the JSON Schema shipped as medrcube/report/dossier.schema.json): report/dossier.py says
what it holds. dossier/ is a view of the sealed files, like report.html, and not sealed
itself; `medrcube verify` rebuilds it and says when it differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK = 0
EXIT_REFUSED = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN_DIR", help="a sealed run directory (reports/<run-id>)")
    parser.add_argument("--out", help="where to write dossier.html and dossier.json (default: RUN_DIR/dossier)")


def run(args: argparse.Namespace) -> int:
    from medrcube.commands.verify import _readable
    from medrcube.report.dossier import DOSSIER_DIR, build_dossier, to_json, validate_dossier
    from medrcube.report.html import environment
    from medrcube.rundir.files import atomic_write
    from medrcube.rundir.seal import verify_run_dir

    run_dir = Path(args.run)
    if not run_dir.is_dir():
        print(f"medrcube dossier: {run_dir}: no such run directory", file=sys.stderr)
        return EXIT_REFUSED
    check = verify_run_dir(run_dir)
    if check.ok:
        check.problems += _readable(run_dir)
    if not check.ok:
        print(f"medrcube dossier: refused: {check.describe()}", file=sys.stderr)
        for problem in check.problems:
            print(f"  {problem}", file=sys.stderr)
        print("  a dossier is written only from a run that verifies: rerun the gate, or restore the sealed files",
              file=sys.stderr)
        return EXIT_REFUSED
    doc = build_dossier(run_dir, check)
    validate_dossier(doc)
    out = Path(args.out) if args.out else run_dir / DOSSIER_DIR
    out.mkdir(parents=True, exist_ok=True)
    text, page = to_json(doc), environment().get_template("dossier.html.j2").render(d=doc)
    atomic_write(out / "dossier.json", lambda fh: fh.write(text))
    atomic_write(out / "dossier.html", lambda fh: fh.write(page))
    print(check.describe())
    print(f"dossier: {out / 'dossier.html'} and {out / 'dossier.json'} ({len(doc['to_fill'])} items for a person to "
          f"fill: {', '.join(doc['to_fill'])})")
    return EXIT_OK
