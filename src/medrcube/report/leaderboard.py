"""The leaderboard across runs (writing; board_rows.py computes, board_format.py and
leaderboard_html.py format): the paper's Table 1 and Table 4, Figure 3 and Figure 4.

    from medrcube.report.leaderboard import leaderboard
    result = leaderboard(["reports/run-a", "reports/run-b", "ref/results.json"], "reports/leaderboard")

writes into the output directory:

    leaderboard.html            everything below on one self-contained page
    leaderboard.csv / .md       Table 1: Overall; MR VR IPR OR RG DD AD SG; CT X-Ray MRI US;
                                Brain Chest Heart Lungs Breast; one row per run
    leaderboard_n.csv           the number of graded items behind each Table 1 value
    text_only.csv / .md         Table 4 (when blind records exist): blind accuracy per column,
                                the drop in Overall in parentheses
    cell_accuracy.csv           models x cells accuracy (the input of Figure 3)
    cell_correlation.csv        cell x cell Pearson r in dendrogram order (3 models or more)
    credibility.csv / .md       A/B/C/D, luck rate, rationality, shortcut probability per model,
                                and Pearson r, p of shortcut probability against high-level accuracy
    analysis.json               the correlation numbers and orders, machine-readable
    plots/*.png, *.svg          correlation_clustered (3a), correlation_anatomical (3b),
                                credibility_quadrant and shortcut_vs_accuracy (4)

Conventions (deterministic: the same runs give byte-identical CSV and Markdown, whatever
the order they are given in):
- accuracies are percentages with two decimals; rows are sorted by Overall (best first),
  then by label; columns in the paper's order, then values outside the taxonomy, sorted;
- best and second best of a column (compared at the printed precision, ties share a
  rank) are bold and underlined in HTML (`<b>`, `<u>`) and Markdown (`**x**`,
  `<ins>x</ins>`, as Markdown has no underline); the CSV stays numeric and marks them in
  a `<column>_rank` column right after each value column: the dense rank, 1 = best,
  2 = second best (empty when fewer than two runs have a value);
- no timestamps and no paths in CSV or Markdown, only labels and run ids.

Runs are refused (MixedRunsError) when their cube fingerprints or prompt templates
differ: a leaderboard compares models on the same items asked the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medrcube.report.analysis import MIN_MODELS_FOR_CORRELATION, cell_correlation, pearson, table_columns
from medrcube.report.board_format import (
    analysis_json,
    cell_matrix_csv,
    correlation_csv,
    counts_csv,
    credibility_csv,
    credibility_markdown,
    table1_csv,
    table1_markdown,
    table4_csv,
    table4_markdown,
)
from medrcube.report.board_rows import (
    LeaderboardResult,
    MixedRunsError,
    accuracy_frame,
    blind_rows,
    cell_matrix,
    check_compatible,
    credibility_frame,
    dense_ranks,
    is_present,
    sort_rows,
    standard_rows,
)
from medrcube.report.leaderboard_html import render_leaderboard
from medrcube.report.readers import MEDRCUBE, RunData, read_run


def _write(path: Path, text: str) -> Path:
    from medrcube.rundir.files import atomic_write

    atomic_write(path, lambda fh: fh.write(text))
    return path


def leaderboard(
    run_dirs: Sequence[str | os.PathLike[str]] | Sequence[RunData],
    out_dir: str | os.PathLike[str],
    *,
    plots: bool = True,
) -> LeaderboardResult:
    """Read the runs, refuse mixed cubes or templates, and write the leaderboard files into
    `out_dir` (see the module doc). `run_dirs` may hold run directories, reference files,
    or RunData already read. `plots=False` skips the figures (and their HTML section)."""
    runs = [r if isinstance(r, RunData) else read_run(r) for r in run_dirs]
    if not runs:
        raise ValueError("no run given: pass one or more run directories")
    notes = check_compatible(runs)
    for r in runs:
        notes.extend(r.notes)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}

    rows = standard_rows(runs)
    if not rows:
        raise ValueError("none of the runs has standard-variant records or a summary: nothing to rank")
    ranked = {id(r.run) for r in rows}
    for r in runs:
        if id(r) not in ranked and not any(x.variant == "blind" for x in r.records):
            notes.append(f"{r.label} ({r.path}): no standard-variant records: not ranked")
    columns = table_columns(r.profile for r in rows)
    table, counts = accuracy_frame(rows, columns)
    ranks = dense_ranks(table)
    order = sort_rows(table)
    run_ids = {r.label: r.run.run_id for r in rows}
    files["leaderboard.csv"] = _write(out / "leaderboard.csv", table1_csv(table, ranks, order, run_ids))
    files["leaderboard_n.csv"] = _write(out / "leaderboard_n.csv", counts_csv(counts, order, run_ids))
    files["leaderboard.md"] = _write(out / "leaderboard.md", table1_markdown(table, ranks, order, columns))

    blind = blind_rows(runs, rows)
    text_only = None
    drops: dict[str, float | None] = {}
    blind_order: list[str] = []
    if blind:
        text_only, _ = accuracy_frame(blind, columns)
        blind_order = sort_rows(text_only)
        drops = {b.label: b.drop for b in blind}
        files["text_only.csv"] = _write(out / "text_only.csv", table4_csv(text_only, blind, blind_order))
        files["text_only.md"] = _write(out / "text_only.md", table4_markdown(text_only, blind, blind_order))
        for b in blind:
            if b.paired_with is None:
                notes.append(f"{b.label}: blind records without standard ones of the same model: no drop shown")

    matrix = cell_matrix(rows)
    files["cell_accuracy.csv"] = _write(out / "cell_accuracy.csv", cell_matrix_csv(matrix, order))
    correlation = None
    if len(rows) >= MIN_MODELS_FOR_CORRELATION:
        try:
            correlation = cell_correlation(matrix)
        except ValueError as e:
            notes.append(f"cell correlation not computed: {e}")
        else:
            files["cell_correlation.csv"] = _write(out / "cell_correlation.csv", correlation_csv(correlation))
            for reason, cells in correlation.dropped.items():
                if cells:
                    notes.append(f"cell correlation: {len(cells)} cells left out ({reason})")
    else:
        notes.append(f"cell correlation needs at least {MIN_MODELS_FOR_CORRELATION} models; {len(rows)} given")

    cred = credibility_frame(rows)
    points = [
        (label, float(cred.at[label, "high_level_acc"]), float(cred.at[label, "shortcut_prob"]))
        for label in order
        if is_present(cred.at[label, "high_level_acc"]) and is_present(cred.at[label, "shortcut_prob"])
    ]
    shortcut = pearson([p[1] for p in points], [p[2] for p in points]) if points else None
    files["credibility.csv"] = _write(out / "credibility.csv", credibility_csv(cred, order, run_ids))
    files["credibility.md"] = _write(out / "credibility.md", credibility_markdown(cred, order, shortcut, len(points)))
    files["analysis.json"] = _write(out / "analysis.json", analysis_json(correlation, shortcut, points))
    from medrcube.report.robustness_board import write_robustness  # image perturbations

    by_label = {r.label: r.run for r in rows}
    robust, robust_files = write_robustness(out, [(label, by_label[label]) for label in order], _write)
    files.update(robust_files)

    result = LeaderboardResult(
        out_dir=out, files=files, order=order, table=table, counts=counts, ranks=ranks,
        text_only=text_only, text_only_drops=drops, cells=matrix, correlation=correlation,
        credibility=cred, shortcut=shortcut, notes=notes, robustness=robust,
    )
    figures = _figures(result, points, out / "plots") if plots else {}
    for plot in figures.values():
        for f in plot.files:
            files[f"plots/{f.name}"] = f
    files["leaderboard.html"] = _write(
        out / "leaderboard.html",
        render_leaderboard(result, rows, columns, blind, blind_order, {k: v.data_uri for k, v in figures.items()}),
    )
    return result


def _figures(result: LeaderboardResult, points: Sequence[tuple[str, float, float]], plots_dir: Path) -> dict[str, Any]:
    from medrcube.report import plots

    figures: dict[str, Any] = {}
    if result.correlation is not None:
        figures["clustered"] = plots.save(plots.correlation_heatmap(result.correlation, clustered=True),
                                          "correlation_clustered", plots_dir)
        figures["anatomical"] = plots.save(plots.correlation_heatmap(result.correlation, clustered=False),
                                           "correlation_anatomical", plots_dir)
    cred = result.credibility
    quad = [
        (label, float(cred.at[label, "overall_acc"]), float(cred.at[label, "rationality"]))
        for label in result.order
        if is_present(cred.at[label, "overall_acc"]) and is_present(cred.at[label, "rationality"])
    ]
    if quad:
        figures["quadrant"] = plots.save(plots.credibility_quadrant(quad), "credibility_quadrant", plots_dir)
    if points:
        figures["shortcut"] = plots.save(plots.shortcut_scatter(points, result.shortcut), "shortcut_vs_accuracy",
                                         plots_dir)
    return figures


__all__ = ["LeaderboardResult", "MixedRunsError", "check_compatible", "leaderboard", "MEDRCUBE"]
