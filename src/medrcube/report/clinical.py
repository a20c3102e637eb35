"""The clinical panel of report.html (docs/clinical.md): per-finding sensitivity and specificity
in the diagnosis cells, calibration (a reliability diagram per task level), selective
prediction (a risk-coverage plot) and the abstain variant's deferrals and utility.

Every number is recomputed from the run's records with the metrics package, as the rest
of the page is; a section appears only when the run has what it needs (diagnosis items
with option texts, records with a confidence, an abstain variant).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medrcube.metrics.calibration import Calibration, by_level
from medrcube.metrics.findings import FindingStats, findings_by_cell
from medrcube.metrics.selective import abstention_summary, selective_summary
from medrcube.records import GradedRecord

if TYPE_CHECKING:
    from matplotlib.figure import Figure

LEVEL_TITLES = {"all": "all tasks", "low": "low level (perception)", "mid": "mid level", "high": "high level (diagnosis)"}
FINDING_ROWS = 40  # at most this many finding rows in the table (weakest sensitivity first)


def reliability_figure(levels: Mapping[str, Calibration]) -> Figure:
    """The reliability diagram: accuracy against mean confidence per equal-mass bin, one
    panel per task level, the diagonal being perfect calibration."""
    from medrcube.report.plots import use_agg

    use_agg()
    import matplotlib.pyplot as plt
    names = [k for k in ("all", "low", "mid", "high") if k in levels]
    fig, axes = plt.subplots(1, len(names), figsize=(2.6 * len(names) + 0.4, 2.8), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        cal = levels[name]
        ax.plot([0, 1], [0, 1], color="#999999", linewidth=0.8, linestyle="--")
        xs = [b["confidence"] for b in cal.bins]
        ys = [b["accuracy"] for b in cal.bins]
        lo = [b["accuracy"] - b["ci95"][0] for b in cal.bins]
        hi = [b["ci95"][1] - b["accuracy"] for b in cal.bins]
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o-", color="#4c78a8", markersize=3, linewidth=1, capsize=2)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(f"{LEVEL_TITLES[name]}\nECE {cal.ece:.3f}, CE {cal.ce:.3f} (n={cal.n})", fontsize=8)
        ax.set_xlabel("confidence")
        ax.set_aspect("equal")
    axes[0][0].set_ylabel("accuracy")
    fig.subplots_adjust(left=0.08, right=0.98, top=0.82, bottom=0.17, wspace=0.35)
    return fig


def risk_coverage_figure(curve: Mapping[str, Sequence[float]], error_rate: float, label: str = "") -> Figure:
    """Risk (error rate of the answers kept) against coverage, most confident first; the
    dotted line is the overall error rate (a confidence that ranks nothing)."""
    from medrcube.report.plots import use_agg

    use_agg()
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(4.2, 2.8))
    ax.plot(curve["coverage"], curve["risk"], color="#e45756", linewidth=1.2, label=label or None)
    ax.axhline(error_rate, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, max(0.05, min(1.0, max(curve["risk"], default=0.0) * 1.1)))
    ax.set_xlabel("coverage (share of answers kept)")
    ax.set_ylabel("risk (error rate)")
    ax.yaxis.grid(True, color="#dddddd", linewidth=0.6)
    fig.subplots_adjust(left=0.16, right=0.97, top=0.95, bottom=0.17)
    return fig


def _finding_rows(records: Sequence[GradedRecord]) -> list[dict[str, Any]]:
    found: list[tuple[str, FindingStats, float | None]] = []
    named: dict[str, bool] = {}
    for cell, cf in findings_by_cell(records).items():
        # A cell where no answer named any finding (every one unparsed or refused) says
        # nothing per finding: its rows are not applicable, not "sensitivity 0%".
        named[" · ".join(cell)] = any(f.tp + f.fp for f in cf.findings.values())
        found += [(" · ".join(cell), f, cf.balanced_accuracy) for f in cf.findings.values() if f.sensitivity.n]
    # Surely weak first: the lowest upper bound of the sensitivity, then the estimate.
    found.sort(key=lambda t: (t[1].sensitivity.hi, t[1].sensitivity.value or 0.0, t[0], t[1].finding))
    return [{"cell": cell, "finding": f.finding, "se": f.sensitivity, "sp": f.specificity, "ppv": f.ppv,
             "npv": f.npv, "balanced": balanced, "applicable": named[cell]} for cell, f, balanced in found[:FINDING_ROWS]]


def clinical_section(records: Sequence[GradedRecord], plots_dir: Path | None) -> dict[str, Any] | None:
    """The panel's template values (None when there is nothing to show) and its figures."""
    from medrcube.report.plots import save

    standard = [r for r in records if r.variant == "standard"]
    out: dict[str, Any] = {"findings": _finding_rows(standard), "calibration": None, "selective": None,
                           "abstention": abstention_summary(records), "figures": {}}
    levels = by_level(standard)
    if levels["all"].n:
        out["calibration"] = {"levels": [{"name": LEVEL_TITLES[k], "c": v} for k, v in levels.items()],
                              "sources": sorted({str(r.confidence.get("source")) for r in standard if r.confidence})}
        out["figures"]["reliability"] = save(reliability_figure(levels), "reliability", plots_dir, tight=False).data_uri
        sel = selective_summary(standard)
        if sel is not None:
            out["selective"] = sel
            out["figures"]["risk_coverage"] = save(risk_coverage_figure(sel["curve"], sel["error_rate"]),
                                                   "risk_coverage", plots_dir, tight=False).data_uri
    if not (out["findings"] or out["calibration"] or out["abstention"]):
        return None
    return out


__all__ = ["clinical_section", "reliability_figure", "risk_coverage_figure"]
