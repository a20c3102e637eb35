"""The leaderboard's robustness columns: accuracy under each image perturbation, per model.

Written only when some run asked a perturbation variant (run/perturb.py):

    robustness.csv   model, run, then per perturbation: <p>_acc, <p>_drop, <p>_drop_lo,
                     <p>_drop_hi, <p>_agreement, <p>_n (percentages, two decimals; empty
                     where the run did not ask that perturbation)
    robustness.md    one cell per model and perturbation: perturbed accuracy, the drop
                     from standard in parentheses, and the agreement

Every figure is paired: standard against perturbed on the items graded in both, the drop's
95% interval clustered by image (metrics/perturbation.py). Deterministic: rows in the
leaderboard's order, perturbations by kind then level.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrcube.report.readers import RunData
from medrcube.report.robustness_panel import robustness_columns
from medrcube.run.perturbations import names as perturbation_names

DECIMALS = 2


@dataclass(frozen=True)
class RobustnessBoard:
    """Models (in leaderboard order) x perturbations, each cell a panel row or None."""

    variants: tuple[str, ...]
    rows: tuple[tuple[str, str, Mapping[str, dict[str, Any] | None]], ...]  # (label, run id, cells)

    def __bool__(self) -> bool:
        return bool(self.variants)


def _variant_key(v: str) -> tuple[int, float, str]:
    kind, _, rest = v.partition(":")
    kind = kind.partition("@")[0]
    level = rest.partition("@")[0]
    try:
        number = float(level) if level else 0.0
    except ValueError:
        number = 0.0
    order = perturbation_names()  # the registry's order
    return (order.index(kind) if kind in order else len(order), number, v)


def robustness_board(runs: Sequence[tuple[str, RunData]]) -> RobustnessBoard:
    """The board of (label, run) pairs given in leaderboard order."""
    per_run = [(label, run, robustness_columns(run.records, run.gate)) for label, run in runs]
    variants = tuple(sorted({v for _, _, cols in per_run for v in cols}, key=_variant_key))
    rows = tuple((label, run.run_id, {v: cols.get(v) for v in variants}) for label, run, cols in per_run)
    return RobustnessBoard(variants, rows)


def _p(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.{DECIMALS}f}"


def robustness_csv(board: RobustnessBoard) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    header = ["model", "run"]
    for v in board.variants:
        header += [f"{v}_acc", f"{v}_drop", f"{v}_drop_lo", f"{v}_drop_hi", f"{v}_agreement", f"{v}_n"]
    w.writerow(header)
    for label, run_id, cells in board.rows:
        line: list[Any] = [label, run_id]
        for v in board.variants:
            c = cells[v]
            line += ["", "", "", "", "", ""] if c is None else [
                _p(c["perturbed"]), _p(c["drop"]), _p(c["lo"]), _p(c["hi"]), _p(c["agreement"]), c["n"]]
        w.writerow(line)
    return buf.getvalue()


def cell_text(c: Mapping[str, Any] | None) -> str:
    """"71.20 (−6.40) · 88% same" or "–"."""
    if c is None or not c["n"]:
        return "–"
    d = 100 * (c["drop"] or 0.0)
    agree = "" if c["agreement"] is None else f" · {100 * c['agreement']:.0f}% same"
    return f"{_p(c['perturbed'])} ({'−' if d >= 0 else '+'}{abs(d):.{DECIMALS}f}){agree}"


def robustness_markdown(board: RobustnessBoard) -> str:
    lines = [
        "Accuracy (%) under each image perturbation; in parentheses the change from the standard variant on the "
        "same items (paired); then the share of answers that stayed the same option.",
        "",
        "| Model | " + " | ".join(f"`{v}`" for v in board.variants) + " |",
        "|:--|" + "--:|" * len(board.variants),
    ]
    for label, _, cells in board.rows:
        texts = " | ".join(cell_text(cells[v]) for v in board.variants)
        lines.append(f"| {label.replace('|', chr(92) + '|')} | {texts} |")
    return "\n".join(lines) + "\n"


def write_robustness(out: Path, runs: Sequence[tuple[str, RunData]],
                     write: Any) -> tuple[RobustnessBoard, dict[str, Path]]:
    """Compute the board and write its files with `write(path, text)`; no files without
    perturbation variants."""
    board = robustness_board(runs)
    if not board:
        return board, {}
    return board, {
        "robustness.csv": write(out / "robustness.csv", robustness_csv(board)),
        "robustness.md": write(out / "robustness.md", robustness_markdown(board)),
    }


def html_rows(board: RobustnessBoard) -> list[dict[str, Any]]:
    """The leaderboard page's rows: label and one cell per perturbation."""
    return [{"label": label, "run_id": run_id, "cells": [_html_cell(cells[v]) for v in board.variants]}
            for label, run_id, cells in board.rows]


def _html_cell(cell: dict[str, Any] | None) -> dict[str, Any]:
    if cell is None:
        return {"text": cell_text(cell), "title": "", "decision": None}
    return {"text": cell_text(cell), "title": f"drop 95% CI [{_p(cell['lo'])}, {_p(cell['hi'])}] points; n={cell['n']}",
            "decision": cell["accuracy_decision"]}
