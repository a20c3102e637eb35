"""The Checker: type and range checks that raise ThresholdsError with the file and key
path, shared by every section's validation (gate/validate.py, gate/validate_clinical.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from medrcube.gate.policy import ThresholdsError
from medrcube.gate.power import RULES
from medrcube.taxonomy import canonical_modality, canonical_part, canonical_task, did_you_mean


class Checker:
    """Type and range checks that raise ThresholdsError with the file and key path."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, key: str, problem: str, value: Any = None, fix: str = "", show_value: bool = True) -> NoReturn:
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
            hint = (f"write {value / 100:g} ({value:g} looks like a percentage: bounds are fractions, "
                    f"{value / 100:g} means {value:g}%)" if 1 < value <= 100 else "use a value between 0 and 1")
            self.fail(key, f"{what} must be between 0 and 1", value, hint)
        return float(value)

    def open_prob(self, key: str, value: Any, what: str) -> float:
        v = self.prob(key, value, what)
        if not 0.0 < v < 1.0:
            self.fail(key, f"{what} must be strictly between 0 and 1", value, "write e.g. 0.95")
        return v

    def count(self, key: str, value: Any, minimum: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, "must be a whole number", value, f"write an integer >= {minimum}, e.g. {max(minimum, 10)}")
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
        return str(value)

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
        if "required" in d:
            out["required"] = self.boolean(f"{key}.required", d["required"])
        if "above_chance" in d:
            out["above_chance"] = self.prob(f"{key}.above_chance", d["above_chance"], "a margin over chance")
        return out

    def optional_prob(self, key: str, d: Mapping[str, Any], name: str, what: str = "a bound") -> Any:
        """A probability, None when written as null, _ABSENT when not written."""
        if name not in d:
            return _ABSENT
        return None if d[name] is None else self.prob(f"{key}.{name}", d[name], what)


_ABSENT = object()


def parse_pattern(c: Checker, key: str, value: Any) -> tuple[str, str, str]:
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
    part, modality, task = (p if any(ch in p for ch in "*?[") else canon[i](p).value for i, p in enumerate(parts))
    return part, modality, task
