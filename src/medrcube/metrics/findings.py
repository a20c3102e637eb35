"""Per-finding metrics for the diagnosis-level tasks: what accuracy over a cell hides.

In a Disease Diagnosis or Abnormality Diagnosis cell every option names a finding
("Pneumothorax", "Effusion") or its absence ("Normal", "No abnormality"). Treating each
finding F as a binary test (the model says F, or not) gives, over the cell's graded items
on which F was offered:

    TP: truth F, chosen F        FN: truth F, chosen another option (or none: unparsed,
                                     refused, which is a miss in a clinic)
    FP: truth not F, chosen F    TN: truth not F, not chosen F

    sensitivity = TP / (TP + FN)   specificity = TN / (TN + FP)
    PPV = TP / (TP + FP)           NPV = TN / (TN + FN)

and the confusion matrix of the cell (truth label x chosen label, with "(none)" for an
answer that names no option) and balanced accuracy, the mean sensitivity over the
findings that occur as a truth in the cell.

Labels are the option texts of the record (GradedRecord.options), whitespace-collapsed
and case-folded; the usual spellings of "no finding" are one label, `normal`. Only the
standard variant is meant to be passed (the caller selects); records without option
texts (written before they were kept) are skipped and counted.

Intervals: each proportion is clustered by image, since items of one image share an
error (metrics.clustered explains the one-way ANOVA estimate of the intra-cluster
correlation rho). Here the design effect is Kish's with the size-weighted mean cluster
size, deff = 1 + (sum m_i^2 / n - 1) rho (Kish 1965; for unequal clusters the plain
mean n/K understates it), and the Wilson interval is taken on n / deff. When rho cannot
be estimated (fewer than two clusters, or no variation within the denominator), the
conservative fallback counts images, not items: n_eff = K, i.e. every item of an image
is taken as one observation (deff = n / K), which can only widen the interval.

Prevalence: PPV and NPV depend on how common F is. A site states its own prevalence
pi for F (thresholds.yaml, its case mix); by Bayes

    PPV(pi) = se pi / (se pi + (1 - sp)(1 - pi))
    NPV(pi) = sp (1 - pi) / (sp (1 - pi) + (1 - se) pi)

and the interval maps the sensitivity and specificity bounds through the same formulas
(PPV rises in se and sp, so [PPV(se_lo, sp_lo), PPV(se_hi, sp_hi)]; likewise NPV): a
conservative interval, as the two bounds are not joint.

Estimates and intervals only: the per-finding check is decided by the gate
(gate/evidence_clinical.py, gate/family.py).
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrcube.metrics.accuracy import wilson_from_proportion
from medrcube.metrics.clustered import cluster_counts, icc_anova, image_key
from medrcube.records import GradedRecord, Outcome

NONE_LABEL = "(none)"  # the chosen label of an answer that names no option
NORMAL = "normal"
_NORMAL_SPELLINGS = frozenset({
    "normal", "no abnormality", "no abnormalities", "no finding", "no findings", "no acute findings",
    "no disease", "healthy", "none", "negative", "no abnormality detected", "within normal limits",
    "no significant abnormality", "no lesion", "no tumor", "no tumour", "no pathology",
})


@functools.lru_cache(maxsize=4096)  # a cube's option texts are few; each record names two of them
def label_of(text: str) -> str:
    """The finding a text names: collapsed, case-folded, trailing dot dropped; the usual
    spellings of no finding are `normal`."""
    t = re.sub(r"\s+", " ", text).strip().rstrip(".").casefold()
    return NORMAL if t in _NORMAL_SPELLINGS else t


# The tasks whose options name findings. Severity Grading is high-level too, but its
# options are grades of one finding, not findings.
FINDING_TASKS = frozenset({"Disease Diagnosis", "Abnormality Diagnosis"})


def is_diagnosis_task(task: str) -> bool:
    """A diagnosis-level task whose options name findings (FINDING_TASKS)."""
    return task in FINDING_TASKS


# -- the clustered interval ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Proportion:
    """k of n with its image-clustered Wilson interval (see the module doc)."""

    k: int
    n: int
    clusters: int
    icc: float | None  # None: not estimable, the image-count fallback was used
    deff: float
    lo: float
    hi: float

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "n": self.n, "value": self.value, "ci95": [self.lo, self.hi], "clusters": self.clusters,
                "icc": self.icc, "deff": self.deff}


def kish_proportion(clusters: Sequence[tuple[int, int]], confidence: float = 0.95) -> Proportion:
    """(k_i, m_i) clusters -> the proportion with deff = 1 + (sum m^2 / n - 1) rho, or the
    image-count fallback n_eff = K when rho is not estimable."""
    clusters = [c for c in clusters if c[1] > 0]
    n = sum(m for _, m in clusters)
    k = sum(c for c, _ in clusters)
    big_k = len(clusters)
    if n == 0:
        return Proportion(0, 0, 0, None, 1.0, 0.0, 1.0)
    raw = icc_anova(clusters) if big_k >= 2 else None
    if raw is None:
        rho: float | None = None
        deff = n / big_k  # every item of an image counts as one observation
    else:
        rho = min(1.0, max(0.0, raw))
        m_w = sum(m * m for _, m in clusters) / n
        deff = 1.0 + (m_w - 1.0) * rho
    lo, hi = wilson_from_proportion(k / n, n / deff, confidence)
    return Proportion(k, n, big_k, rho, deff, lo, hi)


def clustered_proportion(units: Iterable[tuple[str, bool]], confidence: float = 0.95) -> Proportion:
    """The clustered proportion of (cluster key, success) units."""
    return kish_proportion(cluster_counts(units), confidence)


# -- per finding -----------------------------------------------------------------------------


def _truth_and_choice(r: GradedRecord) -> tuple[str, str] | None:
    if not r.options or not 0 <= r.answer < len(r.options):
        return None
    truth = label_of(r.options[r.answer])
    chosen = NONE_LABEL
    if r.outcome in (Outcome.CORRECT, Outcome.WRONG) and r.extracted is not None and 0 <= r.extracted < len(r.options):
        chosen = label_of(r.options[r.extracted])
    return truth, chosen


@dataclass(frozen=True, slots=True)
class FindingStats:
    """One finding in one cell: the 2x2 counts and the four rates with intervals."""

    finding: str
    tp: int
    fn: int
    fp: int
    tn: int
    sensitivity: Proportion
    specificity: Proportion
    ppv: Proportion
    npv: Proportion
    prevalence: float | None  # in this cube's items offering it
    site: dict[str, Any] | None = None  # PPV/NPV at a site's stated prevalence

    def to_dict(self) -> dict[str, Any]:
        return {"finding": self.finding, "tp": self.tp, "fn": self.fn, "fp": self.fp, "tn": self.tn,
                "sensitivity": self.sensitivity.to_dict(), "specificity": self.specificity.to_dict(),
                "ppv": self.ppv.to_dict(), "npv": self.npv.to_dict(), "prevalence": self.prevalence,
                "site": self.site}


@dataclass(frozen=True, slots=True)
class CellFindings:
    """A diagnosis cell: its confusion matrix and the per-finding statistics."""

    cell: tuple[str, str, str]
    n: int  # graded records with option texts
    labels: tuple[str, ...]  # truth labels (rows), then chosen-only labels
    confusion: dict[str, dict[str, int]]  # truth -> chosen -> count
    findings: dict[str, FindingStats]
    balanced_accuracy: float | None
    skipped: int = 0  # graded records without option texts
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"cell": list(self.cell), "n": self.n, "labels": list(self.labels), "confusion": self.confusion,
                "findings": {k: v.to_dict() for k, v in self.findings.items()},
                "balanced_accuracy": self.balanced_accuracy, "skipped": self.skipped}


def site_predictive_values(se: Proportion, sp: Proportion, prevalence: float) -> dict[str, Any]:
    """PPV and NPV at a stated prevalence, with the conservative mapped intervals."""
    if not 0.0 < prevalence < 1.0:
        raise ValueError(f"a stated prevalence must be strictly between 0 and 1, got {prevalence!r}")

    def ppv(s: float, c: float) -> float | None:
        d = s * prevalence + (1.0 - c) * (1.0 - prevalence)
        return s * prevalence / d if d > 0 else None

    def npv(s: float, c: float) -> float | None:
        d = c * (1.0 - prevalence) + (1.0 - s) * prevalence
        return c * (1.0 - prevalence) / d if d > 0 else None

    s_hat, c_hat = se.value, sp.value
    return {
        "prevalence": prevalence,
        "ppv": ppv(s_hat, c_hat) if s_hat is not None and c_hat is not None else None,
        "ppv_ci95": [ppv(se.lo, sp.lo), ppv(se.hi, sp.hi)],
        "npv": npv(s_hat, c_hat) if s_hat is not None and c_hat is not None else None,
        "npv_ci95": [npv(se.lo, sp.lo), npv(se.hi, sp.hi)],
    }


def cell_findings(
    records: Iterable[GradedRecord],
    cell: tuple[str, str, str] = ("", "", ""),
    prevalence: Mapping[str, float] | None = None,
    confidence: float = 0.95,
) -> CellFindings:
    """Per-finding statistics over one cell's graded records (pass one variant's).

    `prevalence` maps a finding (any spelling; label_of is applied) to the site's stated
    prevalence, which adds `site` PPV/NPV to that finding."""
    rows: list[tuple[str, str, str, frozenset[str]]] = []  # cluster, truth, chosen, offered
    skipped = 0
    for r in records:
        if not r.graded:
            continue
        tc = _truth_and_choice(r)
        if tc is None:
            skipped += 1
            continue
        rows.append((image_key(r), tc[0], tc[1], frozenset(label_of(o) for o in r.options)))
    confusion: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for _, truth, chosen, _ in rows:
        confusion[truth][chosen] += 1
    truths = sorted({t for _, t, _, _ in rows})
    chosen_only = sorted({c for _, _, c, _ in rows} - set(truths))
    offered = sorted(set().union(*(o for *_, o in rows)) if rows else set())
    site = {label_of(k): float(v) for k, v in (prevalence or {}).items()}
    findings: dict[str, FindingStats] = {}
    for f in offered:
        mine = [(key, t == f, c == f) for key, t, c, o in rows if f in o]
        tp = sum(1 for _, t, c in mine if t and c)
        fn = sum(1 for _, t, c in mine if t and not c)
        fp = sum(1 for _, t, c in mine if not t and c)
        tn = sum(1 for _, t, c in mine if not t and not c)
        se = clustered_proportion(((k, c) for k, t, c in mine if t), confidence)
        sp = clustered_proportion(((k, not c) for k, t, c in mine if not t), confidence)
        ppv = clustered_proportion(((k, t) for k, t, c in mine if c), confidence)
        npv = clustered_proportion(((k, not t) for k, t, c in mine if not c), confidence)
        stats = FindingStats(f, tp, fn, fp, tn, se, sp, ppv, npv, (tp + fn) / len(mine) if mine else None)
        if f in site:
            stats = FindingStats(f, tp, fn, fp, tn, se, sp, ppv, npv, stats.prevalence,
                                 site_predictive_values(se, sp, site[f]))
        findings[f] = stats
    sens = [findings[t].sensitivity.value for t in truths if t in findings]
    sens_values = [s for s in sens if s is not None]
    balanced = sum(sens_values) / len(sens_values) if sens_values else None
    return CellFindings(
        cell=cell, n=len(rows), labels=(*truths, *chosen_only),
        confusion={t: dict(sorted(c.items())) for t, c in sorted(confusion.items())},
        findings=findings, balanced_accuracy=balanced, skipped=skipped,
    )


def findings_by_cell(
    records: Iterable[GradedRecord],
    prevalence: Mapping[str, Mapping[str, float]] | Mapping[str, float] | None = None,
    confidence: float = 0.95,
) -> dict[tuple[str, str, str], CellFindings]:
    """`cell_findings` for every diagnosis-level cell (part, modality, task) present.

    `prevalence` is either {finding: pi} for every cell, or {"Part|Modality|Task":
    {finding: pi}} per cell (a site's case mix differs by body part and modality)."""
    groups: dict[tuple[str, str, str], list[GradedRecord]] = defaultdict(list)
    for r in records:
        # The abstain variant's added option names no finding: its records are not read here.
        if is_diagnosis_task(r.task) and r.variant != "abstain":
            groups[r.cell].append(r)
    out = {}
    for cell in sorted(groups):
        out[cell] = cell_findings(groups[cell], cell, _prevalence_for(cell, prevalence), confidence)
    return out


def _prevalence_for(cell: tuple[str, str, str], prevalence: Mapping[str, Mapping[str, float]] | Mapping[str, float] | None,
                    ) -> Mapping[str, float] | None:  # fmt: skip
    if not prevalence:
        return None
    mine = prevalence.get("|".join(cell))
    if isinstance(mine, Mapping):
        return mine
    flat = {k: v for k, v in prevalence.items() if not isinstance(v, Mapping)}
    return flat or None


def findings_summary(cells: Mapping[tuple[str, str, str], CellFindings]) -> dict[str, Any]:
    """The metrics_summary.json block: per cell key "task=...|modality=...|parts=..."."""
    return {f"task={c[2]}|modality={c[1]}|parts={c[0]}": v.to_dict() for c, v in sorted(cells.items())}


__all__ = [
    "CellFindings", "FindingStats", "Proportion", "cell_findings", "clustered_proportion", "findings_by_cell",
    "findings_summary", "kish_proportion", "label_of",
    "site_predictive_values", "NORMAL",
]
