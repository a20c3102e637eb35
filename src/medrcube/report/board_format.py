"""The leaderboard's text formats: Table 1, Table 4, the cell matrix, the correlation and
credibility tables as CSV and Markdown, and analysis.json (deterministic: the same runs
give byte-identical text). Reads the row types of board_rows.py; writes nothing.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from medrcube.report.analysis import MIN_MODELS_FOR_CORRELATION, CellCorrelation, Column, Correlation, cell_id
from medrcube.report.board_rows import DECIMALS, BlindRow

if TYPE_CHECKING:
    import pandas as pd

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
