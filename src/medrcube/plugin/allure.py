"""Allure labels, parameters and attachments of a gate case (allure-pytest's dynamic API).

The Behaviors tree of the report groups cases epic > feature > story:

    cell              part > modality > task                (Chest > X-Ray > Disease Diagnosis)
    slice             "Slices" > "By part|modality|task" > value
    overall           "Overall" > "Accuracy" > "All cells"
    credibility       "Credibility" > part (or "All parts") > "Rationality and shortcuts"
    image dependence  "Image dependence" > "All parts" > "Standard vs blind"
    position          "Position robustness" > "All parts" > "Circular accuracy"
    regression        "Regression" > part (or "All parts") > "modality / task" (or "Overall")
    robustness        "Robustness" > perturbation ("jpeg:30") > "scope: accuracy" or
                      "scope: answer agreement" (kinds robustness, robustness_agreement;
                      issue 17: the check's params carry the perturbation as "variant")

Severity comes from the check's labels (gate/checks.py): high-level tasks critical,
mid-level normal, low-level minor; overall blocker; slices, credibility, image
dependence and regression of high-level cells critical.

The numbers (observed, interval, bound, n, ...) are dynamic parameters with
`excluded=True`: shown on the case, left out of Allure's history id, so a case keeps
its history when its accuracy or its bound changes. The pytest parameter itself is the
check id (a string, see pytest_plugin.pytest_generate_tests), so the history id depends
on the test and the check id only.

Every call is a no-op when Allure is not active (no --alluredir): allure-pytest's
listener is then not registered and the hooks have no implementation.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from typing import Any

import allure

# Fixed epics of the checks that are not one cube cell.
EPICS = {
    "slice": "Slices",
    "overall": "Overall",
    "credibility": "Credibility",
    "image_dependence": "Image dependence",
    "position": "Position robustness",
    "regression": "Regression",
    "robustness": "Robustness",
    "robustness_agreement": "Robustness",
}
# Image-perturbation checks (metrics/perturbation.py): what each kind's story says it checks.
ROBUSTNESS_STORIES = {"robustness": "accuracy", "robustness_agreement": "answer agreement"}
ALL_PARTS = "All parts"
WORST_COLUMNS = ("item_id", "cell", "variant", "rotation", "expected", "extracted", "outcome", "question", "response", "note")


def behaviors(check: Any) -> tuple[str, str, str]:
    """(epic, feature, story) of a check."""
    kind = str(check.kind)
    if kind == "cell":
        return check.part, check.modality, check.task
    if kind == "slice":
        axis, value = _slice_axis(check)
        return EPICS["slice"], f"By {axis}", value
    if kind == "overall":
        return EPICS["overall"], "Accuracy", "All cells"
    if kind == "credibility":
        return EPICS["credibility"], check.part or ALL_PARTS, "Rationality and shortcuts"
    if kind == "image_dependence":
        return EPICS["image_dependence"], check.part or ALL_PARTS, "Standard vs blind"
    if kind == "position":
        return EPICS["position"], check.part or ALL_PARTS, "Circular accuracy"
    if kind == "regression":
        if check.task is None and check.modality is None:
            return EPICS["regression"], check.part or ALL_PARTS, "Overall"
        return EPICS["regression"], check.part or ALL_PARTS, f"{check.modality} / {check.task}"
    if kind in ROBUSTNESS_STORIES:
        scope = " / ".join(v for v in (check.part, check.modality, check.task) if v) or "All cells"
        variant = str((getattr(check, "params", None) or {}).get("variant", "perturbation"))
        return EPICS[kind], variant, f"{scope}: {ROBUSTNESS_STORIES[kind]}"
    return EPICS.get(kind, kind), ALL_PARTS, check.id


def _slice_axis(check: Any) -> tuple[str, str]:
    for axis in ("part", "modality", "task"):
        value = getattr(check, axis)
        if value is not None:
            return axis, value
    return "part", check.id


def title(check: Any) -> str:
    epic, feature, story = behaviors(check)
    kind = str(check.kind)
    if kind == "cell":
        return f"{check.part} / {check.modality} / {check.task}: accuracy"
    if kind == "slice":
        return f"{feature.removeprefix('By ')} {story}: accuracy"
    if kind == "overall":
        return "Overall accuracy"
    if kind == "regression":
        scope = "overall" if story == "Overall" else f"{feature} / {story}"
        return f"Regression against the baseline: {scope}"
    if kind in ROBUSTNESS_STORIES:
        return f"Robustness to {feature}: {story}"
    return f"{epic}: {feature}"


def severity(check: Any) -> allure.severity_level:
    value = (check.labels or {}).get("severity", "normal")
    try:
        return allure.severity_level(value)
    except ValueError:
        return allure.severity_level.NORMAL


def label_case(check: Any) -> None:
    """Labels known before any evaluation, so that an errored case is grouped too."""
    epic, feature, story = behaviors(check)
    allure.dynamic.epic(epic)
    allure.dynamic.feature(feature)
    allure.dynamic.story(story)
    allure.dynamic.severity(severity(check))
    allure.dynamic.tag(str(check.kind))
    level = (check.labels or {}).get("level")
    if level:
        allure.dynamic.tag(f"level:{level}")


def label_absent(kind: str) -> None:
    """The case of a kind with no check in this run (no --baseline, no blind variant)."""
    allure.dynamic.epic(EPICS.get(kind, kind))
    allure.dynamic.feature("Not requested")
    allure.dynamic.severity(allure.severity_level.TRIVIAL)


def describe_verdict(check: Any, payload: Mapping[str, Any]) -> None:
    """The decided numbers as excluded parameters, the message as description, and the
    check + verdict (JSON) and the worst items (CSV) as attachments."""
    interval = payload.get("interval")
    numbers = {
        "verdict": payload["verdict"],
        "observed": _num(payload.get("observed")),
        "interval": f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "n/a",
        "bound": _num(payload.get("bound")),
        "rule": payload.get("rule"),
        "n": payload.get("n"),
        "chance": _num(payload.get("chance")),
        "error rate": _num(payload.get("error_rate")),
    }
    for name, value in numbers.items():
        allure.dynamic.parameter(name, value, excluded=True)
    allure.dynamic.title(title(check))
    allure.dynamic.description(payload.get("message") or "")
    allure.attach(
        json.dumps({"check": check.to_dict(), "verdict": payload}, indent=2, ensure_ascii=False, default=str),
        name="check and verdict",
        attachment_type=allure.attachment_type.JSON,
    )
    worst = payload.get("worst") or []
    if worst:
        allure.attach(worst_csv(worst), name="worst items", attachment_type=allure.attachment_type.CSV)


def worst_csv(worst: list[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=WORST_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in worst:
        writer.writerow({k: row.get(k) for k in WORST_COLUMNS})
    return buf.getvalue()


def _num(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)
