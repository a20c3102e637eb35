"""Forest plots of the subgroup checks: per attribute, each stratum's accuracy and its
interval against the bound, coloured by the gate's verdict, drawn from gate.json.

The plot is a small inline SVG written here (no plotting library: the page is drawn after
the run's exit status, and an SVG of a few lines per stratum costs nothing). It decides
nothing: the verdicts are the gate's (gate/subgroups.py), as gate.json states them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "undecided": "#9e9e9e", "error": "#6a1b9a"}
WIDTH, LABEL_W, ROW_H = 560, 170, 22


def _x(v: float) -> float:
    return LABEL_W + max(0.0, min(1.0, v)) * (WIDTH - LABEL_W - 20)


def forest_svg(attribute: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """One attribute's forest plot: rows of {value, observed, interval, bound, verdict, n, required}."""
    h = 30 + ROW_H * len(rows) + 24
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="forest" width="{WIDTH}" height="{h}" '
             f'role="img" aria-label="accuracy per {escape(attribute)}">',
             f'<text x="4" y="16" font-size="12" font-weight="bold">accuracy by {escape(attribute)}</text>']
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = _x(t)
        parts.append(f'<line x1="{x:.1f}" y1="24" x2="{x:.1f}" y2="{h - 20}" stroke="#eee"/>'
                     f'<text x="{x:.1f}" y="{h - 6}" font-size="10" text-anchor="middle">{t:.2f}</text>')
    bounds: set[float] = {float(b) for r in rows if isinstance(b := r.get("bound"), int | float)}
    for b in sorted(bounds):
        x = _x(b)
        parts.append(f'<line x1="{x:.1f}" y1="24" x2="{x:.1f}" y2="{h - 20}" stroke="#555" stroke-dasharray="4 3"/>')
    for i, r in enumerate(rows):
        y = 30 + ROW_H * i + ROW_H / 2
        colour = COLOURS.get(str(r.get("verdict")), "#9e9e9e")
        label = f"{r.get('value')} (n={r.get('n')})" + ("" if r.get("required", True) else " *")
        parts.append(f'<text x="4" y="{y + 4:.1f}" font-size="11">{escape(label)}</text>')
        iv, obs = r.get("interval"), r.get("observed")
        if iv and len(iv) == 2 and all(isinstance(v, int | float) for v in iv):
            parts.append(f'<line x1="{_x(iv[0]):.1f}" y1="{y:.1f}" x2="{_x(iv[1]):.1f}" y2="{y:.1f}" '
                         f'stroke="{colour}" stroke-width="2"/>')
        if isinstance(obs, int | float):
            parts.append(f'<rect x="{_x(obs) - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{colour}">'
                         f'<title>{escape(str(r.get("value")))}: {obs:.3f} ({escape(str(r.get("verdict")))})</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


def subgroup_figures(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """One forest plot per attribute of the `subgroup` checks (ids subgroup/ATTRIBUTE/VALUE)."""
    by_attr: dict[str, list[dict[str, Any]]] = {}
    for c in checks:
        parts = str(c.get("id") or "").split("/", 2)
        if len(parts) == 3 and parts[0] == "subgroup":
            by_attr.setdefault(parts[1], []).append({**c, "value": parts[2]})
    return [forest_svg(a, rows) for a, rows in by_attr.items()]
