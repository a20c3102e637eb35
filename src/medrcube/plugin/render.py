"""How each verdict status looks in every output: one table, read by the terminal summary,
gate.json's counts, Allure (status, category) and the pytest outcome.

The gate core (medrcube.gate) decides; this module only renders. A new status value is
one more `StatusView` row in `STATUSES`; an unknown value still renders (as itself,
counted as not decided) rather than crashing a report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

QUESTION_CHARS = 200


@dataclass(frozen=True)
class StatusView:
    status: str  # the canonical value (gate.json's "verdict")
    mark: str  # the cell of the terminal table
    word: str  # "passed", "failed", ... in the count line
    outcome: str  # the pytest outcome: passed, failed, skipped, error
    allure: str  # the Allure status: passed, failed, skipped, broken
    category: str  # the Allure category (categories.json)
    decided: bool  # whether the check reached a decision


STATUSES: dict[str, StatusView] = {
    v.status: v
    for v in (
        StatusView("pass", "pass", "passed", "passed", "passed", "", True),
        StatusView("fail", "FAIL", "failed", "failed", "failed", "Decided fail (below its bound)", True),
        StatusView(
            "undecided", "undec", "undecided (insufficient evidence)", "skipped", "skipped",
            "Undecided (insufficient evidence)", False,
        ),
        StatusView("error", "ERR", "errors (not graded)", "error", "broken", "API errors (not graded)", False),
    )
}
# Earlier names of a status (the gate core before its Verdict rewrite called undecided "skip").
ALIASES = {"skip": "undecided", "skipped": "undecided", "insufficient": "undecided"}


def canonical(status: object) -> str:
    value = str(getattr(status, "value", status)).lower()
    return ALIASES.get(value, value)


def view(status: object) -> StatusView:
    value = canonical(status)
    return STATUSES.get(value) or StatusView(value, value, value, "error", "broken", "Other", False)


def outcome_of(status: object) -> str:
    return view(status).outcome


def counts(statuses: Iterable[object]) -> dict[str, int]:
    """Count per canonical status, every known status present (0 when absent)."""
    out = {s: 0 for s in STATUSES}
    for s in statuses:
        c = canonical(s)
        out[c] = out.get(c, 0) + 1
    return out


def gate_verdict(entries: Iterable[Mapping[str, Any]]) -> str:
    """The run's verdict as displayed: QUALIFIED when every required check passed, NOT
    QUALIFIED when one failed, otherwise UNDECIDED (the exit status is the gate's)."""
    required = [e for e in entries if e.get("required", True)]
    statuses = [canonical(e["verdict"]) for e in required]
    if any(s == "fail" for s in statuses):
        return "NOT QUALIFIED"
    if statuses and all(s == "pass" for s in statuses):
        return "QUALIFIED"
    return "UNDECIDED"


def short_question(text: str | None) -> str | None:
    if not text:
        return None
    q = " ".join(text.split())
    return q if len(q) <= QUESTION_CHARS else q[: QUESTION_CHARS - 1] + "…"


def worst_questions(payload: Mapping[str, Any]) -> list[str]:
    """One line per worst item that has a question: `  question of ID: TEXT`."""
    out = []
    for w in payload.get("worst") or []:
        q = short_question(w.get("question"))
        if q:
            out.append(f"    question of {w.get('item_id')}: {q}")
    return out
