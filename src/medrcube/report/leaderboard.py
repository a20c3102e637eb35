"""The leaderboard across runs: the paper's Table 1 and Table 4, Figure 3 and Figure 4.

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

import csv
import io
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medrcube.report.analysis import (
    MIN_MODELS_FOR_CORRELATION,
    CellCorrelation,
    Column,
    Correlation,
    Profile,
    anatomical_key,
    cell_correlation,
    cell_id,
    column_stat,
    pearson,
    profile,
    profile_from_summary,
    table_columns,
)
from medrcube.report.readers import MEDRCUBE, REFERENCE_SUMMARY, RunData, read_run

if TYPE_CHECKING:
    import pandas as pd

DECIMALS = 2  # accuracies are printed as percentages with this many decimals


class MixedRunsError(ValueError):
    """Runs that must not share a leaderboard (different cubes or prompt templates)."""


# -- compatibility ------------------------------------------------------------------------------


def _who(run: RunData) -> str:
    return f"{run.label} ({run.path})"


def check_compatible(runs: Sequence[RunData]) -> list[str]:
    """Refuse runs made on different cubes or with different prompt templates (MixedRunsError
    naming both runs and the field); return notes on what could not be verified."""
    notes: list[str] = []
    for name, get in (("cube fingerprint", lambda r: r.cube_fingerprint), ("prompt template", lambda r: r.template)):
        known = [(r, get(r)) for r in runs if get(r)]
        for r, value in known[1:]:
            first, first_value = known[0]
            if value != first_value:
                raise MixedRunsError(
                    f"refusing to put these runs on one leaderboard: their {name} differs.\n"
                    f"  {_who(first)}: {name} {first_value}\n"
                    f"  {_who(r)}: {name} {value}\n"
                    + ("A leaderboard compares models on the same items: run every model on the same cube."
                       if name == "cube fingerprint" else
                       "Accuracies under different prompts do not compare: run every model with the same "
                       "--template.")
                )
    # A run without a fingerprint (the reference evaluator's files, a run without run.json)
    # must at least ask a subset of the items of the others (the reference skips items whose
    # image is missing, so its ids are a subset, not the same set).
    ids = {id(r): {x.item_id for x in r.records} for r in runs if r.records}
    with_records = [r for r in runs if r.records]
    for i, a in enumerate(with_records):
        for b in with_records[i + 1:]:
            if a.cube_fingerprint and b.cube_fingerprint:
                continue
            ia, ib = ids[id(a)], ids[id(b)]
            if not (ia <= ib or ib <= ia):
                only_a, only_b = sorted(ia - ib), sorted(ib - ia)
                raise MixedRunsError(
                    "refusing to put these runs on one leaderboard: their item ids differ "
                    "(a run without a cube fingerprint must ask the same items as the others, or a subset).\n"
                    f"  {_who(a)}: {len(ia)} items, {len(only_a)} not in the other (e.g. {only_a[0]!r})\n"
                    f"  {_who(b)}: {len(ib)} items, {len(only_b)} not in the other (e.g. {only_b[0]!r})\n"
                    "Compare runs of the same cube."
                )
    for r in runs:
        if not r.cube_fingerprint:
            what = "its item ids were checked against the others" if r.records else "it could not be checked"
            notes.append(f"{r.label}: no cube fingerprint (reference evaluator output or no run.json); {what}")
    return notes


# -- rows -------------------------------------------------------------------------------------


@dataclass
class Row:
    label: str
    run: RunData
    profile: Profile


def unique_labels(runs: Sequence[RunData]) -> dict[int, str]:
    """A label per run (keyed by id(run)): the model label, plus `[run id]` where two runs
    share one, so that the same runs get the same labels in any order."""
    by_label: dict[str, list[RunData]] = {}
    for r in runs:
        by_label.setdefault(r.label, []).append(r)
    out: dict[int, str] = {}
    for label, group in by_label.items():
        for r in group:
            out[id(r)] = label if len(group) == 1 else f"{label} [{r.run_id}]"
    taken: dict[str, int] = {}
    for r in sorted(runs, key=lambda r: (out[id(r)], str(r.path))):
        base = out[id(r)]
        taken[base] = taken.get(base, 0) + 1
        if taken[base] > 1:
            out[id(r)] = f"{base} #{taken[base]}"
    return out


def standard_rows(runs: Sequence[RunData]) -> list[Row]:
    """One Table 1 row per run with standard records (or a bare summary)."""
    eligible = [r for r in runs if r.kind == REFERENCE_SUMMARY or any(x.variant == "standard" for x in r.records)]
    labels = unique_labels(eligible)
    rows = []
    for r in eligible:
        p = profile_from_summary(r.summary or {}) if r.kind == REFERENCE_SUMMARY else profile(r.of_variant("standard"))
        rows.append(Row(labels[id(r)], r, p))
    return rows


@dataclass
class BlindRow:
    label: str
    run: RunData
    profile: Profile  # of the blind records
    drop: float | None  # standard - blind accuracy on the items graded in both (metrics.robustness)
    paired_with: str | None  # the Table 1 row whose standard records were compared


def blind_rows(runs: Sequence[RunData], table1: Sequence[Row]) -> list[BlindRow]:
    """Table 4 rows: every run with blind records, paired with standard records of the same
    run, or else of a run of the same model (same fingerprint, else same label)."""
    from medrcube.metrics.robustness import image_dependence

    out = []
    blind_runs = [r for r in runs if any(x.variant == "blind" for x in r.records)]
    own = unique_labels(blind_runs)
    used: set[str] = set()
    for r in blind_runs:
        partner = next((row for row in table1 if row.run is r), None)
        if partner is None:
            partner = next(
                (row for row in table1 if row.run.records and (
                    (r.model_fingerprint and row.run.model_fingerprint == r.model_fingerprint)
                    or (not r.model_fingerprint and row.run.label == r.label))),
                None,
            )
        drop = None
        if partner is not None and partner.run.records:
            records = list(partner.run.of_variant("standard")) + list(r.of_variant("blind"))
            drop = image_dependence(records).drop
        label = partner.label if partner is not None else own[id(r)]
        if label in used:  # two blind runs of one model: tell them apart by run id
            label = f"{label} [{r.run_id}]"
        used.add(label)
        out.append(BlindRow(
            label=label,
            run=r,
            profile=profile(r.of_variant("blind"), with_credibility=False),
            drop=drop,
            paired_with=partner.label if partner is not None else None,
        ))
    return out


# -- tables -----------------------------------------------------------------------------------


def _pct_value(acc: float | None) -> float:
    return float("nan") if acc is None else round(100.0 * acc, DECIMALS)


def accuracy_frame(rows: Sequence[Row | BlindRow], columns: Sequence[Column]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(accuracy in percent rounded to DECIMALS, n) with one row per label, one column per header."""
    import pandas as pd

    acc, n = {}, {}
    for row in rows:
        stats = [column_stat(row.profile, c) for c in columns]
        acc[row.label] = [_pct_value(s.acc if s else None) for s in stats]
        n[row.label] = [s.n if s else 0 for s in stats]
    headers = [c.header for c in columns]
    return (pd.DataFrame.from_dict(acc, orient="index", columns=headers),
            pd.DataFrame.from_dict(n, orient="index", columns=headers))


def dense_ranks(table: pd.DataFrame) -> pd.DataFrame:
    """Per column, 1 for the best value, 2 for the next distinct one...; NaN where a column
    has fewer than two values (nothing to rank) or the value is missing."""
    ranks = table.rank(method="dense", ascending=False)
    enough = table.notna().sum() >= 2
    return ranks.where(enough, other=float("nan"), axis=1) if len(table) else ranks


def sort_rows(table: pd.DataFrame) -> list[str]:
    """Labels by Overall, best first (missing last), then by label."""
    def key(label: str) -> tuple[int, float, str]:
        v = table.at[label, "Overall"]
        return (1, 0.0, label) if math.isnan(v) else (0, -float(v), label)

    return sorted(table.index, key=key)


def _fmt(v: float) -> str:
    return "" if math.isnan(v) else f"{v:.{DECIMALS}f}"


def _csv(rows: Iterable[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for row in rows:
        w.writerow(row)
    return buf.getvalue()


def table1_csv(table: pd.DataFrame, ranks: pd.DataFrame, order: Sequence[str], run_ids: dict[str, str]) -> str:
    head = ["model", "run"]
    for c in table.columns:
        head += [c, f"{c}_rank"]
    lines: list[list[Any]] = [head]
    for label in order:
        line: list[Any] = [label, run_ids[label]]
        for c in table.columns:
            v, rk = table.at[label, c], ranks.at[label, c]
            line += [_fmt(v), "" if math.isnan(rk) else str(int(rk))]
        lines.append(line)
    return _csv(lines)


def counts_csv(counts: pd.DataFrame, order: Sequence[str], run_ids: dict[str, str]) -> str:
    lines: list[list[Any]] = [["model", "run", *counts.columns]]
    lines += [[label, run_ids[label], *(str(int(counts.at[label, c])) for c in counts.columns)] for label in order]
    return _csv(lines)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _marked(v: float, rank: float, md: bool) -> str:
    text = _fmt(v) or "–"
    if rank == 1:
        return f"**{text}**" if md else f"<b>{text}</b>"
    if rank == 2:
        return f"<ins>{text}</ins>" if md else f"<u>{text}</u>"
    return text


def table1_markdown(table: pd.DataFrame, ranks: pd.DataFrame, order: Sequence[str], columns: Sequence[Column]) -> str:
    groups = _groups(columns)
    lines = [
        "Accuracy (%) of the standard variant. Columns: "
        + "; ".join(f"{name}: {', '.join(h for h in heads)}" for name, heads in groups if name != "Overall")
        + ". **Best**, <ins>second best</ins>.",
        "",
        "| Model | " + " | ".join(_md_escape(c) for c in table.columns) + " |",
        "|:--|" + "--:|" * len(table.columns),
    ]
    for label in order:
        cells = [_marked(table.at[label, c], ranks.at[label, c], md=True) for c in table.columns]
        lines.append(f"| {_md_escape(label)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _groups(columns: Sequence[Column]) -> list[tuple[str, list[str]]]:
    names = {None: "Overall", "task": "Task", "modality": "Modality", "part": "Anatomical part"}
    out: list[tuple[str, list[str]]] = []
    for c in columns:
        name = names[c.axis]
        if not out or out[-1][0] != name:
            out.append((name, []))
        out[-1][1].append(c.header)
    return out


def _drop_text(drop: float | None) -> str:
    if drop is None:
        return ""
    d = round(100.0 * drop, DECIMALS)
    return f" ({'-' if d >= 0 else '+'}{abs(d):.{DECIMALS}f})"


def table4_csv(table: pd.DataFrame, blind: Sequence[BlindRow], order: Sequence[str]) -> str:
    drops = {b.label: b.drop for b in blind}
    runs = {b.label: b.run.run_id for b in blind}
    lines: list[list[Any]] = [["model", "run", "Overall", "Overall_drop", *table.columns[1:]]]
    for label in order:
        d = drops[label]
        lines.append([
            label, runs[label], _fmt(table.at[label, "Overall"]),
            "" if d is None else f"{round(100.0 * d, DECIMALS):.{DECIMALS}f}",
            *(_fmt(table.at[label, c]) for c in table.columns[1:]),
        ])
    return _csv(lines)


def table4_markdown(table: pd.DataFrame, blind: Sequence[BlindRow], order: Sequence[str]) -> str:
    drops = {b.label: b.drop for b in blind}
    lines = [
        "Accuracy (%) without the image (blind variant: the question text only). In parentheses: the drop "
        "from the standard variant, standard minus blind accuracy on the items graded in both.",
        "",
        "| Model | " + " | ".join(_md_escape(c) for c in table.columns) + " |",
        "|:--|" + "--:|" * len(table.columns),
    ]
    for label in order:
        first = (_fmt(table.at[label, "Overall"]) or "–") + _drop_text(drops[label])
        rest = [_fmt(table.at[label, c]) or "–" for c in table.columns[1:]]
        lines.append(f"| {_md_escape(label)} | " + " | ".join([first, *rest]) + " |")
    return "\n".join(lines) + "\n"


# -- cells and credibility ---------------------------------------------------------------------


def cell_matrix(rows: Sequence[Row]) -> pd.DataFrame:
    """Models x cells accuracy (fractions), columns in anatomical order; NaN where a model
    has no graded item in a cell."""
    import pandas as pd

    cells = sorted({c for row in rows for c in row.profile.cells}, key=anatomical_key)
    data = {
        row.label: [
            (s.acc if (s := row.profile.cells.get(c)) is not None and s.acc is not None else float("nan"))
            for c in cells
        ]
        for row in rows
    }
    frame = pd.DataFrame.from_dict(data, orient="index", columns=pd.Index(cells, tupleize_cols=False))
    return frame


def cell_matrix_csv(matrix: pd.DataFrame, order: Sequence[str]) -> str:
    lines: list[list[Any]] = [["model", *(cell_id(c) for c in matrix.columns)]]
    for label in order:
        if label in matrix.index:
            lines.append([label, *(_fmt(round(100.0 * v, DECIMALS)) for v in matrix.loc[label].to_numpy())])
    return _csv(lines)


def correlation_csv(cc: CellCorrelation) -> str:
    order = cc.clustered
    lines: list[list[Any]] = [["cell", *(cell_id(c) for c in order)]]
    for a in order:
        lines.append([cell_id(a), *(f"{cc.corr.at[a, b]:.4f}" for b in order)])
    return _csv(lines)


CRED_FIELDS = ("A", "B", "C", "D", "pairs", "luck_rate", "rationality", "shortcut_prob")


def credibility_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """Per model: the credibility groups and ratios, overall and high-level accuracy."""
    import pandas as pd

    data = {}
    for row in rows:
        c = row.profile.credibility
        hl = row.profile.high_level
        data[row.label] = {
            **{f: (getattr(c, f) if c is not None else None) for f in CRED_FIELDS},
            "overall_acc": row.profile.overall.acc,
            "high_level_acc": hl.acc if hl is not None else None,
        }
    return pd.DataFrame.from_dict(data, orient="index", columns=[*CRED_FIELDS, "overall_acc", "high_level_acc"])


def _ratio(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{float(v):.4f}"


def _count(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(int(v))


def credibility_csv(frame: pd.DataFrame, order: Sequence[str], run_ids: dict[str, str]) -> str:
    cols = list(frame.columns)
    lines: list[list[Any]] = [["model", "run", *cols]]
    for label in order:
        vals = [(_count if c in ("A", "B", "C", "D", "pairs") else _ratio)(frame.at[label, c]) for c in cols]
        lines.append([label, run_ids[label], *vals])
    return _csv(lines)


def credibility_markdown(frame: pd.DataFrame, order: Sequence[str], corr: Correlation | None, n_points: int) -> str:
    from medrcube.report.plots import format_p

    def pct(v: Any) -> str:
        return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * float(v):.{DECIMALS}f}"

    lines = [
        "Credibility per model (standard variant): pairs of a high-level and a lower-level item on one image. "
        "Luck rate = D/(A+D), rationality = 1 - luck rate, shortcut probability = D/(C+D); in %.",
        "",
        "| Model | A | B | C | D | pairs | luck rate | rationality | shortcut prob. | overall acc. | high-level acc. |",
        "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for label in order:
        f = frame.loc[label]
        lines.append(
            f"| {_md_escape(label)} | "
            + " | ".join(_count(f[k]) or "–" for k in ("A", "B", "C", "D", "pairs"))
            + " | "
            + " | ".join(pct(f[k]) for k in ("luck_rate", "rationality", "shortcut_prob", "overall_acc", "high_level_acc"))
            + " |"
        )
    lines.append("")
    if corr is not None:
        lines.append(
            f"Shortcut probability against high-level accuracy across {corr.n} models: "
            f"Pearson r = {corr.r:.3f}, p = {format_p(corr.p)} (two-sided)."
        )
    else:
        lines.append(
            f"Shortcut probability against high-level accuracy: not computed ({n_points} models with both values; "
            f"at least {MIN_MODELS_FOR_CORRELATION} that differ are needed)."
        )
    return "\n".join(lines) + "\n"


# -- the whole ---------------------------------------------------------------------------------


@dataclass
class LeaderboardResult:
    """What `leaderboard` computed and wrote."""

    out_dir: Path
    files: dict[str, Path]  # name -> path of every file written
    order: list[str]  # Table 1 row labels, best first
    table: pd.DataFrame  # Table 1: accuracy in percent (DECIMALS), labels x headers
    counts: pd.DataFrame  # graded items behind each value
    ranks: pd.DataFrame  # dense rank per column (1 = best), NaN where unranked
    text_only: pd.DataFrame | None  # Table 4 blind accuracies, or None without blind records
    text_only_drops: dict[str, float | None]
    cells: pd.DataFrame  # models x cells accuracy (fractions)
    correlation: CellCorrelation | None
    credibility: pd.DataFrame
    shortcut: Correlation | None  # shortcut probability against high-level accuracy
    notes: list[str] = field(default_factory=list)
    robustness: Any = None  # report.robustness_board.RobustnessBoard (robustness.csv / .md)


def _write(path: Path, text: str) -> Path:
    from medrcube.rundir.files import atomic_write

    atomic_write(path, lambda fh: fh.write(text))
    return path


def read_runs(paths: Iterable[str | os.PathLike[str]]) -> list[RunData]:
    return [read_run(p) for p in paths]


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
        if _present(cred.at[label, "high_level_acc"]) and _present(cred.at[label, "shortcut_prob"])
    ]
    shortcut = pearson([p[1] for p in points], [p[2] for p in points]) if points else None
    files["credibility.csv"] = _write(out / "credibility.csv", credibility_csv(cred, order, run_ids))
    files["credibility.md"] = _write(out / "credibility.md", credibility_markdown(cred, order, shortcut, len(points)))
    files["analysis.json"] = _write(out / "analysis.json", analysis_json(correlation, shortcut, points))
    from medrcube.report.robustness_board import write_robustness  # issue 17: image perturbations

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
    from medrcube.report.leaderboard_html import render_leaderboard

    files["leaderboard.html"] = _write(
        out / "leaderboard.html",
        render_leaderboard(result, rows, columns, blind, blind_order, {k: v.data_uri for k, v in figures.items()}),
    )
    return result


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def analysis_json(corr: CellCorrelation | None, shortcut: Correlation | None, points: Sequence[tuple[str, float, float]]) -> str:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "shortcut_vs_high_level_accuracy": None if shortcut is None else {
            "r": round(shortcut.r, 6), "p": float(f"{shortcut.p:.6g}"), "n_models": shortcut.n,
            "slope": round(shortcut.slope, 6), "intercept": round(shortcut.intercept, 6),
        },
        "models": [{"model": m, "high_level_acc": round(x, 6), "shortcut_prob": round(y, 6)} for m, x, y in points],
        "cell_correlation": None if corr is None else {
            "clustered_order": [cell_id(c) for c in corr.clustered],
            "anatomical_order": [cell_id(c) for c in corr.anatomical],
            "linkage": "average, distance 1 - Pearson r",
            "left_out": {k: [cell_id(c) for c in v] for k, v in corr.dropped.items()},
        },
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


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
        if _present(cred.at[label, "overall_acc"]) and _present(cred.at[label, "rationality"])
    ]
    if quad:
        figures["quadrant"] = plots.save(plots.credibility_quadrant(quad), "credibility_quadrant", plots_dir)
    if points:
        figures["shortcut"] = plots.save(plots.shortcut_scatter(points, result.shortcut), "shortcut_vs_accuracy",
                                         plots_dir)
    return figures


__all__ = ["LeaderboardResult", "MixedRunsError", "check_compatible", "leaderboard", "MEDRCUBE"]
