"""A gate case's verdict as a pytest outcome: the `verdict` fixture's work and the test body's.

`verdict_for` (the fixture, in setup) labels the Allure case, evaluates the check through the
process's GateSession (plugin/session.py) and keeps the gate.json entry on the item; `publish`
hands a decided entry to the controller (built-in and site checks alike); `enforce` (the test
body: suite/test_gate.py, plugin/site.py) passes, fails or skips the case as decided.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import pytest

from medrcube.plugin.session import GateError, GateSession

# On an item: the JSON-ready verdict payload its test produced (see summary.py).
VERDICT_KEY = pytest.StashKey[dict[str, Any]]()


@dataclass(frozen=True)
class Decided:
    """A check with its verdict: what the `verdict` fixture hands to the test body."""

    check: Any  # medrcube.gate.checks.Check, or a plugin.site.SiteCheck
    verdict: Any  # medrcube.gate.verdict.Verdict (None for a site check, or one another worker decided: see payload)
    payload: dict[str, Any]  # the gate.json entry (summary.verdict_payload)

    @property
    def status(self) -> str:
        return str(self.payload["verdict"])

    @property
    def message(self) -> str:
        return str(self.payload.get("message") or "")


def verdict_for(node: pytest.Item, check: Any, session: GateSession, model: str | None = None) -> Decided:
    """The `verdict` fixture's work: label the Allure case (first, so that an errored
    case is grouped too), evaluate, keep the payload on the item for the report hook,
    and raise GateError for an error verdict or a failed inference."""
    from medrcube.plugin import summary

    # An xdist worker: as the run's deciding worker decided it (with more workers than cores).
    shared = session.shared_payload(check, lambda c, v: summary.verdict_payload(c, v, session.questions))
    if shared is not None:
        return publish(node, check, None, shared, model=model)
    try:
        verdict = session.verdict(check)
    except GateError as e:
        payload = summary.error_payload(check, str(e))
        verdict = None
    else:
        payload = summary.verdict_payload(check, verdict, session.questions)
    return publish(node, check, verdict, payload, model=model)


def publish(node: pytest.Item, check: Any, verdict: Any, payload: dict[str, Any], model: str | None = None) -> Decided:
    """Hand a decided payload to the controller (built-in and site checks alike)."""
    from medrcube.plugin import allure as allure_labels
    from medrcube.plugin import summary

    allure_labels.label_case(check, payload, model=model)
    node.stash[VERDICT_KEY] = payload
    # On the item, as record_property does: every later report carries it, xdist sends
    # it to the controller, and --junitxml writes it as properties.
    node.user_properties.extend(summary.report_properties(payload))
    if payload["verdict"] == "error":
        allure_labels.describe_verdict(check, payload)  # the test body will not run
        raise GateError(payload["message"])
    return Decided(check, verdict, payload)


def failure_text(decided: Decided) -> str:
    """The failure's text: the verdict's message, then the worst items' questions (held
    as structured data in the payload, never patched into the message)."""
    from medrcube.plugin.render import worst_questions

    lines = [decided.message, *worst_questions(decided.payload)]
    return "\n".join(line for line in lines if line)


def enforce(decided: Decided) -> None:
    """The test body: describe the case in Allure, then pass, fail or skip as decided.

    Allure's title, description and attachments are set here, in the test call (allure-pytest
    renames the case and takes attachments as the fixture's while setup runs). Outcomes:
    pass -> passed; fail -> failed, required or reported-only (a decided failure makes the
    gate NOT QUALIFIED wherever it lies); undecided -> skipped, reason "UNDECIDED" (not
    passed in the terminal, JUnit and Allure; exit status 11 keeps CI red): missing
    evidence, not an expected failure (no xfail)."""
    from medrcube.plugin import allure as allure_labels
    from medrcube.plugin.render import outcome_of

    allure_labels.describe_verdict(decided.check, decided.payload)
    outcome = outcome_of(decided.status)
    required = getattr(decided.check, "required", True)
    if outcome == "failed":
        pytest.fail(failure_text(decided) + ("" if required else "\n  [reported-only: its failure fails the gate]"),
                    pytrace=False)
    if outcome == "skipped":
        pytest.skip(f"{'UNDECIDED' if required else 'UNDECIDED (reported-only)'}: {decided.check.id}: {decided.message}")
    if outcome == "error":  # normally raised in setup already (verdict_for)
        raise GateError(decided.message)


def traceback_from_the_test(item: pytest.Item, excinfo: Any) -> None:
    """A decided failure's traceback cut to begin at the gate case's own function, before pytest
    formats it. The failure is `pytest.fail(..., pytrace=False)` (`enforce`): pytest shows its
    message only, but first cuts the traceback at the test function by comparing every entry's
    file path (the runner's and pluggy's frames above it, about 35 at the paper's scale: 0.3 ms a
    failed case after the last answer, docs/speed.md). Here the same cut is found by the
    function's code object; pytest's own cut and filter then run on what is left and give the
    same entries, so the report is the same. Anything else is left as it is."""
    if not isinstance(excinfo.value, pytest.fail.Exception) or excinfo.value.pytrace:
        return
    function = getattr(item, "function", None)
    code = getattr(inspect.unwrap(function), "__code__", None) if function is not None else None
    if code is None:
        return
    traceback = excinfo.traceback
    for at, entry in enumerate(traceback):
        if entry.frame.code.raw is code:
            if at:
                excinfo.traceback = traceback[at:]
            return
