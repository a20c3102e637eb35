"""Scenario 7: the leaderboard of 4 runs over the full cube (issue 5's target).

Four runs of the `random` baseline with different seeds are made once (`medrcube run`,
not timed); then `medrcube report RUN1..RUN4 --no-run-reports` (Table 1, the cell
correlation and credibility analyses, CSV, Markdown, HTML and figures) is timed, and the
same command refreshing each run's report.html as an info figure."""

from __future__ import annotations

from benchmarks.context import Context
from benchmarks.harness import BenchError, Metric, Target, bin_path, run_proc
from medrcube.report.after_exit import wait_drawn

NAME = "leaderboard"
TITLE = "7. Leaderboard across runs (medrcube report)"


def run(ctx: Context) -> list[Metric]:
    out = ctx.dir("leaderboard")
    runs_dir = out / "runs"
    k = ctx.sizes.leaderboard_runs
    run_dirs = []
    for s in range(1, k + 1):
        run_proc([bin_path("medrcube"), "run", "--model", f"random:{s}", "--cube", str(ctx.cube), "--no-store",
                  "--out", str(runs_dir), "--run-id", f"random-{s}", "--no-progress"], log_dir=out, name=f"make-run-{s}")
        run_dirs.append(str(runs_dir / f"random-{s}"))
    for d in run_dirs:  # each run's report.html is drawn after its exit: not during the timed reports
        wait_drawn(d)
    walls, full = [], []
    for i in range(ctx.repeats("long")):
        board = out / f"board-{i}"
        p = run_proc([bin_path("medrcube"), "report", *run_dirs, "--out", str(board), "--no-run-reports"],
                     log_dir=out, name=f"report-{i}")
        for name in ("leaderboard.csv", "leaderboard.md"):
            if not (board / name).is_file():
                raise BenchError(f"medrcube report wrote no {name} in {board}\n{p.tail()}")
        walls.append(p.wall_s)
    for i in range(ctx.repeats("once")):
        p = run_proc([bin_path("medrcube"), "report", *run_dirs, "--out", str(out / f"board-full-{i}")],
                     log_dir=out, name=f"report-full-{i}")
        full.append(p.wall_s)
    items = ctx.shared.get("cube_items", "?")
    return [
        Metric("leaderboard.report_s", f"`medrcube report` of {k} runs x {items} items: leaderboard only", "s", walls,
               Target("<", 30.0, "< 30 s") if ctx.sizes.judge_targets else None,
               note="Table 1, cell correlation, credibility; CSV, Markdown, HTML, figures"),
        Metric("leaderboard.report_with_runs_s", "  the same, also rewriting each run's report.html", "s", full),
    ]
