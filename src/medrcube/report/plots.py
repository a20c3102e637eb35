"""matplotlib figures of the report and the leaderboard (Agg backend, no display needed).

Each figure is written as PNG and SVG under a `plots/` directory and handed back as PNG
bytes, which the HTML pages embed as data URIs so that a page opens offline on its own.
SVG output is made reproducible (no date, fixed id salt), so that rerunning a report on
the same runs rewrites the same SVG files.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medrcube.report.analysis import AXIS_TITLES, Cell, Stat, cell_short
from medrcube.taxonomy import task_abbrev

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from medrcube.report.analysis import CellCorrelation, Correlation

DPI = 110
CMAP = "RdYlGn"  # accuracy: red (0) through yellow to green (1)
MARKS = {"pass": "✓", "fail": "✗", "undecided": "?", "skip": "?", "error": "!"}
# A cell's hue is its verdict; how strong it is, the certainty of its interval (a narrow
# interval: a saturated colour; a wide one, a handful of items: nearly white). A point
# estimate over a few items never paints a cell dark green.
VERDICT_HUES = {"pass": "#1a9850", "fail": "#d73027", "undecided": "#9e9e9e", "skip": "#9e9e9e", "error": "#f28e2b"}
EMPTY = "#eeeeee"
INK = "#222222"


def use_agg() -> None:
    """Select the Agg backend and the house's rcParams; a caller imports matplotlib.pyplot after it."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams.update(
        {
            "svg.hashsalt": "medrcube",  # stable element ids in SVG output
            "svg.fonttype": "none",  # text stays text: smaller, faster, searchable SVG
            "font.size": 9,
            "axes.titlesize": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "figure.dpi": DPI,
        }
    )


@dataclass(frozen=True)
class Plot:
    """A saved figure: its name, the PNG bytes (for a data URI) and the files written."""

    name: str
    png: bytes
    files: tuple[Path, ...]

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


def save(fig: Figure, name: str, out_dir: Path | None, *, svg: bool = True, tight: bool = True) -> Plot:
    """Render `fig` to PNG (and SVG) in `out_dir` (when given), close it, return the Plot.

    `tight=False` keeps the figure's own layout: one draw less per format, for the
    figures of the single-run report whose layout is set by hand (it runs after every run)."""
    use_agg()
    import matplotlib.pyplot as plt
    bbox = "tight" if tight else None
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches=bbox, metadata={"Software": None})
    png = buf.getvalue()
    files: list[Path] = []
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        png_path = out_dir / f"{name}.png"
        png_path.write_bytes(png)
        files.append(png_path)
        if svg:
            svg_path = out_dir / f"{name}.svg"
            fig.savefig(svg_path, format="svg", bbox_inches=bbox, metadata={"Date": None, "Creator": None})
            files.append(svg_path)
    plt.close(fig)
    return Plot(name, png, tuple(files))


def _text_colour(rgba: Sequence[float]) -> str:
    r, g, b = rgba[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def _pct(x: float | None, digits: int = 0) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}%"


# -- the single-run report ------------------------------------------------------------------


def empty_figure(message: str, *, size: tuple[float, float] = (6.0, 1.2)) -> Figure:
    """A figure that only says why there is nothing to draw (no graded answer, say), so
    that a figure asked for with no data is an explanation instead of an exception."""
    use_agg()
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=size)
    fig.text(0.5, 0.5, message, ha="center", va="center", color=INK, style="italic", wrap=True)
    return fig


def accuracy_colour(acc: float | None) -> tuple[str, str]:
    """(background, text) hex colours of an accuracy on the heatmap scale; grey when None."""
    if acc is None:
        return EMPTY, INK
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    rgba = colormaps[CMAP](max(0.0, min(1.0, acc)))
    return to_hex(rgba), _text_colour(rgba)


def cell_colour(verdict: str | None, lo: float | None, hi: float | None) -> tuple[str, str]:
    """(background, text) of a heatmap cell: the verdict's hue (without a gate verdict,
    the accuracy scale at the interval's *lower* end), blended towards white as the
    interval widens, so that strength of colour is strength of evidence."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex, to_rgba

    if lo is None or hi is None:
        return EMPTY, INK
    hue = VERDICT_HUES.get(verdict or "")
    base = to_rgba(hue) if hue else colormaps[CMAP](max(0.0, min(1.0, lo)))
    strength = max(0.12, min(1.0, 1.0 - (hi - lo) / 0.6))  # width 0.6 (n of 1 to 3): almost white
    r, g, b = (1.0 - strength * (1.0 - c) for c in base[:3])
    rgba = (r, g, b, 1.0)
    return to_hex(rgba), _text_colour(rgba)


def _heatmap_panel(ax: Any, modality: str, parts: Sequence[str], tasks: Sequence[str],
                   cells: Mapping[Cell, Stat], verdicts: Mapping[Cell, str]) -> None:
    import numpy as np
    from matplotlib.colors import to_rgb

    grid = np.ones((len(parts), len(tasks), 3))
    for i, p in enumerate(parts):
        for j, t in enumerate(tasks):
            s = cells.get((p, modality, t))
            bg = cell_colour(verdicts.get((p, modality, t)), s.lo, s.hi)[0] if s is not None and s.acc is not None \
                else EMPTY
            grid[i, j] = to_rgb(bg)
    ax.imshow(grid, aspect="auto")
    for i, p in enumerate(parts):
        for j, t in enumerate(tasks):
            s = cells.get((p, modality, t))
            if s is None:
                continue
            mark = MARKS.get(verdicts.get((p, modality, t), ""), "")
            colour = cell_colour(verdicts.get((p, modality, t)), s.lo, s.hi)[1] if s.acc is not None else INK
            interval = f"\n[{_pct(s.lo)}, {_pct(s.hi)}]" if s.acc is not None else ""
            ax.text(j, i, f"{_pct(s.acc)}{(' ' + mark) if mark else ''}{interval}\nn={s.n}", ha="center",
                    va="center", fontsize=7, color=colour, linespacing=1.2)
    ax.set_xticks(range(len(tasks)), [task_abbrev(t) for t in tasks])
    ax.set_yticks(range(len(parts)), list(parts))
    ax.tick_params(length=0)
    ax.xaxis.tick_top()
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.set_xticks(np.arange(-0.5, len(tasks)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(parts)), minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    ax.set_title(modality, loc="left", fontweight="bold", pad=16)


def cube_heatmaps(
    modalities: Sequence[str],
    parts: Sequence[str],
    tasks: Sequence[str],
    cells: Mapping[Cell, Stat],
    verdicts: Mapping[Cell, str],
) -> Figure:
    """The cube as a figure: one part x task panel per modality, shaded by verdict and interval (cell_colour), each
    cell labelled with the accuracy, n and the gate's verdict mark (✓ pass, ✗ fail,
    ? insufficient evidence, ! error). Cells without items are grey."""
    if not modalities or not parts or not tasks:
        return empty_figure("no cell to draw: the run has no records")
    use_agg()
    import matplotlib.pyplot as plt
    cols = 2 if len(modalities) > 1 else 1
    rows = -(-len(modalities) // cols)
    w, h = 0.75 * len(tasks) + 1.2, 0.55 * len(parts) + 0.7
    fig, axs = plt.subplots(rows, cols, figsize=(cols * w, rows * h), squeeze=False)
    for k, ax in enumerate(axs.flat):
        if k < len(modalities):
            _heatmap_panel(ax, modalities[k], parts, tasks, cells, verdicts)
        else:
            ax.set_axis_off()
    fig.subplots_adjust(left=0.1, right=0.98, top=0.9, bottom=0.04, wspace=0.3, hspace=0.45)
    return fig


def axis_bars(axes: Mapping[str, Mapping[str, Stat]], order: Mapping[str, Sequence[str]]) -> Figure:
    """Accuracy per axis value with the Wilson 95% interval; a dashed tick marks each bar's
    chance level (the mean of 1/n_options over its items). Values with no graded item
    (every image restricted, say) have no bar: the page's table lists them."""
    use_agg()
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    shown = {a: [v for v in order.get(a, ()) if a in axes and axes[a][v].n > 0] for a in ("task", "modality", "part")}
    names = [a for a in ("task", "modality", "part") if shown[a]]
    if not names:  # every request failed, say: no value has a graded item to draw
        return empty_figure("no graded answer: no accuracy to draw")
    widths = [max(len(shown[a]), 2) for a in names]
    fig, subplots = plt.subplots(1, len(names), figsize=(1.0 + 0.62 * sum(widths), 3.4), squeeze=False,
                                 gridspec_kw={"width_ratios": widths}, sharey=True)
    for ax, axis in zip(subplots[0], names, strict=True):
        values = shown[axis]
        stats = [axes[axis][v] for v in values]
        acc = [100 * (s.acc or 0.0) for s in stats]
        lo = [100 * max(0.0, (s.acc or 0.0) - (s.lo if s.lo is not None else s.acc or 0.0)) for s in stats]
        hi = [100 * max(0.0, (s.hi if s.hi is not None else s.acc or 0.0) - (s.acc or 0.0)) for s in stats]
        xs = list(range(len(values)))
        ax.bar(xs, acc, color="#4c78a8", width=0.7, yerr=[lo, hi], capsize=3, ecolor="#333333",
               error_kw={"linewidth": 1})
        for x, s in zip(xs, stats, strict=True):
            if s.chance is not None:
                ax.hlines(100 * s.chance, x - 0.42, x + 0.42, colors="black", linestyles="--", linewidth=1.2)
        # Multi-word values ("Lower Limb") wrap so that neighbouring labels never overlap.
        labels = [f"{task_abbrev(v) if axis == 'task' else v.replace(' ', chr(10))}\nn={s.n}"
                  for v, s in zip(values, stats, strict=True)]
        ax.set_xticks(xs, labels, fontsize=7.5)
        ax.tick_params(axis="x", length=0)
        ax.set_title(AXIS_TITLES[axis])
        ax.set_ylim(0, 100)
        ax.yaxis.grid(True, color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
    subplots[0][0].set_ylabel("accuracy (%)")
    subplots[0][-1].legend(
        handles=[Line2D([], [], color="black", linestyle="--", label="chance level"),
                 Line2D([], [], color="#333333", marker="|", linestyle="", markersize=8, label="95% interval")],
        loc="upper right", fontsize=7, frameon=False)
    fig.subplots_adjust(left=0.06, right=0.99, top=0.9, bottom=0.16, wspace=0.08)
    return fig


def blind_bars(tasks: Sequence[str], standard: Mapping[str, Stat], blind: Mapping[str, Stat]) -> Figure:
    """Accuracy with the image (standard) against without it (blind), per task and overall."""
    import numpy as np

    use_agg()
    import matplotlib.pyplot as plt
    labels = [task_abbrev(t) for t in tasks]
    xs = np.arange(len(tasks))
    fig, ax = plt.subplots(figsize=(1.2 + 0.75 * len(tasks), 3.0))
    s = [100 * (standard[t].acc or 0.0) if t in standard else 0.0 for t in tasks]
    b = [100 * (blind[t].acc or 0.0) if t in blind else 0.0 for t in tasks]
    ax.bar(xs - 0.19, s, width=0.38, color="#4c78a8", label="standard (with image)")
    ax.bar(xs + 0.19, b, width=0.38, color="#f58518", label="blind (text only)")
    ax.set_xticks(xs, labels)
    ax.set_ylim(0, 100)
    ax.set_ylabel("accuracy (%)")
    ax.yaxis.grid(True, color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(fontsize=7, frameon=False, ncols=2, loc="upper right")
    fig.subplots_adjust(left=0.12, right=0.98, top=0.95, bottom=0.12)
    return fig


# -- the leaderboard ------------------------------------------------------------------------


def correlation_heatmap(cc: CellCorrelation, *, clustered: bool) -> Figure:
    """Figure 3: the cell x cell Pearson matrix, in dendrogram order with the dendrogram on
    top (3a) or in anatomical order with part boundaries drawn (3b)."""
    use_agg()
    import matplotlib.pyplot as plt
    order = cc.clustered if clustered else cc.anatomical
    k = len(order)
    mat = cc.corr.loc[order, order].to_numpy()
    side = min(14.0, max(4.5, 0.16 * k + 2.5))
    font = max(4.0, min(8.0, 300.0 / max(k, 1)))
    if clustered:
        fig = plt.figure(figsize=(side + 1.0, side + 1.4))
        gs = fig.add_gridspec(2, 2, height_ratios=[1.2, side], width_ratios=[side, 0.25], hspace=0.02, wspace=0.03)
        dax = fig.add_subplot(gs[0, 0])
        ax = fig.add_subplot(gs[1, 0])
        cax = fig.add_subplot(gs[1, 1])
        from scipy.cluster.hierarchy import dendrogram

        dendrogram(cc.linkage, ax=dax, no_labels=True, color_threshold=0, above_threshold_color="#555555")
        dax.set_axis_off()
        dax.set_title("Cell correlation across models, hierarchical clustering (average linkage, 1 - r)",
                      loc="left")
    else:
        fig = plt.figure(figsize=(side + 1.0, side + 0.4))
        gs = fig.add_gridspec(1, 2, width_ratios=[side, 0.25], wspace=0.03)
        ax = fig.add_subplot(gs[0, 0])
        cax = fig.add_subplot(gs[0, 1])
        ax.set_title("Cell correlation across models, anatomical order (part, modality, task)", loc="left")
    im = ax.imshow(mat, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    labels = [cell_short(c) for c in order]
    ax.set_xticks(range(k), labels, rotation=90, fontsize=font)
    ax.set_yticks(range(k), labels, fontsize=font)
    ax.tick_params(length=0)
    if not clustered:
        parts = [c[0] for c in order]
        for i in range(1, k):
            if parts[i] != parts[i - 1]:
                ax.axhline(i - 0.5, color="black", linewidth=0.8)
                ax.axvline(i - 0.5, color="black", linewidth=0.8)
    cb = fig.colorbar(im, cax=cax)
    cb.set_label("Pearson r")
    if clustered:
        # Keep the dendrogram's leaves over the matrix columns.
        dax.set_xlim(0, 10 * k)
    return fig


def credibility_quadrant(points: Sequence[tuple[str, float, float]]) -> Figure:
    """Rationality against overall accuracy, one labelled point per model; dashed lines at
    the medians split the plane into the four quadrants."""
    import numpy as np

    use_agg()
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.2, 4.6))
    xs = np.array([100 * p[1] for p in points])
    ys = np.array([100 * p[2] for p in points])
    ax.scatter(xs, ys, s=36, color="#4c78a8", zorder=3)
    for (label, _, _), x, y in zip(points, xs, ys, strict=True):
        ax.annotate(label, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7)
    mx, my = float(np.median(xs)), float(np.median(ys))
    ax.axvline(mx, color="#888888", linestyle="--", linewidth=0.8)
    ax.axhline(my, color="#888888", linestyle="--", linewidth=0.8)
    pad_x = max(2.0, 0.15 * float(np.ptp(xs)))
    pad_y = max(2.0, 0.15 * float(np.ptp(ys)))
    ax.set_xlim(xs.min() - pad_x, xs.max() + 2.5 * pad_x)
    ax.set_ylim(ys.min() - pad_y, ys.max() + pad_y)
    for x, y, ha, va, text in ((0.99, 0.99, "right", "top", "accurate, grounded"), (0.99, 0.01, "right", "bottom", "accurate, shortcut-prone"),
                               (0.01, 0.99, "left", "top", "weak, grounded"), (0.01, 0.01, "left", "bottom", "weak, lucky")):  # fmt: skip
        ax.text(x, y, text, transform=ax.transAxes, ha=ha, va=va, fontsize=7, color="#777777", style="italic")
    ax.set_xlabel("overall accuracy (%)")
    ax.set_ylabel("rationality = 1 - luck rate (%)")
    ax.set_title("Credibility quadrant (dashed: medians across models)", loc="left")
    fig.tight_layout()
    return fig


def shortcut_scatter(points: Sequence[tuple[str, float, float]], corr: Correlation | None) -> Figure:
    """Shortcut probability against high-level accuracy, one point per model, with the
    least-squares line and Pearson r, p (Figure 4)."""
    import numpy as np

    use_agg()
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.2, 4.6))
    xs = np.array([100 * p[1] for p in points])
    ys = np.array([100 * p[2] for p in points])
    ax.scatter(xs, ys, s=36, color="#e45756", zorder=3)
    for (label, _, _), x, y in zip(points, xs, ys, strict=True):
        ax.annotate(label, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7)
    title = "Shortcut probability against high-level accuracy"
    if corr is not None:
        line_x = np.linspace(xs.min(), xs.max(), 2)
        ax.plot(line_x, corr.slope * line_x + 100 * corr.intercept, color="#555555", linewidth=1)
        title += f"\nPearson r = {corr.r:.3f}, p = {format_p(corr.p)}, n = {corr.n} models"
    ax.set_title(title, loc="left")
    ax.set_xlabel("high-level accuracy (AD, DD, SG) (%)")
    ax.set_ylabel("shortcut probability D / (C + D) (%)")
    pad = max(2.0, 0.15 * float(np.ptp(xs)))
    ax.set_xlim(xs.min() - pad, xs.max() + 2.5 * pad)
    fig.tight_layout()
    return fig


def format_p(p: float) -> str:
    """A p-value as papers print it: 3 significant digits, or an upper bound when tiny."""
    if p < 1e-5:
        return f"< 10^{math.floor(math.log10(max(p, 1e-300))) + 1}"
    return f"{p:.3g}"
