"""The gate policy's schema: the values thresholds.yaml is validated and built into.

Validation lives in gate/validate.py, loading and building in gate/thresholds.py; this
module holds only the typed values, the key lists and ThresholdsError.
"""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA_VERSION = 1
AXES: tuple[str, ...] = ("part", "modality", "task")
DECISION_KEYS = ("rule", "confidence", "min_n", "max_error_rate", "required")
# Accuracy checks (overall, slices, cells) also take `above_chance`.
ACCURACY_KEYS = (*DECISION_KEYS, "above_chance")
TOP_KEYS = (
    "version",
    "defaults",
    "overall",
    "slices",
    "cells",
    "credibility",
    "image_dependence",
    "position_robustness",
    "regression",
    "robustness",
    "findings",
    "calibration",
    "selective",
    "feasibility",
    "scope",
    "coverage",
    "profiles",
)
# Built-in decision defaults, used for any key the file's `defaults` leaves out.
BUILTIN_DEFAULTS: dict[str, Any] = {
    "rule": "lower_bound", "confidence": 0.95, "min_n": 10, "max_error_rate": 0.05, "required": True,
    "above_chance": 0.0,
}



class ThresholdsError(ValueError):
    """A problem in a thresholds file: names the file, the key path, the value and the fix."""

    def __init__(
        self, file: str, key: str, problem: str, value: Any = None, fix: str = "", *, show_value: bool = True
    ) -> None:
        self.file, self.key, self.problem, self.value, self.fix = file, key, problem, value, fix
        where = f"{file}: {key}: " if key else f"{file}: "
        got = f" (got {value!r})" if show_value else ""
        super().__init__(f"{where}{problem}{got}" + (f". Fix: {fix}" if fix else ""))


# --------------------------------------------------------------------------- policy values


@dataclass(frozen=True, slots=True)
class Decision:
    """How a check decides: the rule and the evidence it requires."""

    rule: str  # "point" (no guarantee) or "lower_bound" (decides on confidence bounds only)
    confidence: float  # two-sided level; each one-sided claim is made at alpha = (1 - confidence) / 2
    min_n: int  # the point rule decides on its estimate only from this many units on
    max_error_rate: float  # more API errors: the check errors instead of deciding
    required: bool = True  # False: reported, never blocks the gate
    # Accuracy checks: the bound is raised to chance level + above_chance, so that a bound
    # written for 4-option questions does not pass a coin-flipper on 2-option ones.
    above_chance: float = 0.0


@dataclass(frozen=True, slots=True)
class Bound:
    """An accuracy bound with its decision, and the key it came from (for messages)."""

    bound: float
    rule: str
    confidence: float
    min_n: int
    max_error_rate: float
    required: bool = True
    source: str = ""
    above_chance: float = 0.0

    @property
    def decision(self) -> Decision:
        return Decision(self.rule, self.confidence, self.min_n, self.max_error_rate, self.required,
                        self.above_chance)


@dataclass(frozen=True, slots=True)
class CellRule:
    """One `cells` entry: a pattern and the fields it sets (None: inherited)."""

    match: str
    pattern: tuple[str, str, str]
    key: str  # e.g. "cells[2]" or "profiles.deployment.cells[0]"
    bound: float | None = None
    disabled: bool = False  # `bound: null`: matching cells are not checked
    optional: bool = False  # may match no cell of a given cube (a general policy file)
    rule: str | None = None
    confidence: float | None = None
    min_n: int | None = None
    max_error_rate: float | None = None
    required: bool | None = None
    above_chance: float | None = None

    def matches(self, cell: tuple[str, str, str]) -> bool:
        return all(fnmatch.fnmatchcase(v, p) for v, p in zip(cell, self.pattern, strict=True))


@dataclass(frozen=True, slots=True)
class SlicePolicy:
    axis: str
    default: Bound | None
    values: dict[str, Bound | None] = field(default_factory=dict, hash=False)

    def bound_for(self, value: str) -> Bound | None:
        return self.values[value] if value in self.values else self.default


@dataclass(frozen=True, slots=True)
class CredibilityBounds:
    """The bounds of one credibility scope (overall, or a part)."""

    # P(diagnosis right | perception right) - P(diagnosis right | perception wrong) on the
    # same image must reach this: 0 for a model whose diagnosis ignores its perception.
    min_grounding: float | None
    min_pairs: int  # the point rule decides on its estimate only from this many pairs on
    source: str = ""
    # The luck rate P(perception wrong | diagnosis right) = D / (A + D), the complement of
    # the paper's rationality, must stay at or below this: small for a model that perceives
    # well, whatever its diagnostic accuracy, and 0 when perception is always right.
    max_luck_rate: float | None = None
    # The odds ratio odds(diagnosis right | perception right) / odds(diagnosis right |
    # perception wrong) on the same image must reach this: 1 for a model whose diagnosis
    # ignores its perception (a shortcut). With max_luck_rate beside it, the check passes
    # when either is shown (each at its share of the level) and fails when a shortcut is shown
    # (CredibilityPolicy's shortcut bounds).
    min_odds_ratio: float | None = None


@dataclass(frozen=True, slots=True)
class CredibilityPolicy:
    enabled: bool
    overall: CredibilityBounds
    by_part: bool
    parts: dict[str, CredibilityBounds] = field(default_factory=dict, hash=False)
    rule: str = "point"
    confidence: float = 0.95
    max_error_rate: float = 0.05
    required: bool = True
    exclude_low_tasks: tuple[str, ...] = ("View Recognition",)
    # Whether the per-part checks are required (the overall one follows `required`): a
    # part holds a fraction of the pairs, too few to show dependence for most parts, so
    # the shipped policy reports them (a decisive fail still counts) without requiring them.
    parts_required: bool = True
    # The pass claim's two routes share the one-sided level: the odds ratio's route gets
    # `odds_ratio_share` of it, the luck rate's the rest (Bonferroni with unequal weights).
    odds_ratio_share: float = 0.5
    # The fail claim: a shortcut is shown when the odds ratio is shown below
    # `shortcut_odds_ratio` and the luck rate above `shortcut_luck_rate` (each at the
    # full one-sided level: intersection-union). None: the pass bounds. Between the two
    # sets of bounds lies an indifference zone where a pass and a fail are both true.
    shortcut_odds_ratio: float | None = None
    shortcut_luck_rate: float | None = None
    # The required overall check's share of the family-wise level of the fail claims
    # (weighted Holm, gate/family.py); None: an equal share with every other check.
    fail_share: float | None = None

    def for_part(self, part: str) -> CredibilityBounds:
        return self.parts.get(part, self.overall)


@dataclass(frozen=True, slots=True)
class ImageDependencePolicy:
    enabled: bool = True
    min_drop: float = 0.05
    rule: str = "point"
    confidence: float = 0.95
    min_n: int = 20
    max_error_rate: float = 0.05
    required: bool = True
    source: str = "image_dependence"


@dataclass(frozen=True, slots=True)
class PositionPolicy:
    enabled: bool = True
    max_gap: float | None = 0.2
    min_circular_accuracy: float | None = None
    rule: str = "point"
    confidence: float = 0.95
    min_n: int = 20
    max_error_rate: float = 0.05
    required: bool = True
    source: str = "position_robustness"


@dataclass(frozen=True, slots=True)
class RegressionPolicy:
    """Non-inferiority against a baseline: pass when the upper confidence bound of the
    drop (baseline - candidate) is within `margin`, fail when its lower bound is beyond."""

    enabled: bool = True
    alpha: float = 0.025  # one-sided level of each claim (the interval shown is at 1 - 2 alpha)
    margin: float = 0.05
    min_n: int = 10
    max_error_rate: float = 0.05
    per_cell: bool = True
    rule: str = "lower_bound"
    required: bool = True  # the overall regression check
    cells_required: bool = False  # per-cell checks: small cells rarely decide non-inferiority
    source: str = "regression"


@dataclass(frozen=True, slots=True)
class RobustnessPolicy:
    """Image perturbations: per requested perturbation and scope, accuracy is
    not worse than standard by more than `margin` (paired non-inferiority) and the
    answers agree with the standard ones at least `min_agreement` of the time."""

    enabled: bool = True
    margin: float | None = 0.05
    min_agreement: float | None = 0.9
    scopes: tuple[str, ...] = ("overall",)  # overall, slice, part, modality, task, cell
    rule: str = "lower_bound"
    confidence: float = 0.95
    min_n: int = 20
    max_error_rate: float = 0.05
    required: bool = True
    source: str = "robustness"


@dataclass(frozen=True, slots=True)
class FindingsPolicy:
    """Per-finding sensitivity (docs/clinical.md): in each diagnosis cell matching `cells` (or
    pooled over them, scope `overall`), the sensitivity for a named finding is at least
    its bound. `prevalence` is the site's case mix, for PPV/NPV in the outputs."""

    enabled: bool = True
    min_sensitivity: dict[str, float] = field(default_factory=dict, hash=False)
    cells: tuple[str, ...] = ("*/*/Disease Diagnosis", "*/*/Abnormality Diagnosis")
    scopes: tuple[str, ...] = ("cell",)  # cell, overall
    prevalence: dict[str, float] = field(default_factory=dict, hash=False)
    rule: str = "lower_bound"
    confidence: float = 0.95
    min_n: int = 10
    max_error_rate: float = 0.05
    required: bool = True
    source: str = "findings"


@dataclass(frozen=True, slots=True)
class CalibrationPolicy:
    """Calibration (docs/clinical.md): the debiased calibration error (`max_ce`) or the expected
    calibration error (`max_ece`) of the records with a confidence is at most a bound."""

    enabled: bool = True
    max_ce: float | None = None
    max_ece: float | None = None
    n_bins: int = 10
    n_boot: int = 400
    rule: str = "lower_bound"
    confidence: float = 0.95
    min_n: int = 100
    max_error_rate: float = 0.05
    required: bool = False
    source: str = "calibration"


@dataclass(frozen=True, slots=True)
class SelectivePolicy:
    """Selective prediction (docs/clinical.md). With the `abstain` variant: the utility under
    the stated cost of a deferral (an error costs 1) is at least `min_utility`. With a
    confidence on the records: accuracy of the most confident fraction c is at least
    `accuracy_at_coverage[c]`, and the largest fraction answered at an error rate of at
    most r is at least `coverage_at_risk[r]`."""

    enabled: bool = True
    deferral_cost: float = 0.1
    min_utility: float | None = None
    accuracy_at_coverage: dict[float, float] = field(default_factory=dict, hash=False)
    coverage_at_risk: dict[float, float] = field(default_factory=dict, hash=False)  # risk -> minimum coverage
    scopes: tuple[str, ...] = ("overall",)  # overall, cell
    rule: str = "lower_bound"
    confidence: float = 0.95
    min_n: int = 20
    max_error_rate: float = 0.05
    required: bool = True
    source: str = "selective"


FEASIBILITY_ACTIONS = ("optional", "refuse", "required")
SCOPE_KEYS = ("parts", "modalities", "tasks")


@dataclass(frozen=True, slots=True)
class FeasibilityPolicy:
    """What happens to a required check this cube cannot decide (gate/feasible.py):
    fewer than `min_images` images under it, or a model right on every item would not pass
    it. `optional`: reported, not required, and named in every output; `refuse`: the run
    stops before the first request, naming the checks; `required` (a file without this
    section): left required, as every check was before `feasibility` existed, so that the gate cannot qualify."""

    when_undecidable: str = "required"
    min_images: int = 1
    source: str = "feasibility"
    # Power at a margin: an accuracy check is required to pass only when a model
    # `power_margin` above its applied bound would pass it with probability `power`, given
    # its items and images (design effect at an intra-image correlation `power_icc`);
    # None: off. Such a check stays in the family for failing and is reported for passing.
    power_margin: float | None = None
    power: float = 0.99
    power_icc: float = 0.3


@dataclass(frozen=True, slots=True)
class ScopePolicy:
    """The intended use: the parts, modalities and tasks a deployment covers (empty: all).
    A scoped run asks only the items inside it, so that overall, the slices and
    credibility are computed within it and required (plugin/scoping.py); every output
    names the values of the cube left outside."""

    parts: tuple[str, ...] = ()
    modalities: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    source: str = "scope"

    @property
    def everything(self) -> bool:
        return not (self.parts or self.modalities or self.tasks)

    def covers(self, part: str | None, modality: str | None, task: str | None) -> bool:
        """Whether a check's selector (None: every value) lies inside the scope."""
        return all(not allowed or (value is not None and value in allowed)
                   for value, allowed in ((part, self.parts), (modality, self.modalities), (task, self.tasks)))

    def describe(self) -> str:
        if self.everything:
            return "every part, modality and task of the cube"
        return "; ".join(f"{k}: {', '.join(v)}" for k, v in (("parts", self.parts), ("modalities", self.modalities),
                                                              ("tasks", self.tasks)) if v)


@dataclass(frozen=True, slots=True)
class CoveragePolicy:
    """`coverage: {require: {parts: [...], modalities: [...], tasks: [...]}}`: values the
    verdict must rest on. QUALIFIED is refused (UNDECIDED, naming them) while a named value
    holds no decided check (gate/coverage.py). `cells: true` adds every cube cell
    (part/modality/task) to the coverage every output states."""

    parts: tuple[str, ...] = ()
    modalities: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    source: str = "coverage"
    cells: bool = False

    def required(self) -> dict[str, tuple[str, ...]]:
        """Axis -> the values named (axes with none left out)."""
        return {axis: v for axis, v in (("part", self.parts), ("modality", self.modalities), ("task", self.tasks))
                if v}


@dataclass(frozen=True, slots=True)
class Policy:
    source: str
    version: int
    profile: str | None
    profiles: tuple[str, ...]
    defaults: Decision
    overall: Bound | None
    slices: dict[str, SlicePolicy] = field(hash=False)
    cells: tuple[CellRule, ...]
    credibility: CredibilityPolicy | None
    image_dependence: ImageDependencePolicy
    position: PositionPolicy
    regression: RegressionPolicy
    robustness: RobustnessPolicy = field(default_factory=RobustnessPolicy)
    findings: FindingsPolicy | None = None
    calibration: CalibrationPolicy | None = None
    selective: SelectivePolicy = field(default_factory=SelectivePolicy)
    feasibility: FeasibilityPolicy = field(default_factory=FeasibilityPolicy)
    scope: ScopePolicy = field(default_factory=ScopePolicy)
    coverage: CoveragePolicy = field(default_factory=CoveragePolicy)
    # The sections of kinds registered beyond the built-in ones (gate/kinds.py), as their entries read them.
    sections: dict[str, Any] = field(default_factory=dict, hash=False)

    def cell_bound(self, cell: tuple[str, str, str]) -> Bound | None:
        """The bound of a cube cell: matching `cells` entries applied in order, field by field."""
        fields: dict[str, Any] = {}
        source = ""
        matched = False
        for rule in self.cells:
            if not rule.matches(cell):
                continue
            matched = True
            source = rule.key
            if rule.disabled:
                fields["bound"] = None
            elif rule.bound is not None:
                fields["bound"] = rule.bound
            for k in ACCURACY_KEYS:
                v = getattr(rule, k)
                if v is not None:
                    fields[k] = v
        if not matched or fields.get("bound") is None:
            return None
        d = asdict(self.defaults)
        d.update({k: fields[k] for k in ACCURACY_KEYS if k in fields})
        return Bound(bound=fields["bound"], source=source, **d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

