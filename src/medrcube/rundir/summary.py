"""metrics_summary.json: the run's numbers by group, counted once per record.

The document is a superset of the MedRCube reference evaluator's summary: the same
`global` / `slice_results` (`by_task`, `by_modality`, `by_parts`, `by_dataset`) /
`voxel_results` (`by_task_modality_parts`) layout with the same group keys
(`task=Disease Diagnosis`, `task=...|modality=...|parts=...`), and each group extended
with a Wilson 95% interval, the interval clustered by image that the gate decides with,
and the unparsed, refused, error and unavailable counts. As in the reference, `n` counts
graded answers only: unavailable images are left out, and so are errors (the reference
would have counted those as wrong).

When several variants ran, the standard variant fills the top-level layout and every
other variant has the same layout under `variants.<name>`.

Clinical depth (docs/clinical.md), each key present only when it has something to say:
`findings` (per diagnosis cell: confusion matrix, per-finding sensitivity, specificity,
PPV, NPV, balanced accuracy; metrics/findings.py), `calibration` and
`selective_prediction` (over the top variant's records that carry a confidence;
metrics/calibration.py, metrics/selective.py) and `abstention` (the abstain variant's
deferrals and utility per cell; metrics/selective.py).

Every group's numbers are sums over its records (outcome counts, and right / asked per
image), so `SummaryTally` counts them as the records come, each record once into its six
groups, and the document is made from the counts. `metrics_summary` counts a finished
run's records the same way; a tally fed while the requests were out (rundir/files
`GradedAhead`, run/runner.py `RunOptions.on_graded`) leaves only the intervals to the
run's end. Counts do not depend on the order of records, and each group's clusters are
taken in the order of their keys (metrics/clustered.py `cluster_counts`), so the
document is the same whichever way and in whatever order it was counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from medrcube.metrics.accuracy import wilson_interval
from medrcube.metrics.calibration import calibration_summary
from medrcube.metrics.clustered import METHOD as CLUSTERED_METHOD
from medrcube.metrics.clustered import clustered_wilson, image_key
from medrcube.metrics.findings import findings_by_cell, findings_summary
from medrcube.metrics.selective import DeferralCosts, abstention_summary, selective_summary
from medrcube.records import GRADED, GradedRecord, Outcome, is_perturbation

SUMMARY_SCHEMA_VERSION = 1

# The reference evaluator's slices: (name in the document, label of the group key).
# A record's key in slice i is its (task, modality, part, dataset)[i].
_SLICES = (("by_task", "task"), ("by_modality", "modality"), ("by_parts", "parts"), ("by_dataset", "dataset"))


class _Group:
    """One group's sums: records by outcome, and per image cluster [right, graded]."""

    __slots__ = ("outcomes", "clusters")

    def __init__(self) -> None:
        self.outcomes: dict[Outcome, int] = {}
        self.clusters: dict[str, list[int]] = {}

    def add(self, outcome: Outcome, cluster: str | None) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if cluster is not None:  # graded
            counts = self.clusters.get(cluster)
            if counts is None:
                counts = self.clusters[cluster] = [0, 0]
            if outcome is Outcome.CORRECT:
                counts[0] += 1
            counts[1] += 1

    def stats(self) -> dict[str, Any]:
        """The group's entry: the reference's n / correct / acc, its intervals and side counts."""
        count = self.outcomes.get
        correct = count(Outcome.CORRECT, 0)
        n = sum(count(o, 0) for o in GRADED)
        lo, hi = wilson_interval(correct, n, 0.95)
        # clustered_accuracy of these records: (right, graded) per image, in the order of the images' keys.
        ci = clustered_wilson([(k, m) for _, (k, m) in sorted(self.clusters.items())], 0.95)
        return {
            "n": n,
            "correct": correct,
            "acc": correct / n if n else None,
            "ci95": [lo, hi],  # plain Wilson (the reference layout's key)
            # The interval the gate decides with: clustered by image (metrics.clustered).
            "ci95_clustered": [ci.lo, ci.hi],
            "ci_method": CLUSTERED_METHOD,
            "images": ci.clusters,
            "design_effect": ci.deff,
            "unparsed": count(Outcome.UNPARSED, 0),
            "refused": count(Outcome.REFUSED, 0),
            "error": count(Outcome.ERROR, 0),
            "unavailable": count(Outcome.UNAVAILABLE, 0),
        }


class _Variant:
    """One variant's groups: the global one, one per value of each slice, one per cell."""

    __slots__ = ("whole", "slices", "voxels")

    def __init__(self) -> None:
        self.whole = _Group()
        self.slices: tuple[dict[str, _Group], ...] = tuple({} for _ in _SLICES)
        self.voxels: dict[tuple[str, str, str], _Group] = {}

    def add(self, r: GradedRecord) -> None:
        outcome = r.outcome
        cluster = image_key(r) if outcome in GRADED else None
        self.whole.add(outcome, cluster)
        for groups, value in zip(self.slices, (r.task, r.modality, r.part, r.dataset), strict=True):
            group = groups.get(value)
            if group is None:
                group = groups[value] = _Group()
            group.add(outcome, cluster)
        cell = (r.task, r.modality, r.part)
        group = self.voxels.get(cell)
        if group is None:
            group = self.voxels[cell] = _Group()
        group.add(outcome, cluster)

    def document(self) -> dict[str, Any]:
        """global / slice_results / voxel_results, each group's key as the reference spells it."""
        slices = {}
        for (name, label), groups in zip(_SLICES, self.slices, strict=True):
            named = {f"{label}={value}": group for value, group in groups.items()}
            slices[name] = {key: named[key].stats() for key in sorted(named)}
        cells = {f"task={t}|modality={m}|parts={p}": group for (t, m, p), group in self.voxels.items()}
        return {
            "global": self.whole.stats(),
            "slice_results": slices,
            "voxel_results": {"by_task_modality_parts": {key: cells[key].stats() for key in sorted(cells)}},
        }


class SummaryTally:
    """metrics_summary's sums, fed records as they come (`add`, each record once).

    `document(records, ...)` is the whole metrics_summary.json from these sums, `records`
    being the records they counted (read for the order of the variants and for the
    clinical keys). The tally does not check that they are: whoever feeds it does
    (`metrics_summary`, or rundir/files `GradedAhead.summary`, which knows the very
    records it was fed)."""

    def __init__(self) -> None:
        self._variants: dict[str, _Variant] = {}

    def add(self, records: Iterable[GradedRecord]) -> None:
        variants = self._variants
        for r in records:
            v = variants.get(r.variant)
            if v is None:
                v = variants[r.variant] = _Variant()
            v.add(r)

    def document(
        self,
        records: Sequence[GradedRecord],
        variants: Sequence[str] | None = None,
        *,
        prevalence: Mapping[str, Any] | None = None,
        costs: DeferralCosts | None = None,
    ) -> dict[str, Any]:
        return _document(self._variants, records, variants, prevalence, costs)


def metrics_summary(
    records: Sequence[GradedRecord],
    variants: Sequence[str] | None = None,
    *,
    prevalence: Mapping[str, Any] | None = None,
    costs: DeferralCosts | None = None,
) -> dict[str, Any]:
    """The whole metrics_summary.json document.

    `variants` (names, in run order) decides which variant fills the top level: standard
    if it ran, else the first one. Records of a shuffled variant are pooled over their
    rotations (n counts every rotation asked)."""
    tally = SummaryTally()
    tally.add(records)
    return tally.document(records, variants, prevalence=prevalence, costs=costs)


def _document(
    counted: Mapping[str, _Variant],
    records: Sequence[GradedRecord],
    variants: Sequence[str] | None,
    prevalence: Mapping[str, Any] | None,
    costs: DeferralCosts | None,
) -> dict[str, Any]:
    # The variants in the order of the records (a variant the run did not name is placed where its
    # first record is), so that the document does not depend on the order the tally was fed in.
    present = list(dict.fromkeys(r.variant for r in records))
    # "shuffled:3" records are named "shuffled"; a perturbation's records keep its spec ("jpeg:30").
    names = [v if is_perturbation(v) else v.split(":", 1)[0] for v in variants] if variants else present
    names = list(dict.fromkeys(names + [v for v in present if v not in names]))
    top = "standard" if "standard" in names else (names[0] if names else "standard")
    empty = _Variant()
    doc: dict[str, Any] = {"schema_version": SUMMARY_SCHEMA_VERSION, "variant": top}
    doc.update(counted.get(top, empty).document())
    others = {name: counted.get(name, empty).document() for name in names if name != top}
    if others:
        doc["variants"] = others
    # Clinical depth: prevalence and costs are the site's (thresholds.yaml, wired by the gate).
    doc.update(clinical_summary(records, [r for r in records if r.variant == top], prevalence, costs))
    return doc


def summarize(records: Iterable[GradedRecord]) -> dict[str, Any]:
    """global / slice_results / voxel_results for one variant's records."""
    v = _Variant()
    for r in records:
        v.add(r)
    return v.document()


def group_stats(records: Iterable[GradedRecord]) -> dict[str, Any]:
    """One group's numbers: the reference's n/correct/acc plus interval and side counts."""
    group = _Group()
    for r in records:
        group.add(r.outcome, image_key(r) if r.graded else None)
    return group.stats()


def clinical_summary(
    records: Sequence[GradedRecord],
    top: Sequence[GradedRecord],
    prevalence: Mapping[str, Any] | None = None,
    costs: DeferralCosts | None = None,
) -> dict[str, Any]:
    """The clinical keys of metrics_summary.json (module docstring): `top` is the top
    variant's records, `records` all of them (the abstain variant is read from there)."""
    doc: dict[str, Any] = {}
    findings = findings_summary(findings_by_cell(top, prevalence))
    if findings:
        doc["findings"] = findings
    for key, block in (("calibration", calibration_summary(top)), ("selective_prediction", selective_summary(top)),
                       ("abstention", abstention_summary(records, costs or DeferralCosts()))):
        if block is not None:
            doc[key] = block
    return doc
