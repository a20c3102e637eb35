"""The registry of check kinds: one entry per kind, which every part of the house reads.

An entry (`KindEntry`) says everything the house needs to know of a kind of check:
- its name (a check's `kind`), its place in gate.json and the terminal summary (the
  registration order), its title (the summary line and the report panel);
- its pytest test function in the shipped suite (`test`, `doc`: suite/test_gate.py makes
  one function per entry) and why a run has none of its checks (`off`);
- its Allure epic, and whether the terminal summary gives it a line of its own;
- its policy section (`section`, read and validated by `read_policy`), how it builds its
  checks from the cube's cells and the policy (`build`) and collects its evidence
  (`evidence`).

The registry fills itself from the entry-point group `medrcube.kinds` (entrypoints.py)
the first time it is read, not when it is imported: the core kinds below (`CORE`, data
here; their builders and evidence collectors join their entries where they are written,
by the decorators `@builds(kind)` (gate/checks.py) and `@collects(kind)`
(gate/evidence.py, gate/evidence_clinical.py); their policy sections are read by
gate/thresholds.py into the Policy's own fields), the subgroup kinds of gate/subgroups.py
and any site package's come in by that one path, in the order gate.json lists them.
A new kind is a `KindEntry` (with `section`, `read_policy`, `build` and `evidence`) named
by an entry point of that group in its package's metadata (or a `register(KindEntry(...))`
made before the registry is first read, as a test's fixture does); nothing else changes:
the plugin parametrizes its test, the decider puts its checks in the Holm family, and
gate.json, JUnit, Allure, the terminal summary and report.html show them.

This module is the lowest of gate/: it imports nothing of the gate, so that every
module of the gate (and every room above) can read it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from medrcube import entrypoints

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What a kind's `build` reads: the cube's cells in canonical order, the axis values,
    the policy (medrcube.gate.policy.Policy), the variant names asked, whether the run has
    a baseline, the option texts offered per cell (None: not known), the variants as given
    (spec strings or run.variants.Variant objects), K of shuffled:K, and the cube's strata
    (images per value of each subgroup attribute, cube/attributes.py; None: not known)."""

    cells: Sequence[tuple[str, str, str]]
    axis_values: Mapping[str, Sequence[str]]
    policy: Any
    variants: Sequence[str]
    has_baseline: bool
    cell_options: Mapping[tuple[str, str, str], Any] | None = None
    asked: Sequence[Any] = ()
    rotations: int | None = None
    strata: Mapping[str, Mapping[str, int]] | None = None

    def section(self, name: str) -> Any:
        """The parsed policy section of a registered kind (None: not in the policy)."""
        return (getattr(self.policy, "sections", None) or {}).get(name)


@dataclass(frozen=True, slots=True)
class KindEntry:
    """One kind of check, as every room needs it (see the module docstring)."""

    name: str  # a check's `kind`
    title: str  # the summary line's label and the report panel's title
    test: str = ""  # the suite's test function (empty: no suite function, e.g. a site's own checks)
    doc: str = ""  # that function's docstring: what a case of the kind checks
    off: str = ""  # why a run has no check of the kind, and how to ask for one
    epic: str = ""  # the Allure epic (empty: the kind's title)
    summary_line: bool = False  # a line of its own in the terminal summary (summary_kinds.py)
    observed: str = "value"  # what `observed` is, in that line
    prefix: str = ""  # the id prefix the line leaves out
    section: str | None = None  # the thresholds.yaml section the kind reads
    # (checker, key, the section's mapping) -> the parsed section, kept in Policy.sections;
    # it raises through the checker (ThresholdsError naming the key) on a bad value.
    read_policy: Callable[[Any, str, Any], Any] | None = None
    build: Callable[[BuildContext], list[Any]] | None = None  # -> medrcube.gate.checks.Check
    # (check, the run's records in its scope) -> medrcube.gate.criteria.Evidence; a kind that
    # `needs_baseline` is also given the baseline's records and why they are missing.
    evidence: Callable[..., Any] | None = None
    needs_baseline: bool = False
    # The variants `evidence` reads ("standard", "blind", ...): it is given only their records
    # of its scope (a family's checks are grouped by variant too: gate/evidence.ByScope), so a
    # check that reads the standard answers does not pass over the other variants' four records
    # in five. None: every variant.
    reads: tuple[str, ...] | None = None
    # How the outputs show the kind's checks (read by plugin/ and report/, which test no
    # kind by name):
    # (check) -> (epic, feature, story) in Allure's Behaviors tree; None: (the epic,
    # "All parts", the check id).
    grouping: Callable[[Any], tuple[str, str, str]] | None = None
    # (check, feature, story) -> the Allure case's title; None: "epic: feature".
    case_title: Callable[[Any, str, str], str] | None = None
    per_cell: bool = False  # one check per cube cell: drawn on the cube's map
    per_perturbation: bool = False  # one check per image perturbation asked: the robustness panel
    per_stratum: bool = False  # one check per stratum of a subgroup attribute: a forest plot per attribute
    against: str = ""  # the variant its checks compare the standard answers with ("blind")
    # The item of the review-board dossier its checks are listed under (report/dossier.py):
    # "credibility", "calibration", "robustness", "subgroup" (accuracy per stratum),
    # "subgroup_gap"; "": only in the dossier's list of every check.
    dossier: str = ""
    # (this run's gate.json entries of the kind) -> the terminal summary's lines of numbers for
    # them (gate/numbers.py writes the core kinds', attached by `@describes`); None: the one
    # generic line of a `summary_line` kind, or none.
    numbers: Callable[[Sequence[Mapping[str, Any]]], list[str]] | None = None


_ENTRIES: dict[str, KindEntry] = {}
# Builders, collectors and number lines attached by `@builds`/`@collects`/`@describes`
# before their kind is registered.
_ATTACHED: dict[str, dict[str, Any]] = {}
_DISCOVERED = False
GROUP = "medrcube.kinds"


def _discover() -> None:
    """Register every kind the group's entry points name (once, on first read)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True  # first: a module loaded below registers through `register`
    for _ep, entries in entrypoints.load(GROUP, KindEntry):
        for entry in entries:
            if entry.name not in _ENTRIES:  # a kind registered already (in-process pytester runs)
                _add(entry)


def _add(entry: KindEntry) -> KindEntry:
    if entry.test and any(e.test == entry.test for e in _ENTRIES.values()):
        raise ValueError(f"test function {entry.test!r} belongs to another check kind")
    entry = replace(entry, **_ATTACHED.get(entry.name, {}))
    _ENTRIES[entry.name] = entry
    return entry


def register(entry: KindEntry) -> KindEntry:
    """Add a kind (its name and test function must be new)."""
    _discover()
    if entry.name in _ENTRIES:
        raise ValueError(f"check kind {entry.name!r} is registered already")
    return _add(entry)


def builds(name: str) -> Callable[[F], F]:
    """Decorator: the function builds the checks of the registered kind `name`."""
    def attach(fn: F) -> F:
        _attach(name, "build", fn)
        return fn
    return attach


def collects(name: str, *, reads: tuple[str, ...] | None = None) -> Callable[[F], F]:
    """Decorator: the function collects the evidence of a check of the registered kind `name`,
    from the records of the variants it `reads` (None: every variant; KindEntry.reads)."""
    def attach(fn: F) -> F:
        _attach(name, "evidence", fn)
        if reads is not None:
            _attach(name, "reads", tuple(reads))
        return fn
    return attach


def describes(name: str) -> Callable[[F], F]:
    """Decorator: the function writes the terminal summary's number lines of the kind `name`."""
    def attach(fn: F) -> F:
        _attach(name, "numbers", fn)
        return fn
    return attach


def _attach(name: str, field: str, fn: Any) -> None:
    # Kept for the kind's registration when it comes later: a decorator never triggers
    # discovery (gate/checks.py is imported while the registry may be filling itself).
    _ATTACHED.setdefault(name, {})[field] = fn
    if name in _ENTRIES:
        _ENTRIES[name] = replace(_ENTRIES[name], **_ATTACHED[name])


def unregister(name: str) -> None:
    """Remove a kind added with `register` (a test's toy kind)."""
    if name in BUILTIN:
        raise ValueError(f"check kind {name!r} is built in")
    _ENTRIES.pop(name, None)


def registered() -> tuple[KindEntry, ...]:
    """Every kind, in the order gate.json and the summary list them."""
    _discover()
    return tuple(_ENTRIES.values())


def entry_of(kind: str) -> KindEntry | None:
    _discover()
    return _ENTRIES.get(str(kind))


def kind_of_test(function_name: str) -> str | None:
    """The kind a suite test function is parametrized with (None: not a gate test)."""
    return next((e.name for e in registered() if e.test and e.test == function_name), None)


def rank(kind: str) -> int:
    """The kind's place in gate.json and the summary (an unknown kind comes last)."""
    names = [e.name for e in registered()]
    return names.index(str(kind)) if str(kind) in names else len(names)


def title_of(kind: str) -> str:
    e = entry_of(kind)
    return e.title if e else str(kind).replace("_", " ")


def epic_of(kind: str) -> str:
    e = entry_of(kind)
    return (e.epic or e.title) if e else str(kind)


def kinds_in_dossier(item: str) -> tuple[str, ...]:
    """The kinds whose checks the dossier lists under `item` (KindEntry.dossier), in rank order."""
    return tuple(e.name for e in registered() if e.dossier == item)


def needs_baseline(kind: str) -> bool:
    """Whether the kind's checks compare the run with its baseline (an unknown kind: no)."""
    e = entry_of(kind)
    return bool(e and e.needs_baseline)


def off_reason(kind: str, policy_label: str = "") -> str:
    e = entry_of(kind)
    return e.off if e and e.off else f"the policy {policy_label} gives no {kind} check on this cube"


# -- how the outputs group the core kinds' checks (Allure's epic > feature > story) ----------

ALL_PARTS = "All parts"


def _scope(check: Any) -> str:
    return " / ".join(v for v in (check.part, check.modality, check.task) if v) or "All cells"


def _slice_axis(check: Any) -> tuple[str, str]:
    for axis in ("part", "modality", "task"):
        value = getattr(check, axis)
        if value is not None:
            return axis, value
    return "part", check.id


def _by_part(story: str) -> Callable[[Any], tuple[str, str, str]]:
    def grouping(check: Any) -> tuple[str, str, str]:
        return epic_of(check.kind), check.part or ALL_PARTS, story
    return grouping


def _cell(check: Any) -> tuple[str, str, str]:
    return check.part, check.modality, check.task


def _slice(check: Any) -> tuple[str, str, str]:
    axis, value = _slice_axis(check)
    return epic_of(check.kind), f"By {axis}", value


def _regression(check: Any) -> tuple[str, str, str]:
    where = "Overall" if check.task is None and check.modality is None else f"{check.modality} / {check.task}"
    return epic_of(check.kind), check.part or ALL_PARTS, where


def _perturbed(what: str) -> Callable[[Any], tuple[str, str, str]]:
    def grouping(check: Any) -> tuple[str, str, str]:
        variant = str((getattr(check, "params", None) or {}).get("variant", "perturbation"))
        return epic_of(check.kind), variant, f"{_scope(check)}: {what}"
    return grouping


def _clinical(feature: str, story: Callable[[Any], str]) -> Callable[[Any], tuple[str, str, str]]:
    def grouping(check: Any) -> tuple[str, str, str]:
        return epic_of(check.kind), feature, story(check)
    return grouping


def _finding_story(check: Any) -> str:
    return f"{(getattr(check, 'params', None) or {}).get('finding', check.metric)}: {_scope(check)}"


def _site(check: Any) -> tuple[str, str, str]:
    return epic_of(check.kind), check.part or ALL_PARTS, check.id


def _feature_story(check: Any, feature: str, story: str) -> str:
    return f"{feature}: {story}"


def _regression_title(check: Any, feature: str, story: str) -> str:
    return f"Regression against the baseline: {'overall' if story == 'Overall' else f'{feature} / {story}'}"


def _robustness_title(check: Any, feature: str, story: str) -> str:
    return f"Robustness to {feature}: {story}"


# -- the core kinds (their sections, builders and evidence: see the module docstring) --------

_PERTURB = "--variants=standard,jpeg:30"
CORE: tuple[KindEntry, ...] = (
    KindEntry("overall", "overall accuracy", "test_overall",
              "Accuracy over the whole cube reaches its bound.", epic="Overall",
              grouping=lambda c: (epic_of(c.kind), "Accuracy", "All cells"),
              case_title=lambda c, feature, story: "Overall accuracy"),
    KindEntry("slice", "slice accuracy", "test_slice",
              "Accuracy over one axis slice (a part, a modality or a task) reaches its bound.",
              epic="Slices", grouping=_slice,
              case_title=lambda c, feature, story: f"{feature.removeprefix('By ')} {story}: accuracy"),
    KindEntry("cell", "cell accuracy", "test_cell",
              "Accuracy of one cube cell (part x modality x task) reaches its bound.", per_cell=True,
              grouping=_cell, case_title=lambda c, feature, story: f"{c.part} / {c.modality} / {c.task}: accuracy"),
    KindEntry("credibility", "credibility", "test_credibility",
              "A right diagnosis goes with a right perception of the same image (grounding).",
              off="no credibility check: the policy sets none, or no part has both a high-level "
              "and a lower-level task", epic="Credibility", section="credibility",
              grouping=_by_part("Rationality and shortcuts"), dossier="credibility"),
    KindEntry("image_dependence", "image dependence", "test_image_dependence",
              "Accuracy drops enough without the image (the blind variant): the model looks at it.",
              off="image-dependence checks need the blind variant: --variants=standard,blind",
              epic="Image dependence", section="image_dependence", against="blind",
              grouping=_by_part("Standard vs blind"), dossier="robustness"),
    KindEntry("position", "position robustness", "test_position",
              "Answers survive cyclic rotations of the options (circular accuracy and its gap).",
              off="position-robustness checks need shuffled rotations: --variants=standard,shuffled:3",
              epic="Position robustness", section="position_robustness",
              grouping=_by_part("Circular accuracy"), dossier="robustness"),
    KindEntry("regression", "regression against the baseline", "test_regression",
              "The candidate is not worse than the baseline by more than the margin (non-inferiority).",
              off="regression checks need --baseline (a previous run directory or a model spec)",
              epic="Regression", section="regression", needs_baseline=True, grouping=_regression,
              case_title=_regression_title, dossier="robustness"),
    KindEntry("robustness", "robustness to image perturbations", "test_robustness",
              "Accuracy under an image perturbation is not worse than standard by more than the margin.",
              off=f"robustness checks need an image perturbation: {_PERTURB},noise:0.03",
              epic="Robustness", summary_line=True, observed="drop", prefix="robustness/",
              section="robustness", grouping=_perturbed("accuracy"), case_title=_robustness_title,
              per_perturbation=True, dossier="robustness"),
    KindEntry("robustness_agreement", "answer agreement under perturbations", "test_robustness_agreement",
              "The answers under an image perturbation name the same option as on the standard image.",
              off=f"agreement checks need an image perturbation: {_PERTURB}", epic="Robustness",
              summary_line=True, observed="agreement", prefix="agreement/", section="robustness",
              grouping=_perturbed("answer agreement"), case_title=_robustness_title, per_perturbation=True, dossier="robustness"),
    KindEntry("finding", "per-finding sensitivity", "test_finding",
              "The sensitivity for a named finding reaches its bound (how many of them the model misses).",
              off="per-finding checks need `findings: {min_sensitivity: {FINDING: BOUND}}` in the policy",
              epic="Clinical depth", summary_line=True, observed="sensitivity", prefix="finding/",
              section="findings", grouping=_clinical("Per-finding sensitivity", _finding_story),
              case_title=_feature_story),
    KindEntry("calibration", "calibration", "test_calibration",
              "The model's stated confidence matches how often it is right (calibration error at most "
              "the bound).", off="the calibration check needs `calibration: {max_ce: BOUND}` in the policy",
              epic="Clinical depth", summary_line=True, observed="error", section="calibration",
              grouping=_clinical("Calibration", lambda c: "Calibration error"), case_title=_feature_story, dossier="calibration"),
    KindEntry("selective", "selective prediction", "test_selective",
              "Deferring when unsure pays: the utility under the deferral cost, or accuracy at a coverage, "
              "reaches its bound.",
              off="selective checks need --variants=standard,abstain with `selective: {min_utility: "
              "BOUND}`, or `selective: {accuracy_at_coverage: {C: BOUND}}`",
              epic="Clinical depth", summary_line=True, observed="value", prefix="selective/",
              section="selective",
              grouping=_clinical("Selective prediction",
                                 lambda c: f"{str(c.metric).replace('_', ' ')}: {_scope(c)}"),
              case_title=_feature_story),
    # A site's own proportion (plugin/site.py): decided by the gate, no suite function.
    KindEntry("site", "site checks", epic="Site checks", grouping=_site,
              case_title=lambda c, feature, story: f"{c.id}: {c.metric}"),
)
BUILTIN: tuple[str, ...] = tuple(e.name for e in CORE)
