"""Validation of the clinical-depth and image-perturbation policy sections: robustness, findings,
calibration, selective, and of the sections of kinds registered beyond the built-in ones
(gate/kinds.py: each entry's `read_policy`). The same Checker as every other section
(gate/validate.py), so a misspelt key or a value out of range names the key path and the fix."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from medrcube.gate.checker import Checker, parse_pattern
from medrcube.gate.kinds import registered
from medrcube.gate.policy import DECISION_KEYS, TOP_KEYS
from medrcube.taxonomy import did_you_mean

ROBUSTNESS_KEYS = ("enabled", "margin", "min_agreement", "scopes", *DECISION_KEYS)
FINDINGS_KEYS = ("enabled", "min_sensitivity", "cells", "scopes", "prevalence", *DECISION_KEYS)
CALIBRATION_KEYS = ("enabled", "max_ce", "max_ece", "n_bins", "n_boot", *DECISION_KEYS)
SELECTIVE_KEYS = ("enabled", "deferral_cost", "min_utility", "accuracy_at_coverage", "coverage_at_risk", "scopes",
                  *DECISION_KEYS)

ROBUSTNESS_SCOPES = ("overall", "slice", "part", "modality", "task", "cell")
FINDINGS_SCOPES = ("cell", "overall")
SELECTIVE_SCOPES = ("overall", "cell")


def validate_scopes(c: Checker, key: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        c.fail(key, "must be a non-empty list of scopes", value, f"write e.g. `[{allowed[0]}]`; scopes: "
               f"{', '.join(allowed)}")
    for i, v in enumerate(value):
        if v not in allowed:
            c.fail(f"{key}[{i}]", "unknown scope" + did_you_mean(v, allowed), v, f"use one of {', '.join(allowed)}")
    return tuple(dict.fromkeys(value))


def _named_probs(c: Checker, key: str, value: Any, what: str, *, open_: bool = False) -> dict[str, float]:
    d = c.mapping(key, value, None)
    out: dict[str, float] = {}
    for name, v in d.items():
        if not isinstance(name, str) or not name.strip():
            c.fail(f"{key}.{name}", "keys must be finding names", name, 'quote the name, e.g. "pneumothorax": 0.8')
        out[name] = c.open_prob(f"{key}.{name}", v, what) if open_ else c.prob(f"{key}.{name}", v, what)
    return out


def _coverages(c: Checker, key: str, value: Any, *, by_risk: bool = False) -> dict[float, float]:
    d = c.mapping(key, value, None)
    out: dict[float, float] = {}
    for cov, bound in d.items():
        if isinstance(cov, bool) or not isinstance(cov, int | float) or not 0.0 < float(cov) <= 1.0:
            if by_risk:
                c.fail(f"{key}.{cov}", "a risk must be a number in (0, 1]", cov,
                       "write e.g. `0.1: 0.5` (at most 10% wrong, answering at least half the items)")
            c.fail(f"{key}.{cov}", "a coverage must be a number in (0, 1]", cov,
                   "write e.g. `0.8: 0.9` (answer the 80% most confident items, at least 90% right)")
        out[float(cov)] = c.prob(f"{key}.{cov}", bound, "a coverage" if by_risk else "an accuracy")
    return out


def _section(c: Checker, doc: Mapping[str, Any], name: str, p: Callable[[str], str], keys: tuple[str, ...]) -> Any:
    if name not in doc or doc[name] is None:
        return None
    k = p(name)
    d = c.mapping(k, doc[name], keys)
    if "enabled" in d:
        c.boolean(f"{k}.enabled", d["enabled"])
    c.decision(k, {x: d[x] for x in DECISION_KEYS if x in d})
    return d


def validate_clinical_sections(c: Checker, doc: Mapping[str, Any], p: Callable[[str], str]) -> None:
    """Types, ranges and unknown keys of the four sections, wherever they are written."""
    d = _section(c, doc, "robustness", p, ROBUSTNESS_KEYS)
    if d is not None:
        k = p("robustness")
        c.optional_prob(k, d, "margin", "a margin")
        c.optional_prob(k, d, "min_agreement", "an agreement rate")
        if "scopes" in d:
            validate_scopes(c, f"{k}.scopes", d["scopes"], ROBUSTNESS_SCOPES)
    d = _section(c, doc, "findings", p, FINDINGS_KEYS)
    if d is not None:
        k = p("findings")
        if d.get("min_sensitivity") is not None:
            _named_probs(c, f"{k}.min_sensitivity", d["min_sensitivity"], "a sensitivity")
        if d.get("prevalence") is not None:
            _named_probs(c, f"{k}.prevalence", d["prevalence"], "a prevalence", open_=True)
        if "cells" in d:
            cells = d["cells"]
            if not isinstance(cells, list) or not all(isinstance(x, str) for x in cells):
                c.fail(f"{k}.cells", "must be a list of cell patterns", cells, 'write e.g. ["*/*/Disease Diagnosis"]')
            for i, x in enumerate(cells):
                parse_pattern(c, f"{k}.cells[{i}]", x)
        if "scopes" in d:
            validate_scopes(c, f"{k}.scopes", d["scopes"], FINDINGS_SCOPES)
    d = _section(c, doc, "calibration", p, CALIBRATION_KEYS)
    if d is not None:
        k = p("calibration")
        c.optional_prob(k, d, "max_ce", "a calibration error")
        c.optional_prob(k, d, "max_ece", "a calibration error")
        if d.get("max_ce") is not None and d.get("max_ece") is not None:
            c.fail(f"{k}.max_ece", "give one of max_ce and max_ece, not both", show_value=False,
                   fix="keep max_ce (debiased; ECE is biased upward on finite samples) and delete max_ece")
        if "n_bins" in d:
            c.count(f"{k}.n_bins", d["n_bins"], 2)
        if "n_boot" in d:
            c.count(f"{k}.n_boot", d["n_boot"], 50)
    d = _section(c, doc, "selective", p, SELECTIVE_KEYS)
    if d is not None:
        k = p("selective")
        if "deferral_cost" in d:
            c.prob(f"{k}.deferral_cost", d["deferral_cost"], "the cost of a deferral (an error costs 1)")
        c.optional_prob(k, d, "min_utility", "a utility")
        if d.get("accuracy_at_coverage") is not None:
            _coverages(c, f"{k}.accuracy_at_coverage", d["accuracy_at_coverage"])
        if d.get("coverage_at_risk") is not None:
            _coverages(c, f"{k}.coverage_at_risk", d["coverage_at_risk"], by_risk=True)
        if "scopes" in d:
            validate_scopes(c, f"{k}.scopes", d["scopes"], SELECTIVE_SCOPES)


def registered_sections() -> tuple[str, ...]:
    """The policy sections of registered kinds that read their own (`read_policy`)."""
    return tuple(dict.fromkeys(e.section for e in registered()
                               if e.section and e.read_policy is not None and e.section not in TOP_KEYS))


def read_registered_sections(c: Checker, doc: Mapping[str, Any], p: Callable[[str], str]) -> dict[str, Any]:
    """Each registered kind's section, read (and so validated) by its entry: name -> value."""
    out: dict[str, Any] = {}
    for e in registered():
        if e.section in registered_sections() and e.read_policy is not None and doc.get(e.section) is not None:
            out[e.section] = e.read_policy(c, p(e.section), doc[e.section])
    return out
