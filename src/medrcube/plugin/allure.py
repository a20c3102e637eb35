"""Allure labels, parameters and attachments of a gate case (allure-pytest's dynamic API).

The Behaviors tree of the report groups cases epic > feature > story, as each kind's
registry entry says (gate/kinds.py: `grouping` and `case_title`; a kind without them:
its epic > "All parts" > the check id, titled "epic: feature"). The core kinds:

    cell              part > modality > task                (Chest > X-Ray > Disease Diagnosis)
    slice             "Slices" > "By part|modality|task" > value
    overall           "Overall" > "Accuracy" > "All cells"
    credibility       "Credibility" > part (or "All parts") > "Rationality and shortcuts"
    image dependence  "Image dependence" > "All parts" > "Standard vs blind"
    position          "Position robustness" > "All parts" > "Circular accuracy"
    regression        "Regression" > part (or "All parts") > "modality / task" (or "Overall")
    robustness        "Robustness" > perturbation ("jpeg:30") > "scope: accuracy" or
                      "scope: answer agreement" (kinds robustness, robustness_agreement:
                      the check's params carry the perturbation as "variant")
    clinical depth    "Clinical depth" > "Per-finding sensitivity" > "finding: scope",
                      "Calibration" > "Calibration error", "Selective prediction" >
                      "metric: scope" (kinds finding, calibration, selective)

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
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import allure
from allure_commons import plugin_manager
from allure_commons.types import LabelType

from medrcube.gate.checks import Check
from medrcube.gate.kinds import ALL_PARTS, entry_of, epic_of
from medrcube.rundir.jsontext import indented

WORST_COLUMNS = ("item_id", "cell", "variant", "rotation", "expected", "extracted", "outcome", "question", "response", "note")


def behaviors(check: Any) -> tuple[str, str, str]:
    """(epic, feature, story) of a check, as its kind's registry entry groups it."""
    entry = entry_of(str(check.kind))
    if entry is not None and entry.grouping is not None:
        return entry.grouping(check)
    return epic_of(str(check.kind)), ALL_PARTS, check.id


def title(check: Any) -> str:
    _epic, feature, story = behaviors(check)
    entry = entry_of(str(check.kind))
    if entry is not None and entry.case_title is not None:
        return entry.case_title(check, feature, story)
    return f"{epic_of(str(check.kind))}: {feature}"


def severity(check: Any) -> allure.severity_level:
    value = (check.labels or {}).get("severity", "normal")
    try:
        return allure.severity_level(value)
    except ValueError:
        return allure.severity_level.NORMAL


class Plain:
    """A parameter value shown as its text: allure-pytest shows a str parameter quoted
    ('0.5'), and a number should read as a number."""

    def __init__(self, text: object) -> None:
        self.text = str(text)

    def __repr__(self) -> str:
        return self.text


def label_case(check: Any, payload: Mapping[str, Any] | None = None, model: str | None = None) -> None:
    """Labels known before any evaluation, so that an errored case is grouped too. The
    model is a label and a parameter, so that results of several models in one report
    stay apart (and never look like retries of each other)."""
    epic, feature, story = behaviors(check)
    labels: list[tuple[str, Any]] = [(LabelType.EPIC, epic), (LabelType.FEATURE, feature), (LabelType.STORY, story),
                                     (LabelType.SEVERITY, severity(check)), (LabelType.TAG, str(check.kind))]
    level = (check.labels or {}).get("level")
    if level:
        labels.append((LabelType.TAG, f"level:{level}"))
    if model:
        labels += [("model", model), (LabelType.PARENT_SUITE, model)]
    _set(labels=labels, parameters=[("model", Plain(model))] if model else [])


def _set(*, labels: Sequence[tuple[str, Any]] = (), parameters: Sequence[tuple[str, Any]] = (), excluded: bool = False,
          title: str | None = None, description: str | None = None) -> None:
    """Labels, then parameters, then the title and the description of the running case: on
    its test result at once where allure-pytest's listener alone would take them (`_apply`),
    else through `allure.dynamic`, call by call."""
    result = _labels_target()
    if result is None and not _allure_active():
        return  # no --alluredir: every call would be a no-op
    if result is not None:
        _apply(result, labels=labels, parameters=parameters, excluded=excluded, title=title, description=description)
        return
    for label_type, value in labels:
        allure.dynamic.label(label_type, value)
    for name, value in parameters:
        allure.dynamic.parameter(name, value, excluded=excluded or None)
    if title is not None:
        allure.dynamic.title(title)
    if description is not None:
        allure.dynamic.description(description)


def describe_verdict(check: Any, payload: Mapping[str, Any]) -> None:
    """The decided numbers as excluded parameters (numbers as numbers), what the check
    checks as description (the verdict's message is the status message, shown once),
    and the check + verdict (JSON) and the worst items (CSV) as attachments."""
    from medrcube.plugin.render import view

    if not _allure_active():
        return  # no --alluredir: nothing would take them
    interval = payload.get("interval")
    numbers = [
        ("verdict", Plain(view(payload["verdict"]).status)),
        ("observed", _num(payload.get("observed"))),
        ("interval", Plain(f"[{interval[0]:.3f}, {interval[1]:.3f}]") if interval else Plain("n/a")),
        ("bound", _num(payload.get("bound"))),
        ("rule", Plain(payload.get("rule"))),
        ("n", payload.get("n")),
        ("chance", _num(payload.get("chance"))),
        ("error rate", _num(payload.get("error_rate"))),
    ]
    _set(parameters=numbers, excluded=True, title=title(check), description=what_it_checks(check, payload))
    allure.attach(
        indented({"check": _check_dict(check), "verdict": payload}, default=str),
        name="check and verdict",
        attachment_type=allure.attachment_type.JSON,
    )
    worst = payload.get("worst") or []
    if worst:
        allure.attach(worst_csv(worst), name="worst items", attachment_type=allure.attachment_type.CSV)


def _check_dict(check: Any) -> Any:
    if isinstance(check, Check):
        # Its fields as they are, for the attachment's encoder: the same JSON as `to_dict`, whose
        # deep copy (dataclasses.asdict) was a third of a case's own work after the last answer.
        view = {f.name: getattr(check, f.name) for f in fields(check)}
        view["kind"], view["variants"] = str(check.kind), list(check.variants)
        return view
    to_dict = getattr(check, "to_dict", None)
    return to_dict() if callable(to_dict) else str(check)


def what_it_checks(check: Any, payload: Mapping[str, Any]) -> str:
    rule = payload.get("rule")
    bound = payload.get("bound")
    how = "its lower confidence bound" if rule == "lower_bound" else "the observed value"
    return (
        f"{payload.get('metric')} of {check.id}: {how} against the bound {bound} "
        f"(rule {rule}, confidence {payload.get('confidence')}, min_n {payload.get('min_n')}; "
        f"source {payload.get('source') or 'thresholds'})."
    )


def worst_csv(worst: list[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=WORST_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in worst:
        writer.writerow({k: row.get(k) for k in WORST_COLUMNS})
    return buf.getvalue()


def _num(x: Any) -> Any:
    if x is None:
        return Plain("n/a")
    return round(x, 4) if isinstance(x, float) else x


# -- the report's environment, executor and categories (written by the controller) ----------


def write_run_files(alluredir: str | Path, meta: Mapping[str, Any], verdict: str | None = None,
                    build_order: int | None = None) -> None:
    """environment.properties, executor.json and categories.json of the results directory:
    the gate's verdict and what was qualified (model, fingerprints, cube, policy, variants,
    version), by whom, and the categories a reader triages by (allure_overview.py adds
    the verdict's own case and the trend)."""
    from medrcube.plugin.render import STATUSES

    out = Path(alluredir)
    out.mkdir(parents=True, exist_ok=True)
    cube = meta.get("cube") or {}
    policy, provenance = meta.get("policy") or {}, meta.get("provenance") or {}
    env = {
        "verdict": verdict,
        "model": meta.get("model"),
        "model.fingerprint": meta.get("model_fingerprint"),
        "model.served": meta.get("served_model"),
        "cube": cube.get("source"),
        "cube.fingerprint": cube.get("fingerprint"),
        "cube.items": cube.get("items"),
        "thresholds": meta.get("thresholds"),
        "profile": meta.get("profile") or "(none)",
        "variants": meta.get("variants"),
        "medrcube.version": meta.get("medrcube_version"),
        "run": meta.get("run_id"),
        # The policy on record and where the answers came from.
        "policy.digest": policy.get("digest"),
        "policy.differences": policy.get("summary") or ("none" if policy else None),
        "answers.live": provenance.get("live"),
        "answers.stored": provenance.get("stored"),
        "answers.signed": str(bool(provenance.get("signed"))).lower() if provenance else None,
        # The run's counters (medrcube/tally.py), as gate.json's `tally` holds them.
        **{f"tally.{k}": v for k, v in (meta.get("tally") or {}).items()
           if k in ("items", "loaded", "asks", "answered", "cached", "failed", "not_asked", "unavailable", "graded",
                    "requests")},
        "tally.skipped": len((meta.get("tally") or {}).get("skipped") or ()) if meta.get("tally") else None,
    }
    lines = [f"{k}={_prop(v)}" for k, v in env.items() if v is not None]
    (out / "environment.properties").write_text("\n".join(lines) + "\n", encoding="utf-8")
    executor: dict[str, Any] = {
        "name": "medrcube",
        "type": "pytest",
        "buildName": f"{meta.get('model')} / {meta.get('run_id')}" + (f": {verdict}" if verdict else ""),
        "reportName": f"medrcube qualification: {meta.get('model')}" + (f": {verdict}" if verdict else ""),
        "reportUrl": "",
        "buildUrl": "",
    }
    if build_order is not None:  # this run's place in the trend (allure_overview.py)
        executor["buildOrder"] = build_order
    (out / "executor.json").write_text(json.dumps(executor, indent=2), encoding="utf-8")
    categories = [
        {"name": v.category, "matchedStatuses": [v.allure]}
        for v in STATUSES.values()
        if v.category
    ]
    (out / "categories.json").write_text(json.dumps(categories, indent=2), encoding="utf-8")


def _prop(value: object) -> str:
    # .properties: backslashes and line breaks escaped, ':' and '=' kept readable.
    return str(value).replace("\\", "\\\\").replace("\n", " ")


# -- a case's labels and parameters set at once -------------------------------------------
#
# Each `allure.dynamic` call is a pluggy hook call that allure-pytest's listener answers by
# looking up the running case's test result again (through allure-commons' per-thread item
# table) and appending one label or parameter to it: 7-20 us a call, and a gate case made 17 of
# them, 15 ms for the 110 cases of the paper's scale after the last answer, against 7 ms set
# at once (docs/speed.md, "Fifteenth pass"). `_set` looks the listener's test result up once a case and
# gives it the very objects the listener's hook implementations would append (`Label`, and a
# `Parameter` with allure's `represent`), in the same order, with the same rule for a parameter
# set twice (its value replaced). Only when allure-pytest's listener is the one implementation
# of every hook concerned: a plugin that also implements one (a site's own Allure extension)
# gets the hook calls as before. tests/plugin/test_allure_direct.py compares the result files of
# real gate runs made both ways.

# The hooks whose work is done here; each must be answered by the listener alone.
_HOOKS = ("add_label", "add_parameter", "add_title", "add_description")


def _allure_active() -> bool:
    """Whether anything in this process answers Allure's dynamic calls (allure-pytest with
    --alluredir): without it every call is a no-op, and what it would be given need not be made."""
    return bool(plugin_manager.hook.add_label.get_hookimpls())


def _labels_target() -> Any | None:
    """The running case's test result held by allure-pytest's listener, when that listener
    is the only implementation of each dynamic hook `_set` stands in for; else None."""
    try:
        from allure_pytest.listener import AllureListener
    except ImportError:  # allure-commons without allure-pytest: its hook calls as they are
        return None
    listener = None
    for name in _HOOKS:
        impls = getattr(plugin_manager.hook, name).get_hookimpls()
        if len(impls) != 1 or type(impls[0].plugin) is not AllureListener:
            return None
        if listener is None:
            listener = impls[0].plugin
        elif impls[0].plugin is not listener:
            return None
    assert listener is not None
    return listener.allure_logger.get_test(None)


def _apply(result: Any, *, labels: Sequence[tuple[str, Any]] = (), parameters: Sequence[tuple[str, Any]] = (),
          excluded: bool = False, title: str | None = None, description: str | None = None) -> None:
    """What the listener's add_label, add_parameter, add_title and add_description would do
    to `result`, call by call in this order (parameters with `excluded` and no mode)."""
    from allure_commons.model2 import Label, Parameter
    from allure_commons.utils import represent

    for label_type, value in labels:
        result.labels.append(Label(label_type, value))
    for name, value in parameters:
        shown = represent(value)
        existing = next((p for p in result.parameters if p.name == name), None)
        if existing is not None:
            existing.value = shown
        else:
            result.parameters.append(Parameter(name=name, value=shown, excluded=excluded or None, mode=None))
    if title is not None:
        result.name = title
    if description is not None:
        result.description = description
