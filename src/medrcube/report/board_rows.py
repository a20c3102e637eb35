"""The leaderboard's computation: the row types (Row, BlindRow, LeaderboardResult) and the
pure functions that turn runs into tables (accuracy per column, ranks, order, the cell
matrix, credibility per model). No file is written here and no text is formatted:
board_format.py formats, leaderboard.py writes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medrcube.report.analysis import (
    CellCorrelation,
    Column,
    Correlation,
    Profile,
    anatomical_key,
    column_stat,
    profile,
    profile_from_summary,
)
from medrcube.report.readers import REFERENCE_SUMMARY, RunData

if TYPE_CHECKING:
    import pandas as pd

DECIMALS = 2  # accuracies are printed as percentages with this many decimals


class MixedRunsError(ValueError):
    """Runs that must not share a leaderboard (different cubes or prompt templates)."""


def _who(run: RunData) -> str:
    return f"{run.label} ({run.path})"


def check_compatible(runs: Sequence[RunData]) -> list[str]:
    """Refuse runs made on different cubes or with different prompt templates (MixedRunsError
    naming both runs and the field); return notes on what could not be verified."""
    notes: list[str] = []
    for name, values in (("cube fingerprint", [r.cube_fingerprint for r in runs]), ("prompt template", [r.template for r in runs])):
        known = [(r, v) for r, v in zip(runs, values, strict=True) if v]
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


def is_present(v: Any) -> bool:
    """A value a board can show: not None and not NaN."""
    return v is not None and not (isinstance(v, float) and math.isnan(v))
