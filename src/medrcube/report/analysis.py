"""Numbers behind the report and the leaderboard, computed with the metrics package.

Every accuracy is `metrics.accuracy.accuracy` over the records of a group and every
credibility number is `metrics.credibility.credibility`: this module only decides which
records form a group (an axis value, a cell, the high-level tasks) and lays the results
out. It adds the cross-model analyses of the paper:

- the model-by-cell correlation (Figure 3): Pearson correlation between cells across
  models, ordered by average-linkage hierarchical clustering on 1 - r (3a) or
  anatomically, part then modality then task (3b);
- the credibility quadrant (rationality against accuracy, one point per model) and the
  correlation of shortcut probability with high-level accuracy across models with its
  two-sided p-value (Figure 4), by `scipy.stats.pearsonr`.

scipy and pandas are imported inside the functions that need them, so that the single-run
report (run at the end of every run) does not pay for them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from medrcube.metrics.accuracy import accuracy, chance_level
from medrcube.metrics.credibility import Credibility, credibility
from medrcube.records import GradedRecord
from medrcube.taxonomy import MODALITIES, PARTS, TASK_NAMES, is_high_level, task_abbrev

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

Cell = tuple[str, str, str]  # (part, modality, task), as GradedRecord.cell

AXES = ("task", "modality", "part")
AXIS_TITLES = {"task": "Task", "modality": "Modality", "part": "Anatomical part"}
CANONICAL = {"task": TASK_NAMES, "modality": MODALITIES, "part": PARTS}
OVERALL = "Overall"


# -- ordering ---------------------------------------------------------------------------------


def ordered(values: Iterable[str], canonical: Sequence[str]) -> list[str]:
    """Values in the canonical order (the paper's), then any others (a site cube's) sorted."""
    values = set(values)
    rank = {v: i for i, v in enumerate(canonical)}
    return sorted(values, key=lambda v: (rank.get(v, len(rank)), v))


def cell_id(cell: Cell) -> str:
    """`Chest/X-Ray/Disease Diagnosis`: the gate's check id of a cell."""
    return "/".join(cell)


def cell_short(cell: Cell) -> str:
    """`Chest/X-Ray/DD`: a cell label short enough for a heatmap axis."""
    return f"{cell[0]}/{cell[1]}/{task_abbrev(cell[2])}"


def anatomical_key(cell: Cell) -> tuple[Any, ...]:
    """Sort key of the anatomical order (Figure 3b): part, then modality, then task."""
    p, m, t = cell
    return (_rank(p, PARTS), p, _rank(m, MODALITIES), m, _rank(t, TASK_NAMES), t)


def _rank(value: str, canonical: Sequence[str]) -> int:
    try:
        return canonical.index(value)
    except ValueError:
        return len(canonical)


# -- one run ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stat:
    """Accuracy of one group: the metrics package's numbers, or a summary's n/correct."""

    n: int
    correct: int
    acc: float | None
    # 95% interval clustered by image, the one the gate decides with (metrics.clustered;
    # None when read from a bare summary)
    lo: float | None = None
    hi: float | None = None
    chance: float | None = None  # mean 1/n_options over the graded records

    @classmethod
    def of(cls, records: Sequence[GradedRecord]) -> Stat:
        from medrcube.metrics.clustered import clustered_accuracy

        a = accuracy(records)
        ci = clustered_accuracy(records)
        return cls(a.n, a.correct, a.acc, ci.lo, ci.hi, chance_level(records))


@dataclass
class Profile:
    """One run's standard-variant numbers, as Table 1 and the report lay them out."""

    overall: Stat
    axes: dict[str, dict[str, Stat]]  # axis -> value -> Stat
    cells: dict[Cell, Stat]
    high_level: Stat | None
    credibility: Credibility | None  # None without per-image records
    extra: dict[str, Any] = field(default_factory=dict)


def group_by(records: Iterable[GradedRecord]) -> dict[Cell, list[GradedRecord]]:
    out: dict[Cell, list[GradedRecord]] = defaultdict(list)
    for r in records:
        out[r.cell].append(r)
    return out


def profile(records: Sequence[GradedRecord], *, with_credibility: bool = True) -> Profile:
    """Accuracy overall, per axis value, per cell and on the high-level tasks, and the
    credibility groups, of `records` (pass one variant's records)."""
    cells = group_by(records)
    axes: dict[str, dict[str, list[GradedRecord]]] = {a: defaultdict(list) for a in AXES}
    high: list[GradedRecord] = []
    for (part, modality, task), rs in cells.items():
        axes["part"][part].extend(rs)
        axes["modality"][modality].extend(rs)
        axes["task"][task].extend(rs)
        if is_high_level(task):
            high.extend(rs)
    return Profile(
        overall=Stat.of(records),
        axes={a: {v: Stat.of(rs) for v, rs in groups.items()} for a, groups in axes.items()},
        cells={c: Stat.of(rs) for c, rs in cells.items()},
        high_level=Stat.of(high) if high else None,
        credibility=credibility(records) if with_credibility else None,
    )


_SLICE_AXIS = {"by_task": ("task", "task"), "by_modality": ("modality", "modality"), "by_parts": ("part", "parts")}


def profile_from_summary(summary: Mapping[str, Any]) -> Profile:
    """A Profile from a (canonical) metrics_summary.json alone: accuracies without intervals,
    no credibility. High-level accuracy is pooled from the summary's task groups."""

    def stat(g: Mapping[str, Any]) -> Stat:
        n, c = int(g["n"]), int(g["correct"])
        return Stat(n, c, c / n if n else None)

    axes: dict[str, dict[str, Stat]] = {a: {} for a in AXES}
    slices = summary.get("slice_results") or {}
    for name, (axis, label) in _SLICE_AXIS.items():
        for key, g in (slices.get(name) or {}).items():
            axes[axis][key.removeprefix(f"{label}=")] = stat(g)
    cells: dict[Cell, Stat] = {}
    for key, g in ((summary.get("voxel_results") or {}).get("by_task_modality_parts") or {}).items():
        parts = dict(p.partition("=")[::2] for p in key.split("|"))
        cells[(parts.get("parts", "?"), parts.get("modality", "?"), parts.get("task", "?"))] = stat(g)
    high = [s for t, s in axes["task"].items() if is_high_level(t)]
    hn, hc = sum(s.n for s in high), sum(s.correct for s in high)
    return Profile(
        overall=stat(summary["global"]),
        axes=axes,
        cells=cells,
        high_level=Stat(hn, hc, hc / hn if hn else None) if high else None,
        credibility=None,
    )


# -- Table 1 columns --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Column:
    header: str  # "Overall", "MR", "CT", "Brain", ...
    axis: str | None  # None for Overall
    value: str | None  # the canonical axis value


def table_columns(profiles: Iterable[Profile]) -> list[Column]:
    """Overall; the tasks (MR, VR, IPR, OR, RG, DD, AD, SG); the modalities (CT, X-Ray,
    MRI, US); the parts (Brain, Chest, Heart, Lungs, Breast): the paper's Table 1. The
    canonical columns are always present (an empty one reads "-"); values outside the
    taxonomy found in any run follow their group, sorted."""
    profiles = list(profiles)
    cols = [Column(OVERALL, None, None)]
    for axis in AXES:
        seen = {v for p in profiles for v in p.axes[axis]}
        for value in ordered(seen | set(CANONICAL[axis]), CANONICAL[axis]):
            cols.append(Column(task_abbrev(value) if axis == "task" else value, axis, value))
    return cols


def column_stat(p: Profile, col: Column) -> Stat | None:
    if col.axis is None:
        return p.overall
    return p.axes[col.axis].get(col.value or "")


# -- Figure 3: model-by-cell correlation ----------------------------------------------------


@dataclass
class CellCorrelation:
    """Pearson correlation between cells across models, and its two orders."""

    matrix: pd.DataFrame  # models x cells accuracy (the input, cells kept)
    corr: pd.DataFrame  # cells x cells, anatomical order
    linkage: np.ndarray  # scipy linkage matrix over the anatomical order
    clustered: list[Cell]  # dendrogram leaf order (Figure 3a)
    anatomical: list[Cell]  # part, modality, task (Figure 3b)
    dropped: dict[str, list[Cell]]  # reason -> cells left out

    def clusters(self, k: int) -> dict[Cell, int]:
        """Cut the dendrogram into at most `k` clusters: cell -> cluster number (1..k)."""
        from scipy.cluster.hierarchy import fcluster

        labels = fcluster(self.linkage, t=k, criterion="maxclust")
        return {c: int(x) for c, x in zip(self.anatomical, labels, strict=True)}


MIN_MODELS_FOR_CORRELATION = 3


def cell_correlation(matrix: pd.DataFrame, *, method: str = "average") -> CellCorrelation:
    """Correlate the columns (cells) of a models x cells accuracy matrix across its rows.

    Cells missing in any model, and cells whose accuracy is the same for every model (no
    variance: r undefined), are left out and listed in `dropped`. The distance between
    two cells is 1 - r; `method` is the scipy linkage method (average, as is usual for
    correlation distances). Raises ValueError with fewer than 3 models or 2 usable cells.
    """
    import numpy as np
    from scipy.cluster.hierarchy import leaves_list, linkage
    from scipy.spatial.distance import squareform

    if matrix.shape[0] < MIN_MODELS_FOR_CORRELATION:
        raise ValueError(
            f"a correlation between cells across models needs at least {MIN_MODELS_FOR_CORRELATION} models, "
            f"got {matrix.shape[0]}"
        )
    cells = sorted(matrix.columns, key=anatomical_key)
    m = matrix[cells].astype(float)
    missing = [c for c in cells if m[c].isna().any()]
    m = m.drop(columns=missing)
    constant = [c for c in m.columns if float(np.nanstd(m[c].to_numpy())) == 0.0]
    m = m.drop(columns=constant)
    if m.shape[1] < 2:
        raise ValueError(
            f"fewer than 2 cells vary across the models ({len(missing)} missing in some model, "
            f"{len(constant)} with the same accuracy in every model)"
        )
    corr = m.corr(method="pearson")
    dist = np.clip(1.0 - corr.to_numpy(), 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    dist = (dist + dist.T) / 2.0  # exact symmetry for squareform
    z = linkage(squareform(dist, checks=False), method=method)
    order = [m.columns[i] for i in leaves_list(z)]
    return CellCorrelation(
        matrix=m,
        corr=corr,
        linkage=z,
        clustered=order,
        anatomical=list(m.columns),
        dropped={"missing in some model": missing, "same accuracy in every model": constant},
    )


# -- Figure 4: credibility across models ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Correlation:
    """Pearson r across models, its two-sided p-value, and the number of models."""

    r: float
    p: float
    n: int
    slope: float
    intercept: float


def pearson(x: Sequence[float], y: Sequence[float]) -> Correlation | None:
    """Pearson correlation of paired values (None-free), or None when it is undefined
    (fewer than 3 pairs, or a constant side)."""
    import numpy as np
    from scipy.stats import pearsonr

    if len(x) != len(y):
        raise ValueError("x and y must pair up")
    if len(x) < 3:
        return None
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.ptp(xa) == 0.0 or np.ptp(ya) == 0.0:
        return None
    res = pearsonr(xa, ya)
    slope, intercept = np.polyfit(xa, ya, 1)
    r, p = float(res.statistic), float(res.pvalue)
    if not (math.isfinite(r) and math.isfinite(p)):
        return None
    return Correlation(r=r, p=p, n=len(x), slope=float(slope), intercept=float(intercept))
