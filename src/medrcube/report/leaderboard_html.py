"""leaderboard.html: the leaderboard's tables and figures on one self-contained page."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from medrcube.report.analysis import Column, cell_id
from medrcube.report.html import environment
from medrcube.report.plots import format_p

if TYPE_CHECKING:
    from medrcube.report.board_rows import BlindRow, LeaderboardResult, Row


def _groups(columns: Sequence[Column]) -> list[dict[str, Any]]:
    names = {None: "", "task": "Task", "modality": "Modality", "part": "Anatomical part"}
    out: list[dict[str, Any]] = []
    for c in columns:
        name = names[c.axis]
        if not out or out[-1]["name"] != name:
            out.append({"name": name, "span": 0})
        out[-1]["span"] += 1
    return out


def _value(v: float, digits: int = 2) -> str:
    return "–" if math.isnan(v) else f"{v:.{digits}f}"


def _table_rows(result: LeaderboardResult, columns: Sequence[Column], rows: Sequence[Row]) -> list[dict[str, Any]]:
    by_label = {r.label: r for r in rows}
    firsts = _first_of_group(columns)
    out = []
    for label in result.order:
        cells = []
        for c in columns:
            v = result.table.at[label, c.header]
            rk = result.ranks.at[label, c.header]
            cells.append({
                "text": _value(v),
                "rank": 0 if math.isnan(rk) else int(rk),
                "title": f"{label}, {c.header}: n={int(result.counts.at[label, c.header])}",
                "sep": c.header in firsts,
            })
        run = by_label[label].run
        out.append({"label": label, "run_id": run.run_id, "kind": run.kind, "cells": cells})
    return out


def _first_of_group(columns: Sequence[Column]) -> set[str]:
    firsts, last = set(), object()
    for c in columns:
        if c.axis != last:
            firsts.add(c.header)
            last = c.axis
    return firsts


def _blind_rows(result: LeaderboardResult, columns: Sequence[Column], blind: Sequence[BlindRow],
                order: Sequence[str]) -> list[dict[str, Any]]:
    if result.text_only is None:
        return []
    firsts = _first_of_group(columns)
    by_label = {b.label: b for b in blind}
    out = []
    for label in order:
        b = by_label[label]
        cells = []
        for c in columns:
            text = _value(result.text_only.at[label, c.header])
            if c.header == "Overall" and b.drop is not None:
                d = round(100 * b.drop, 2)
                text += f" ({'−' if d >= 0 else '+'}{abs(d):.2f})"
            cells.append({"text": text, "rank": 0, "title": "", "sep": c.header in firsts})
        out.append({"label": label, "run_id": b.run.run_id, "kind": b.run.kind, "cells": cells})
    return out


def _credibility_rows(result: LeaderboardResult) -> list[dict[str, Any]]:
    cred = result.credibility
    out = []
    for label in result.order:
        f = cred.loc[label]
        out.append({"label": label, **{k: (None if _missing(f[k]) else f[k]) for k in cred.columns}})
    return out


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _shortcut_points(result: LeaderboardResult) -> int:
    """Models with both a high-level accuracy and a shortcut probability (the scatter's points)."""
    cred = result.credibility
    return sum(
        1 for label in result.order
        if not _missing(cred.at[label, "high_level_acc"]) and not _missing(cred.at[label, "shortcut_prob"])
    )


def _robustness(result: LeaderboardResult) -> dict[str, Any] | None:
    from medrcube.report.robustness_board import html_rows

    board = result.robustness
    return {"variants": list(board.variants), "rows": html_rows(board)} if board else None


def render_leaderboard(
    result: LeaderboardResult,
    rows: Sequence[Row],
    columns: Sequence[Column],
    blind: Sequence[BlindRow],
    blind_order: Sequence[str],
    figures: Mapping[str, str],
) -> str:
    env = environment()
    corr = result.correlation
    clusters = None
    if corr is not None and len(corr.anatomical) >= 4:
        k = 2
        cut = corr.clusters(k)
        clusters = [
            {"cluster": i, "cells": [cell_id(c) for c in corr.clustered if cut[c] == i]} for i in range(1, k + 1)
        ]
    return env.get_template("leaderboard.html.j2").render(
        title="medrcube leaderboard",
        groups=_groups(columns),
        headers=[{"text": c.header, "title": c.value or "all items", "sep": c.header in _first_of_group(columns)}
                 for c in columns],
        rows=_table_rows(result, columns, rows),
        blind_rows=_blind_rows(result, columns, blind, blind_order),
        credibility=_credibility_rows(result),
        shortcut=result.shortcut,
        shortcut_points=_shortcut_points(result),
        shortcut_p=format_p(result.shortcut.p) if result.shortcut is not None else None,
        correlation=corr,
        clusters=clusters,
        figures={k: figures.get(k) for k in ("clustered", "anatomical", "quadrant", "shortcut")},
        notes=result.notes,
        n_runs=len(rows),
        robustness=_robustness(result),
    )
