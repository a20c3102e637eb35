"""`medrcube report RUN... [--out DIR]`: the leaderboard across runs, and each run's report.html.

Each RUN is a run directory (reports/<run-id>), or the MedRCube reference evaluator's
output (a directory holding results.json / metrics_summary.json, or one of those files),
so published per-sample results sit next to your own runs. Runs made on different cubes
or with different prompt templates are refused.

Writes the leaderboard (Table 1, Table 4 when blind records exist, the cell correlation
of Figure 3, the credibility analysis of Figure 4) into --out, and refreshes report.html
in every medrcube run directory given (not in reference directories).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK = 0
EXIT_ERROR = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="run directories, or the reference evaluator's results.json / metrics_summary.json")
    parser.add_argument("--out", default="reports/leaderboard", metavar="DIR",
                        help="where the leaderboard goes (default: reports/leaderboard)")
    parser.add_argument("--cube", default=None, metavar="CUBE",
                        help="the cube the runs were made on, for the questions and thumbnails of report.html "
                             "(default: the cube named in each run.json, when found and unchanged)")
    parser.add_argument("--no-run-reports", action="store_true",
                        help="do not (re)write report.html in the run directories")
    parser.add_argument("--no-plots", action="store_true", help="leaderboard tables only, no figures")


def _err(message: str) -> int:
    print(f"medrcube report: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def run(args: argparse.Namespace) -> int:
    from medrcube.report.leaderboard import MixedRunsError, leaderboard
    from medrcube.report.readers import MEDRCUBE, RunReadError, read_run

    try:
        runs = [read_run(p) for p in args.runs]
    except RunReadError as e:
        return _err(str(e))

    cube = None
    if args.cube is not None:
        from medrcube.cube import CubeError, load_cube

        try:
            cube = load_cube(args.cube)
        except CubeError as e:
            return _err(f"cannot load the cube {args.cube}:\n{e}")

    try:
        result = leaderboard(runs, args.out, plots=not args.no_plots)
    except MixedRunsError as e:
        return _err(str(e))
    except ValueError as e:
        return _err(str(e))
    except OSError as e:
        return _err(f"cannot write into {args.out}: {e}")

    print(Path(args.out) / "leaderboard.html")
    for label in result.order:
        overall = result.table.at[label, "Overall"]
        print(f"  {label}: overall " + ("n/a" if overall != overall else f"{overall:.2f}%"))
    if result.shortcut is not None:
        s = result.shortcut
        print(f"  shortcut probability vs high-level accuracy: r = {s.r:.3f}, p = {s.p:.3g} ({s.n} models)")
    for note in result.notes:
        print(f"  note: {note}", file=sys.stderr)

    if not args.no_run_reports:
        from medrcube.report.html import write_report_html

        for r in runs:
            if r.kind != MEDRCUBE:
                continue
            try:
                print(write_report_html(r.run_dir, cube=cube))
            except (RunReadError, OSError) as e:
                print(f"medrcube report: warning: no report.html for {r.run_dir}: {e}", file=sys.stderr)
    return EXIT_OK
