"""thresholds.yaml: the gate policy, its schema and its strict validation.

The file (version 1) is the whole policy; the repository's own thresholds.yaml is the
commented reference. In short:

    version: 1
    defaults:            rule, confidence, min_n, max_error_rate (every check), above_chance
    overall:             a bound, or {bound, rule, confidence, min_n, max_error_rate, above_chance}
    slices:              {part|modality|task: {default: ENTRY, <value>: ENTRY}}
    cells:               [{match: "Chest/X-Ray/*", bound, rule?, ...}, ...]  later entries win
    credibility:         min_grounding, min_pairs, parts, exclude_low_tasks
    image_dependence:    min_drop (standard - blind accuracy)
    position_robustness: max_gap, min_circular_accuracy
    regression:          alpha, margin, cells_required (non-inferiority against a baseline)
    robustness:          margin, min_agreement, scopes (image perturbations, only when one is asked)
    findings:            min_sensitivity {finding: bound}, cells, scopes, prevalence (docs/clinical.md)
    calibration:         max_ce or max_ece, n_bins, n_boot (needs a confidence on the records)
    selective:           deferral_cost, min_utility (abstain variant), accuracy_at_coverage {c: bound},
                         coverage_at_risk {r: bound}
    profiles:            {name: overlay}, deep-merged over the rest by `--profile name`

An ENTRY is a bound (a number in [0, 1]), a mapping with `bound` and any of the
decision keys, or null (not checked). Sections `overall`, `slices`, `cells` and
`credibility` produce checks only when present. `image_dependence`,
`position_robustness` and `regression` only produce checks when their variant or a
baseline is requested, so when absent they take the built-in defaults below.

Every problem raises ThresholdsError naming the file, the key path
(`cells[2].match`), the offending value and the fix. The schema (the typed values) is
gate/policy.py, the checks of each value gate/validate.py; this module reads, merges
profiles, builds the Policy and checks it against a cube's cells.
"""

from __future__ import annotations

import copy
import fnmatch
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from medrcube.gate.checker import parse_pattern
from medrcube.gate.policy import (
    ACCURACY_KEYS,
    AXES,
    BUILTIN_DEFAULTS,
    DECISION_KEYS,
    FEASIBILITY_ACTIONS,
    SCHEMA_VERSION,
    SCOPE_KEYS,
    Bound,
    CalibrationPolicy,
    CellRule,
    CoveragePolicy,
    CredibilityBounds,
    CredibilityPolicy,
    Decision,
    FeasibilityPolicy,
    FindingsPolicy,
    ImageDependencePolicy,
    Policy,
    PositionPolicy,
    RegressionPolicy,
    RobustnessPolicy,
    ScopePolicy,
    SelectivePolicy,
    SlicePolicy,
    ThresholdsError,
)
from medrcube.gate.validate import (
    CALIBRATION_KEYS,
    REGRESSION_KEYS,
    ROBUSTNESS_KEYS,
    SELECTIVE_KEYS,
    Checker,
    validate_cells,
    validate_doc,
    validate_entry,
)
from medrcube.gate.validate_clinical import (
    FINDINGS_SCOPES,
    ROBUSTNESS_SCOPES,
    SELECTIVE_SCOPES,
    read_registered_sections,
    validate_scopes,
)
from medrcube.taxonomy import MODALITIES, PARTS, TASK_NAMES, canonical_task, did_you_mean

__all__ = [
    "ACCURACY_KEYS", "AXES", "DECISION_KEYS", "SCHEMA_VERSION", "Bound", "CellRule", "CredibilityBounds",
    "CredibilityPolicy", "Decision", "ImageDependencePolicy", "Policy", "PositionPolicy", "RegressionPolicy",
    "SlicePolicy", "ThresholdsError", "load_policy", "policy_from_dict", "read_policy_doc", "validate_against_cells",
]

# --------------------------------------------------------------------------- YAML loading


def _read(path: Path) -> Any:
    # imported here: a run whose policy's parse is remembered (plugin/speed/policy_memo.py) does not load PyYAML
    from medrcube.yamlconf import YamlFileError, read_yaml_file

    try:
        return read_yaml_file(path, missing_fix="pass --thresholds PATH, or copy the repository's thresholds.yaml here")
    except YamlFileError as exc:
        raise ThresholdsError(exc.path, "", exc.problem, show_value=False, fix=exc.fix) from None


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


def _bound(
    defaults: Decision, fields: Mapping[str, Any], source: str, inherit: Mapping[str, Any] | None = None
) -> Bound:
    d = asdict(defaults)
    d.update({k: v for k, v in (inherit or {}).items() if k in ACCURACY_KEYS})
    d.update({k: v for k, v in fields.items() if k in ACCURACY_KEYS})
    bound = fields.get("bound", (inherit or {}).get("bound"))
    return Bound(bound=bound, source=source, **d)


def _build(
    c: Checker, doc: dict[str, Any], profile: str | None, base_cells: int, overlay: Mapping[str, Any] | None = None
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
        fields = validate_entry(c, "overall", doc["overall"], need_bound=True)
        overall = None if fields is None else _bound(defaults, fields, src("overall"))

    slices: dict[str, SlicePolicy] = {}
    for axis, spec in (doc.get("slices") or {}).items():
        if spec is None:
            continue
        key = f"slices.{axis}"
        default_fields = validate_entry(c, f"{key}.default", spec.get("default"), need_bound=True)
        default = None if default_fields is None else _bound(defaults, default_fields, src("slices", axis, "default"))
        values: dict[str, Bound | None] = {}
        for name, entry in spec.items():
            if name == "default":
                continue
            fields = validate_entry(c, f"{key}.{name}", entry, need_bound=default_fields is None)
            values[name] = None if fields is None else _bound(defaults, fields, src("slices", axis, name), default_fields or {})
        slices[axis] = SlicePolicy(axis, default, values)

    cells: list[CellRule] = []
    for key, entry in _cells_with_keys(doc, profile, base_cells):
        (rule,) = validate_cells(c, "cells", [entry])
        cells.append(replace(rule, key=key))

    credibility = None
    if doc.get("credibility") is not None:
        credibility = _build_credibility(doc["credibility"], defaults, src)

    def section(name: str, cls: Any, keys: tuple[str, ...]) -> Any:
        # Every decision key a section leaves out comes from `defaults`, as everywhere.
        d = doc.get(name) or {}
        kw = {k: getattr(defaults, k) for k in DECISION_KEYS if k in cls.__dataclass_fields__}
        kw.update({k: d[k] for k in keys if k in d})
        return cls(source=src(name), **kw)

    image_dependence = section("image_dependence", ImageDependencePolicy, ("enabled", "min_drop", *DECISION_KEYS))
    position = section(
        "position_robustness", PositionPolicy, ("enabled", "max_gap", "min_circular_accuracy", *DECISION_KEYS)
    )
    regression = section("regression", RegressionPolicy, REGRESSION_KEYS)
    robustness = section("robustness", RobustnessPolicy, ROBUSTNESS_KEYS)
    if "scopes" in (doc.get("robustness") or {}):
        robustness = replace(robustness, scopes=validate_scopes(c, "robustness.scopes", doc["robustness"]["scopes"],
                                                                ROBUSTNESS_SCOPES))
    findings = _build_findings(c, doc, defaults, src)
    calibration = None
    if doc.get("calibration") is not None:
        calibration = section("calibration", CalibrationPolicy, CALIBRATION_KEYS)
    maps = ("accuracy_at_coverage", "coverage_at_risk")
    selective = section("selective", SelectivePolicy, tuple(k for k in SELECTIVE_KEYS if k not in maps))
    sel_doc = doc.get("selective") or {}
    selective = replace(
        selective,
        accuracy_at_coverage={float(k): float(v) for k, v in (sel_doc.get("accuracy_at_coverage") or {}).items()},
        coverage_at_risk={float(k): float(v) for k, v in (sel_doc.get("coverage_at_risk") or {}).items()},
        scopes=validate_scopes(c, "selective.scopes", sel_doc.get("scopes", ["overall"]), SELECTIVE_SCOPES),
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
        robustness=robustness,
        findings=findings,
        calibration=calibration,
        selective=selective,
        feasibility=_build_feasibility(c, doc.get("feasibility") or {}, src("feasibility")),
        scope=_build_scope(c, doc.get("scope") or {}, src("scope")),
        coverage=_build_coverage(c, doc.get("coverage") or {}, src("coverage")),
        sections=read_registered_sections(c, doc, src),
    )


def _build_feasibility(c: Checker, d: Mapping[str, Any], source: str) -> FeasibilityPolicy:
    d = c.mapping("feasibility", d, ("when_undecidable", "min_images", "power_margin", "power", "power_icc"))
    action = d.get("when_undecidable", "required")
    if action not in FEASIBILITY_ACTIONS:
        c.fail("feasibility.when_undecidable", "unknown action" + did_you_mean(str(action), FEASIBILITY_ACTIONS),
               action, f"use one of {', '.join(FEASIBILITY_ACTIONS)}")
    min_images = c.count("feasibility.min_images", d.get("min_images", 1))
    margin = c.optional_prob("feasibility", d, "power_margin", "an accuracy margin above the bound")
    power = c.optional_prob("feasibility", d, "power", "a probability of passing")
    icc = c.optional_prob("feasibility", d, "power_icc", "an intra-image correlation")
    return FeasibilityPolicy(action, min_images, source, margin if isinstance(margin, float | int) else None,
                             float(power) if isinstance(power, float | int) else 0.99,
                             float(icc) if isinstance(icc, float | int) else 0.3)


def _axis_names(c: Checker, where: str, d: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The parts, modalities and tasks a section names (`scope`, `coverage.require`), each a list of names."""
    d = c.mapping(where, d, SCOPE_KEYS)
    values: dict[str, tuple[str, ...]] = {}
    for key in SCOPE_KEYS:
        v = d.get(key) or []
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            c.fail(f"{where}.{key}", "must be a list of names", v, f"write e.g. `{key}: [Chest]`")
        values[key] = tuple(v)
    return values


def _build_scope(c: Checker, d: Mapping[str, Any], source: str) -> ScopePolicy:
    return ScopePolicy(**_axis_names(c, "scope", d), source=source)


def _build_coverage(c: Checker, d: Mapping[str, Any], source: str) -> CoveragePolicy:
    d = c.mapping("coverage", d, ("require", "cells"))
    if "cells" in d:
        c.boolean("coverage.cells", d["cells"])
    return CoveragePolicy(**_axis_names(c, "coverage.require", d.get("require") or {}), source=source,
                          cells=bool(d.get("cells", False)))


def _build_findings(c: Checker, doc: Mapping[str, Any], defaults: Decision, src: Callable[..., str]) -> FindingsPolicy | None:
    d = doc.get("findings")
    if d is None:
        return None
    kw: dict[str, Any] = {k: getattr(defaults, k) for k in DECISION_KEYS}
    kw.update({k: d[k] for k in (*DECISION_KEYS, "enabled") if k in d})
    if "cells" in d:
        # Canonical spellings ("DD" -> "Disease Diagnosis"), matched like `cells` entries.
        kw["cells"] = tuple("/".join(parse_pattern(c, f"findings.cells[{i}]", x)) for i, x in enumerate(d["cells"]))
    if "scopes" in d:
        kw["scopes"] = validate_scopes(c, "findings.scopes", d["scopes"], FINDINGS_SCOPES)
    return FindingsPolicy(
        min_sensitivity={str(k): float(v) for k, v in (d.get("min_sensitivity") or {}).items()},
        prevalence={str(k): float(v) for k, v in (d.get("prevalence") or {}).items()},
        source=src("findings"), **kw,
    )


def _build_credibility(d: Mapping[str, Any], defaults: Decision, src: Callable[..., str]) -> CredibilityPolicy:
    min_pairs = d.get("min_pairs", defaults.min_n)
    overall = CredibilityBounds(d.get("min_grounding"), min_pairs, src("credibility"), d.get("max_luck_rate"),
                                d.get("min_odds_ratio"))
    parts = {}
    for part, spec in (d.get("parts") or {}).items():
        parts[part] = CredibilityBounds(
            spec.get("min_grounding", overall.min_grounding),
            spec.get("min_pairs", min_pairs),
            src("credibility", "parts", part),
            spec.get("max_luck_rate", overall.max_luck_rate),
            spec.get("min_odds_ratio", overall.min_odds_ratio),
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
        required=d.get("required", defaults.required),
        parts_required=d.get("parts_required", d.get("required", defaults.required)),
        exclude_low_tasks=("View Recognition",) if tasks is None else tuple(canonical_task(t).value for t in tasks),
        odds_ratio_share=float(d.get("odds_ratio_share", 0.5)),
        shortcut_odds_ratio=d.get("shortcut_odds_ratio"),
        shortcut_luck_rate=d.get("shortcut_luck_rate"),
        fail_share=d.get("fail_share"),
    )


def load_policy(path: str | os.PathLike[str], profile: str | None = None) -> Policy:
    """Read and strictly validate a thresholds file, applying `profile` if given."""
    return policy_from_dict(read_policy_doc(path), profile, source=str(path))


def read_policy_doc(path: str | os.PathLike[str]) -> Any:
    """The parsed document of a thresholds file, not yet validated (`policy_from_dict`
    validates it); ThresholdsError for a file that is missing, unreadable, not YAML or empty."""
    doc = _read(Path(path))
    if doc is None:
        raise ThresholdsError(str(path), "", "the file is empty", show_value=False,
                              fix=f"start with `version: {SCHEMA_VERSION}`")
    return doc


def policy_from_dict(doc: Any, profile: str | None = None, *, source: str = "<thresholds>") -> Policy:
    """Validate an in-memory document (what load_policy does after reading the file)."""
    c = Checker(source)
    validate_doc(c, doc, "", top=True)
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
    cells = [(cell[0], cell[1], cell[2]) for cell in cells]
    c = Checker(policy.source)
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
    # The intended use and the coverage the verdict must rest on: a name the cube and the
    # taxonomy both ignore is a typo (a scope would silently select nothing of it).
    for section, named in (("scope", policy.scope), ("coverage.require", policy.coverage)):
        for key, axis in (("parts", "part"), ("modalities", "modality"), ("tasks", "task")):
            for name in getattr(named, key):
                check_name(f"{section}.{key}.{name}", axis, name)
