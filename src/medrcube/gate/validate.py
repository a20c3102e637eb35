"""Strict validation of a thresholds document: types, ranges, unknown keys.

Every problem raises ThresholdsError naming the file, the key path (`cells[2].match`),
the offending value and the fix. gate/thresholds.py builds the Policy from the same
helpers, so a value is checked by one function whatever section it is written in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medrcube.gate.checker import Checker, parse_pattern
from medrcube.gate.policy import (
    ACCURACY_KEYS,
    AXES,
    DECISION_KEYS,
    SCHEMA_VERSION,
    TOP_KEYS,
    CellRule,
)
from medrcube.gate.validate_clinical import (
    CALIBRATION_KEYS,
    FINDINGS_KEYS,
    ROBUSTNESS_KEYS,
    SELECTIVE_KEYS,
    read_registered_sections,
    registered_sections,
    validate_clinical_sections,
)

# An accuracy entry's explicit permission for a bound at or below chance (gate/record.py).
AT_CHANCE = "at_chance"
REGRESSION_KEYS = ("enabled", "alpha", "margin", "min_n", "max_error_rate", "per_cell", "rule", "required",
                   "cells_required")
# The clinical-depth and image-perturbation sections are checked in gate/validate_clinical.py.
__all__ = ["CALIBRATION_KEYS", "FINDINGS_KEYS", "REGRESSION_KEYS", "ROBUSTNESS_KEYS", "SELECTIVE_KEYS", "Checker",
           "validate_cells", "validate_doc", "validate_entry"]


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def validate_entry(c: Checker, key: str, value: Any, *, need_bound: bool) -> dict[str, Any] | None:
    """A slice/overall ENTRY: a number, null, or {bound, decision keys}. Returns the fields set."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"bound": c.prob(key, value)}
    if not isinstance(value, dict):
        c.fail(key, "must be a bound (a number in [0, 1]), a mapping with `bound`, or null", value,
               "write e.g. `0.5` or `{bound: 0.5, rule: point}`")
    c.mapping(key, value, ("bound", *ACCURACY_KEYS, AT_CHANCE))
    if AT_CHANCE in value:  # a bound at or below chance, allowed explicitly (gate/record.py)
        c.boolean(f"{key}.{AT_CHANCE}", value[AT_CHANCE])
    out = c.decision(key, value)
    if "bound" in value:
        if value["bound"] is None:
            return None
        out["bound"] = c.prob(f"{key}.bound", value["bound"])
    elif need_bound:
        c.fail(key, "has no `bound`", value, "add `bound: 0.5` (or write the number alone)")
    return out


def validate_cells(c: Checker, key: str, value: Any) -> list[CellRule]:
    if not isinstance(value, list):
        c.fail(key, "must be a list of entries `- match: ...`", value, 'write `- {match: "*/*/*", bound: 0.4}`')
    rules = []
    for i, entry in enumerate(value):
        k = f"{key}[{i}]"
        if not isinstance(entry, dict):
            c.fail(k, "must be a mapping with `match` and `bound`", entry, 'write `- {match: "Chest/*/*", bound: 0.5}`')
        c.mapping(k, entry, ("match", "bound", "optional", *ACCURACY_KEYS, AT_CHANCE))
        for flag in ("optional", AT_CHANCE):
            if flag in entry:
                c.boolean(f"{k}.{flag}", entry[flag])
        if "match" not in entry:
            c.fail(k, "has no `match`", entry, 'add `match: "part/modality/task"` (use * for any value)')
        pattern = parse_pattern(c, f"{k}.match", entry["match"])
        if "bound" not in entry:
            c.fail(k, "has no `bound`", entry, "add `bound: 0.4`, or `bound: null` to leave matching cells unchecked")
        bound = None if entry["bound"] is None else c.prob(f"{k}.bound", entry["bound"])
        dec = c.decision(k, entry)
        rules.append(
            CellRule(match=entry["match"], pattern=pattern, key=k, bound=bound, disabled=bound is None,
                     optional=entry.get("optional", False), **dec)
        )
    return rules


def validate_doc(c: Checker, doc: Any, prefix: str, *, top: bool) -> None:
    """Validate a whole file (top=True) or a profile overlay: types, ranges, unknown keys."""
    allowed = (*TOP_KEYS, *registered_sections())
    allowed = allowed if top else tuple(k for k in allowed if k not in ("version", "profiles"))
    c.mapping(prefix, doc, allowed)
    if top:
        if "version" not in doc:
            c.fail("version", "missing", show_value=False, fix=f"add `version: {SCHEMA_VERSION}` at the top")
        if doc["version"] != SCHEMA_VERSION:
            c.fail("version", f"unsupported schema version; this medrcube reads version {SCHEMA_VERSION}",
                   doc["version"], f"write `version: {SCHEMA_VERSION}` and follow the repository's thresholds.yaml")
    def p(k: str) -> str:
        return _join(prefix, k)

    if "defaults" in doc:
        c.mapping(p("defaults"), doc["defaults"], ACCURACY_KEYS)
        c.decision(p("defaults"), doc["defaults"])
    if "overall" in doc:
        validate_entry(c, p("overall"), doc["overall"], need_bound=top)
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
                validate_entry(c, f"{k}.{value_name}", entry, need_bound=top and value_name == "default")
    if "cells" in doc and doc["cells"] is not None:
        validate_cells(c, p("cells"), doc["cells"])
    if "credibility" in doc and doc["credibility"] is not None:
        validate_credibility(c, p("credibility"), doc["credibility"])
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
        d = c.mapping(k, doc["regression"], REGRESSION_KEYS)
        for b in ("enabled", "per_cell", "cells_required"):
            if b in d:
                c.boolean(f"{k}.{b}", d[b])
        if "alpha" in d:
            c.open_prob(f"{k}.alpha", d["alpha"], "a significance level")
        if "margin" in d:
            c.prob(f"{k}.margin", d["margin"], "a margin")
        c.decision(k, {x: d[x] for x in ("min_n", "max_error_rate", "rule", "required") if x in d})
    validate_clinical_sections(c, doc, p)
    read_registered_sections(c, doc, p)
    if top and "profiles" in doc and doc["profiles"] is not None:
        profiles = c.mapping("profiles", doc["profiles"], None)
        for name, overlay in profiles.items():
            if not isinstance(name, str):
                c.fail(f"profiles.{name}", "a profile name must be a string", name, "quote the name")
            validate_doc(c, overlay, f"profiles.{name}", top=False)


CRED_BOUND_KEYS = ("min_grounding", "max_luck_rate", "min_odds_ratio", "min_pairs")
CRED_KEYS = (*CRED_BOUND_KEYS, "enabled", "by_part", "parts", "exclude_low_tasks", "rule", "confidence",
             "max_error_rate", "required", "parts_required", "odds_ratio_share", "shortcut_odds_ratio",
             "shortcut_luck_rate", "fail_share")


def _odds_ratio(c: Checker, key: str, d: Mapping[str, Any], name: str = "min_odds_ratio") -> None:
    v = d.get(name)
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int | float) or not 1.0 <= float(v) <= 1e4:
        c.fail(f"{key}.{name}", "an odds ratio bound must be a number from 1 (no dependence) to 10000", v,
               "write e.g. 3: a right perception must multiply the odds of a right diagnosis by at least 3")


def _share(c: Checker, key: str, d: Mapping[str, Any], name: str, what: str) -> None:
    v = d.get(name)
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 < float(v) < 1.0:
        c.fail(f"{key}.{name}", f"must be a share strictly between 0 and 1 ({what})", v,
               "write e.g. 0.5, or delete the key for the default")


def _shortcut(c: Checker, key: str, d: Mapping[str, Any]) -> None:
    """The routes' shares of the levels, and the fail claim's bounds (a shortcut is
    shown below this odds ratio and above this luck rate)."""
    _share(c, key, d, "odds_ratio_share", "of the pass level given to the odds ratio's route")
    _share(c, key, d, "fail_share", "of the family-wise fail level given to the overall credibility check")
    _odds_ratio(c, key, d, "shortcut_odds_ratio")
    c.optional_prob(key, d, "shortcut_luck_rate", "a share of right diagnoses")


# Keys of the paper's measures, which are reported but no longer bounds (docs/guarantees.md).
RETIREDCRED_KEYS = ("min_rationality", "max_shortcut_prob")


def _retired(c: Checker, k: str, d: Mapping[str, Any]) -> None:
    for name in RETIREDCRED_KEYS:
        if name in d:
            c.fail(f"{k}.{name}", "is no longer a bound: rationality and shortcut probability move with accuracy "
                   "(for a model whose diagnosis ignores its perception, shortcut probability equals diagnostic "
                   "accuracy), so they are reported, not gated", show_value=False,
                   fix="delete it and bound the luck rate instead, e.g. `max_luck_rate: 0.2` (see docs/guarantees.md)")


def validate_credibility(c: Checker, k: str, value: Any) -> None:
    if isinstance(value, dict):
        _retired(c, k, value)
    d = c.mapping(k, value, CRED_KEYS)
    for b in ("enabled", "by_part", "parts_required"):
        if b in d:
            c.boolean(f"{k}.{b}", d[b])
    c.optional_prob(k, d, "min_grounding", "a grounding difference")
    c.optional_prob(k, d, "max_luck_rate", "a share of right diagnoses")
    _odds_ratio(c, k, d)
    _shortcut(c, k, d)
    if "min_pairs" in d:
        c.count(f"{k}.min_pairs", d["min_pairs"])
    c.decision(k, {x: d[x] for x in ("rule", "confidence", "max_error_rate", "required") if x in d})
    if "exclude_low_tasks" in d:
        tasks = d["exclude_low_tasks"]
        if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
            c.fail(f"{k}.exclude_low_tasks", "must be a list of task names", tasks,
                   "write e.g. `[View Recognition]`, or `[]` to count every lower-level task")
    if "parts" in d and d["parts"] is not None:
        parts = c.mapping(f"{k}.parts", d["parts"], None)
        for part, spec in parts.items():
            pk = f"{k}.parts.{part}"
            if isinstance(spec, dict):
                _retired(c, pk, spec)
            c.mapping(pk, spec, CRED_BOUND_KEYS)
            c.optional_prob(pk, spec, "min_grounding", "a grounding difference")
            c.optional_prob(pk, spec, "max_luck_rate", "a share of right diagnoses")
            _odds_ratio(c, pk, spec)
            if "min_pairs" in spec:
                c.count(f"{pk}.min_pairs", spec["min_pairs"])
