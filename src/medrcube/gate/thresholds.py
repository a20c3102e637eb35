"""thresholds.yaml: the gate policy, its schema and its strict validation.

The file (version 1) is the whole policy; the repository's own thresholds.yaml is the
commented reference. In short:

    version: 1
    defaults:            rule, confidence, min_n, max_error_rate (every check), above_chance
    overall:             a bound, or {bound, rule, confidence, min_n, max_error_rate, above_chance}
    slices:              {part|modality|task: {default: ENTRY, <value>: ENTRY}}
    cells:               [{match: "Chest/X-Ray/*", bound, rule?, ...}, ...]  later entries win
    credibility:         min_rationality, max_shortcut_prob, min_pairs, parts, exclude_low_tasks
    image_dependence:    min_drop (standard - blind accuracy)
    position_robustness: max_gap, min_circular_accuracy
    regression:          alpha, margin (McNemar against a baseline)
    profiles:            {name: overlay}, deep-merged over the rest by `--profile name`

An ENTRY is a bound (a number in [0, 1]), a mapping with `bound` and any of the
decision keys, or null (not checked). Sections `overall`, `slices`, `cells` and
`credibility` produce checks only when present. `image_dependence`,
`position_robustness` and `regression` only produce checks when their variant or a
baseline is requested, so when absent they take the built-in defaults below.

Every problem raises ThresholdsError naming the file, the key path
(`cells[2].match`), the offending value and the fix.
"""

from __future__ import annotations

import copy
import fnmatch
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from medrcube.metrics.power import RULES
from medrcube.taxonomy import (
    MODALITIES,
    PARTS,
    TASK_NAMES,
    canonical_modality,
    canonical_part,
    canonical_task,
    did_you_mean,
)
from medrcube.yamlconf import YamlFileError, read_yaml_file

SCHEMA_VERSION = 1
AXES: tuple[str, ...] = ("part", "modality", "task")
DECISION_KEYS = ("rule", "confidence", "min_n", "max_error_rate")
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
    "profiles",
)
# Built-in decision defaults, used for any key the file's `defaults` leaves out.
BUILTIN_DEFAULTS = {"rule": "lower_bound", "confidence": 0.95, "min_n": 10, "max_error_rate": 0.05, "above_chance": 0.0}


class ThresholdsError(ValueError):
    """A problem in a thresholds file: names the file, the key path, the value and the fix."""

    def __init__(self, file: str, key: str, problem: str, value: Any = None, fix: str = "", *, show_value=True):
        self.file, self.key, self.problem, self.value, self.fix = file, key, problem, value, fix
        where = f"{file}: {key}: " if key else f"{file}: "
        got = f" (got {value!r})" if show_value else ""
        super().__init__(f"{where}{problem}{got}" + (f". Fix: {fix}" if fix else ""))


# --------------------------------------------------------------------------- policy values


@dataclass(frozen=True, slots=True)
class Decision:
    """How a check decides: the rule and the evidence it requires."""

    rule: str  # "point" or "lower_bound"
    confidence: float  # of the two-sided Wilson interval whose lower end lower_bound uses
    min_n: int  # fewer graded items: skipped as insufficient evidence
    max_error_rate: float  # more API errors: the check errors instead of deciding
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
    source: str = ""
    above_chance: float = 0.0

    @property
    def decision(self) -> Decision:
        return Decision(self.rule, self.confidence, self.min_n, self.max_error_rate, self.above_chance)


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
    min_rationality: float | None
    max_shortcut_prob: float | None
    min_pairs: int
    source: str = ""


@dataclass(frozen=True, slots=True)
class CredibilityPolicy:
    enabled: bool
    overall: CredibilityBounds
    by_part: bool
    parts: dict[str, CredibilityBounds] = field(default_factory=dict, hash=False)
    rule: str = "point"
    confidence: float = 0.95
    max_error_rate: float = 0.05
    exclude_low_tasks: tuple[str, ...] = ("View Recognition",)

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
    source: str = "position_robustness"


@dataclass(frozen=True, slots=True)
class RegressionPolicy:
    enabled: bool = True
    alpha: float = 0.05
    margin: float = 0.0
    min_n: int = 10
    max_error_rate: float = 0.05
    per_cell: bool = True
    confidence: float = 0.95
    source: str = "regression"


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


# --------------------------------------------------------------------------- YAML loading


def _read(path: Path) -> Any:
    try:
        return read_yaml_file(path, missing_fix="pass --thresholds PATH, or copy the repository's thresholds.yaml here")
    except YamlFileError as exc:
        raise ThresholdsError(exc.path, "", exc.problem, show_value=False, fix=exc.fix) from None


# --------------------------------------------------------------------------- validation


class _Checker:
    """Type and range checks that raise ThresholdsError with the file and key path."""

    def __init__(self, file: str):
        self.file = file

    def fail(self, key: str, problem: str, value: Any = None, fix: str = "", show_value: bool = True):
        raise ThresholdsError(self.file, key, problem, value, fix, show_value=show_value)

    def mapping(self, key: str, value: Any, allowed: Iterable[str] | None) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(key, "must be a mapping", value, "write `key: value` lines indented under it")
        if allowed is not None:
            allowed = tuple(allowed)
            for k in value:
                if not isinstance(k, str) or k not in allowed:
                    self.fail(
                        f"{key}.{k}" if key else str(k),
                        "unknown key" + did_you_mean(str(k), allowed),
                        show_value=False,
                        fix=f"use one of {', '.join(allowed)}",
                    )
        return value

    def prob(self, key: str, value: Any, what: str = "a bound") -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(key, f"{what} must be a number between 0 and 1", value, "write e.g. 0.6 (not 60% or '0.6')")
        if not 0.0 <= float(value) <= 1.0:
            hint = f"write {value / 100:g}" if 1 < value <= 100 else "use a value between 0 and 1"
            self.fail(key, f"{what} must be between 0 and 1", value, hint)
        return float(value)

    def open_prob(self, key: str, value: Any, what: str) -> float:
        v = self.prob(key, value, what)
        if not 0.0 < v < 1.0:
            self.fail(key, f"{what} must be strictly between 0 and 1", value, "write e.g. 0.95")
        return v

    def count(self, key: str, value: Any, minimum: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, "must be a whole number", value, f"write an integer >= {minimum}, e.g. 10")
        if value < minimum:
            self.fail(key, f"must be at least {minimum}", value, f"write an integer >= {minimum}")
        return int(value)

    def boolean(self, key: str, value: Any) -> bool:
        if not isinstance(value, bool):
            self.fail(key, "must be true or false", value, "write true or false (unquoted)")
        return value

    def rule(self, key: str, value: Any) -> str:
        if value not in RULES:
            self.fail(
                key, "unknown decision rule" + did_you_mean(str(value), RULES), value, f"use one of {', '.join(RULES)}"
            )
        return value

    def decision(self, key: str, d: Mapping[str, Any]) -> dict[str, Any]:
        """The decision keys present in d, validated."""
        out: dict[str, Any] = {}
        if "rule" in d:
            out["rule"] = self.rule(f"{key}.rule", d["rule"])
        if "confidence" in d:
            out["confidence"] = self.open_prob(f"{key}.confidence", d["confidence"], "a confidence level")
        if "min_n" in d:
            out["min_n"] = self.count(f"{key}.min_n", d["min_n"])
        if "max_error_rate" in d:
            out["max_error_rate"] = self.prob(f"{key}.max_error_rate", d["max_error_rate"], "an error rate")
        if "above_chance" in d:
            out["above_chance"] = self.prob(f"{key}.above_chance", d["above_chance"], "a margin over chance")
        return out

    def optional_prob(self, key: str, d: Mapping[str, Any], name: str, what: str = "a bound") -> Any:
        """A probability, None when written as null, _ABSENT when not written."""
        if name not in d:
            return _ABSENT
        return None if d[name] is None else self.prob(f"{key}.{name}", d[name], what)


_ABSENT = object()


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _validate_entry(c: _Checker, key: str, value: Any, *, need_bound: bool) -> dict[str, Any] | None:
    """A slice/overall ENTRY: a number, null, or {bound, decision keys}. Returns the fields set."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"bound": c.prob(key, value)}
    if not isinstance(value, dict):
        c.fail(key, "must be a bound (a number in [0, 1]), a mapping with `bound`, or null", value,
               "write e.g. `0.5` or `{bound: 0.5, rule: point}`")
    c.mapping(key, value, ("bound", *ACCURACY_KEYS))
    out = c.decision(key, value)
    if "bound" in value:
        if value["bound"] is None:
            return None
        out["bound"] = c.prob(f"{key}.bound", value["bound"])
    elif need_bound:
        c.fail(key, "has no `bound`", value, "add `bound: 0.5` (or write the number alone)")
    return out


def _parse_pattern(c: _Checker, key: str, value: Any) -> tuple[str, str, str]:
    if not isinstance(value, str) or not value.strip():
        c.fail(key, "must be a pattern `part/modality/task`", value, 'write e.g. "Chest/X-Ray/*"')
    parts = [p.strip() for p in value.split("/")]
    if len(parts) != 3 or not all(parts):
        c.fail(
            key, "must have exactly three non-empty parts `part/modality/task`", value,
            'write e.g. "Chest/X-Ray/*" or "*/*/Disease Diagnosis"; use * for any value',
        )
    canon = (canonical_part, canonical_modality, canonical_task)
    # A literal component may use an alias or an abbreviation ("xray", "DD"); globs are kept.
    return tuple(p if any(ch in p for ch in "*?[") else canon[i](p).value for i, p in enumerate(parts))  # type: ignore[return-value]


def _validate_cells(c: _Checker, key: str, value: Any) -> list[CellRule]:
    if not isinstance(value, list):
        c.fail(key, "must be a list of entries `- match: ...`", value, 'write `- {match: "*/*/*", bound: 0.4}`')
    rules = []
    for i, entry in enumerate(value):
        k = f"{key}[{i}]"
        if not isinstance(entry, dict):
            c.fail(k, "must be a mapping with `match` and `bound`", entry, 'write `- {match: "Chest/*/*", bound: 0.5}`')
        c.mapping(k, entry, ("match", "bound", "optional", *ACCURACY_KEYS))
        if "optional" in entry:
            c.boolean(f"{k}.optional", entry["optional"])
        if "match" not in entry:
            c.fail(k, "has no `match`", entry, 'add `match: "part/modality/task"` (use * for any value)')
        pattern = _parse_pattern(c, f"{k}.match", entry["match"])
        if "bound" not in entry:
            c.fail(k, "has no `bound`", entry, "add `bound: 0.4`, or `bound: null` to leave matching cells unchecked")
        bound = None if entry["bound"] is None else c.prob(f"{k}.bound", entry["bound"])
        dec = c.decision(k, entry)
        rules.append(
            CellRule(match=entry["match"], pattern=pattern, key=k, bound=bound, disabled=bound is None,
                     optional=entry.get("optional", False), **dec)
        )
    return rules


def _validate_doc(c: _Checker, doc: Any, prefix: str, *, top: bool) -> None:
    """Validate a whole file (top=True) or a profile overlay: types, ranges, unknown keys."""
    allowed = TOP_KEYS if top else tuple(k for k in TOP_KEYS if k not in ("version", "profiles"))
    c.mapping(prefix, doc, allowed)
    if top:
        if "version" not in doc:
            c.fail("version", "missing", show_value=False, fix=f"add `version: {SCHEMA_VERSION}` at the top")
        if doc["version"] != SCHEMA_VERSION:
            c.fail("version", f"unsupported schema version; this medrcube reads version {SCHEMA_VERSION}",
                   doc["version"], f"write `version: {SCHEMA_VERSION}` and follow the repository's thresholds.yaml")
    p = lambda k: _join(prefix, k)  # noqa: E731
    if "defaults" in doc:
        c.mapping(p("defaults"), doc["defaults"], ACCURACY_KEYS)
        c.decision(p("defaults"), doc["defaults"])
    if "overall" in doc:
        _validate_entry(c, p("overall"), doc["overall"], need_bound=top)
    if "slices" in doc and doc["slices"] is not None:
        slices = c.mapping(p("slices"), doc["slices"], AXES)
        for axis, spec in slices.items():
            k = f"{p('slices')}.{axis}"
            if spec is None:
                continue
            if not isinstance(spec, dict):
                c.fail(k, "must be a mapping of `default:` and per-value bounds", spec,
                       "write e.g. `default: 0.45` and `Chest: 0.5` indented under it")
            for value_name, entry in spec.items():
                if not isinstance(value_name, str):
                    c.fail(f"{k}.{value_name}", "keys must be names (`default` or a value of the axis)", value_name,
                           "quote the name")
                _validate_entry(c, f"{k}.{value_name}", entry, need_bound=top and value_name == "default")
    if "cells" in doc and doc["cells"] is not None:
        _validate_cells(c, p("cells"), doc["cells"])
    if "credibility" in doc and doc["credibility"] is not None:
        _validate_credibility(c, p("credibility"), doc["credibility"])
    if "image_dependence" in doc and doc["image_dependence"] is not None:
        k = p("image_dependence")
        d = c.mapping(k, doc["image_dependence"], ("enabled", "min_drop", *DECISION_KEYS))
        if "enabled" in d:
            c.boolean(f"{k}.enabled", d["enabled"])
        if "min_drop" in d:
            c.prob(f"{k}.min_drop", d["min_drop"], "an accuracy drop")
        c.decision(k, d)
    if "position_robustness" in doc and doc["position_robustness"] is not None:
        k = p("position_robustness")
        d = c.mapping(k, doc["position_robustness"], ("enabled", "max_gap", "min_circular_accuracy", *DECISION_KEYS))
        if "enabled" in d:
            c.boolean(f"{k}.enabled", d["enabled"])
        c.optional_prob(k, d, "max_gap", "a gap")
        c.optional_prob(k, d, "min_circular_accuracy")
        c.decision(k, d)
    if "regression" in doc and doc["regression"] is not None:
        k = p("regression")
        d = c.mapping(k, doc["regression"], ("enabled", "alpha", "margin", "min_n", "max_error_rate", "per_cell",
                                             "confidence"))
        for b in ("enabled", "per_cell"):
            if b in d:
                c.boolean(f"{k}.{b}", d[b])
        if "alpha" in d:
            c.open_prob(f"{k}.alpha", d["alpha"], "a significance level")
        if "margin" in d:
            c.prob(f"{k}.margin", d["margin"], "a margin")
        c.decision(k, {x: d[x] for x in ("min_n", "max_error_rate", "confidence") if x in d})
    if top and "profiles" in doc and doc["profiles"] is not None:
        profiles = c.mapping("profiles", doc["profiles"], None)
        for name, overlay in profiles.items():
            if not isinstance(name, str):
                c.fail(f"profiles.{name}", "a profile name must be a string", name, "quote the name")
            _validate_doc(c, overlay, f"profiles.{name}", top=False)


_CRED_BOUND_KEYS = ("min_rationality", "max_shortcut_prob", "min_pairs")
_CRED_KEYS = (*_CRED_BOUND_KEYS, "enabled", "by_part", "parts", "exclude_low_tasks", "rule", "confidence",
              "max_error_rate")


def _validate_credibility(c: _Checker, k: str, value: Any) -> None:
    d = c.mapping(k, value, _CRED_KEYS)
    for b in ("enabled", "by_part"):
        if b in d:
            c.boolean(f"{k}.{b}", d[b])
    c.optional_prob(k, d, "min_rationality")
    c.optional_prob(k, d, "max_shortcut_prob")
    if "min_pairs" in d:
        c.count(f"{k}.min_pairs", d["min_pairs"])
    c.decision(k, {x: d[x] for x in ("rule", "confidence", "max_error_rate") if x in d})
    if "exclude_low_tasks" in d:
        tasks = d["exclude_low_tasks"]
        if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
            c.fail(f"{k}.exclude_low_tasks", "must be a list of task names", tasks,
                   "write e.g. `[View Recognition]`, or `[]` to count every lower-level task")
    if "parts" in d and d["parts"] is not None:
        parts = c.mapping(f"{k}.parts", d["parts"], None)
        for part, spec in parts.items():
            pk = f"{k}.parts.{part}"
            c.mapping(pk, spec, _CRED_BOUND_KEYS)
            c.optional_prob(pk, spec, "min_rationality")
            c.optional_prob(pk, spec, "max_shortcut_prob")
            if "min_pairs" in spec:
                c.count(f"{pk}.min_pairs", spec["min_pairs"])


# --------------------------------------------------------------------------- merging, building


def _deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; `cells` lists are appended (so the profile's entries
    come later and win); anything else is replaced."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if key == "cells" and isinstance(out.get(key), list) and isinstance(value, list):
            out[key] = out[key] + copy.deepcopy(value)
        elif isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _cells_with_keys(doc: dict[str, Any], profile: str | None, base_len: int) -> list[tuple[str, Any]]:
    """Each merged cell entry with the key path it was written at (for messages)."""
    out = []
    for i, entry in enumerate(doc.get("cells") or []):
        out.append((f"cells[{i}]" if i < base_len else f"profiles.{profile}.cells[{i - base_len}]", entry))
    return out


def _bound(defaults: Decision, fields: Mapping[str, Any], source: str, inherit: Mapping[str, Any] = {}) -> Bound:
    d = asdict(defaults)
    d.update({k: v for k, v in inherit.items() if k in ACCURACY_KEYS})
    d.update({k: v for k, v in fields.items() if k in ACCURACY_KEYS})
    bound = fields.get("bound", inherit.get("bound"))
    return Bound(bound=bound, source=source, **d)


def _build(
    c: _Checker, doc: dict[str, Any], profile: str | None, base_cells: int, overlay: Mapping[str, Any] | None = None
) -> Policy:
    def src(*path: str) -> str:
        """The key path a value was written at: in the profile when the profile set it."""
        node: Any = overlay
        for k in path:
            if not isinstance(node, Mapping) or k not in node:
                return ".".join(path)
            node = node[k]
        return f"profiles.{profile}." + ".".join(path)

    dd = dict(BUILTIN_DEFAULTS)
    dd.update(c.decision("defaults", doc.get("defaults") or {}))
    defaults = Decision(**dd)

    overall = None
    if doc.get("overall") is not None:
        fields = _validate_entry(c, "overall", doc["overall"], need_bound=True)
        overall = None if fields is None else _bound(defaults, fields, src("overall"))

    slices: dict[str, SlicePolicy] = {}
    for axis, spec in (doc.get("slices") or {}).items():
        if spec is None:
            continue
        key = f"slices.{axis}"
        default_fields = _validate_entry(c, f"{key}.default", spec.get("default"), need_bound=True)
        default = None if default_fields is None else _bound(defaults, default_fields, src("slices", axis, "default"))
        values: dict[str, Bound | None] = {}
        for name, entry in spec.items():
            if name == "default":
                continue
            fields = _validate_entry(c, f"{key}.{name}", entry, need_bound=default_fields is None)
            values[name] = None if fields is None else _bound(defaults, fields, src("slices", axis, name), default_fields or {})
        slices[axis] = SlicePolicy(axis, default, values)

    cells: list[CellRule] = []
    for key, entry in _cells_with_keys(doc, profile, base_cells):
        (rule,) = _validate_cells(c, "cells", [entry])
        cells.append(replace(rule, key=key))

    credibility = None
    if doc.get("credibility") is not None:
        credibility = _build_credibility(doc["credibility"], defaults, src)

    def section(name: str, cls: type, keys: tuple[str, ...]) -> Any:
        # Every decision key a section leaves out comes from `defaults`, as everywhere.
        d = doc.get(name) or {}
        kw = {k: getattr(defaults, k) for k in DECISION_KEYS if k in cls.__dataclass_fields__}
        kw.update({k: d[k] for k in keys if k in d})
        return cls(source=src(name), **kw)

    image_dependence = section("image_dependence", ImageDependencePolicy, ("enabled", "min_drop", *DECISION_KEYS))
    position = section(
        "position_robustness", PositionPolicy, ("enabled", "max_gap", "min_circular_accuracy", *DECISION_KEYS)
    )
    regression = section(
        "regression", RegressionPolicy, ("enabled", "alpha", "margin", "min_n", "max_error_rate", "per_cell",
                                         "confidence")
    )
    return Policy(
        source=c.file,
        version=doc["version"],
        profile=profile,
        profiles=tuple((doc.get("profiles") or {}).keys()),
        defaults=defaults,
        overall=overall,
        slices=slices,
        cells=tuple(cells),
        credibility=credibility,
        image_dependence=image_dependence,
        position=position,
        regression=regression,
    )


def _build_credibility(d: Mapping[str, Any], defaults: Decision, src: Any) -> CredibilityPolicy:
    min_pairs = d.get("min_pairs", defaults.min_n)
    overall = CredibilityBounds(d.get("min_rationality"), d.get("max_shortcut_prob"), min_pairs, src("credibility"))
    parts = {}
    for part, spec in (d.get("parts") or {}).items():
        parts[part] = CredibilityBounds(
            spec.get("min_rationality", overall.min_rationality),
            spec.get("max_shortcut_prob", overall.max_shortcut_prob),
            spec.get("min_pairs", min_pairs),
            src("credibility", "parts", part),
        )
    tasks = d.get("exclude_low_tasks")
    return CredibilityPolicy(
        enabled=d.get("enabled", True),
        overall=overall,
        by_part=d.get("by_part", True),
        parts=parts,
        rule=d.get("rule", defaults.rule),
        confidence=d.get("confidence", defaults.confidence),
        max_error_rate=d.get("max_error_rate", defaults.max_error_rate),
        exclude_low_tasks=("View Recognition",) if tasks is None else tuple(canonical_task(t).value for t in tasks),
    )


def load_policy(path: str | os.PathLike[str], profile: str | None = None) -> Policy:
    """Read and strictly validate a thresholds file, applying `profile` if given."""
    doc = _read(Path(path))
    if doc is None:
        raise ThresholdsError(str(path), "", "the file is empty", show_value=False,
                              fix=f"start with `version: {SCHEMA_VERSION}`")
    return policy_from_dict(doc, profile, source=str(path))


def policy_from_dict(doc: Any, profile: str | None = None, *, source: str = "<thresholds>") -> Policy:
    """Validate an in-memory document (what load_policy does after reading the file)."""
    c = _Checker(source)
    _validate_doc(c, doc, "", top=True)
    doc = copy.deepcopy(dict(doc))
    profiles = doc.pop("profiles", None) or {}
    base_cells = len(doc.get("cells") or [])
    if profile is not None:
        if profile not in profiles:
            choices = ", ".join(map(str, profiles)) if profiles else "none: the file defines no `profiles`"
            c.fail("profiles", f"unknown profile {profile!r}" + did_you_mean(str(profile), [str(p) for p in profiles]),
                   show_value=False, fix=f"choose one of: {choices}")
        overlay = profiles[profile] or {}
        doc = _deep_merge(doc, overlay)
        doc["profiles"] = profiles
        try:
            return _build(c, doc, profile, base_cells, overlay)
        except ThresholdsError as exc:
            # A key that is complete only after merging: say which profile produced it.
            raise ThresholdsError(exc.file, exc.key, f"{exc.problem} (after applying profile {profile!r})",
                                  exc.value, exc.fix) from None
    doc["profiles"] = profiles
    return _build(c, doc, profile, base_cells)


# --------------------------------------------------------------------------- against a cube


def _cell_id(cell: tuple[str, str, str]) -> str:
    return "/".join(cell)


def _known_values(axis: str) -> tuple[str, ...]:
    return {"part": PARTS, "modality": MODALITIES, "task": TASK_NAMES}[axis]


def validate_against_cells(policy: Policy, cells: Iterable[tuple[str, str, str]]) -> None:
    """Names in the policy must exist in the cube.

    - A `cells` pattern must match at least one cell, unless the entry says
      `optional: true` (a general policy meant for several cubes); even then each
      literal part of it must be a value of the cube or of the taxonomy (a typo is
      never optional).
    - A per-value slice key or credibility part must be a value of its axis in the
      cube or in the taxonomy (a cube without Severity Grading simply has no such
      slice; "Severity Gradin" is a typo).
    """
    cells = [tuple(c) for c in cells]
    c = _Checker(policy.source)
    ids = sorted({_cell_id(cell) for cell in cells})
    axis_values = {axis: sorted({cell[i] for cell in cells}) for i, axis in enumerate(AXES)}
    listing = ", ".join(ids[:12]) + (f", ... ({len(ids)} in all)" if len(ids) > 12 else "")
    for rule in policy.cells:
        if any(rule.matches(cell) for cell in cells):
            continue
        hints = []
        for i, axis in enumerate(AXES):
            comp = rule.pattern[i]
            if any(fnmatch.fnmatchcase(v, comp) for v in axis_values[axis]):
                continue
            if rule.optional and (any(ch in comp for ch in "*?[") or comp in _known_values(axis)):
                continue
            hints.append(f"no {axis} matches {comp!r}" + did_you_mean(comp, axis_values[axis]))
        if rule.optional and not hints:
            continue
        hint = "; ".join(hints) if hints else "no cell has this combination" + did_you_mean(rule.match, ids)
        c.fail(
            f"{rule.key}.match",
            f"matches no cell of the cube ({hint})",
            rule.match,
            "correct the pattern, delete the entry, or add `optional: true` if it is meant for other cubes; "
            f"cells of this cube: {listing}",
        )

    def check_name(key: str, axis: str, name: str) -> None:
        if name in axis_values[axis] or name in _known_values(axis):
            return
        choices = sorted(set(axis_values[axis]) | set(_known_values(axis)))
        c.fail(key, f"is not a {axis} of the cube" + did_you_mean(name, choices), show_value=False,
               fix=f"use one of {', '.join(axis_values[axis])}")

    for axis, sp in policy.slices.items():
        for name in sp.values:
            check_name(f"slices.{axis}.{name}", axis, name)
    if policy.credibility is not None:
        for name in policy.credibility.parts:
            check_name(f"credibility.parts.{name}", "part", name)
