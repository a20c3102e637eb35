"""Verdicts: what a check decided and what the gate decided, as typed values.

A check's status is one of four:
    pass        decided: the evidence shows the bound is met
    fail        decided: the evidence shows the bound is missed
    undecided   the evidence is not decisive either way (too few items, or a true
                value close to the bound): the verdict says how many items would decide
    error       not graded: too many API errors, or the check could not be evaluated

The gate's verdict (GateVerdict): NOT QUALIFIED when any check failed, required or
reported-only (a decided failure is evidence against the model wherever it lies; the
policy's feasibility section only decides which checks must *pass*); QUALIFIED when
every required check passed, none failed and every value the policy's
`coverage.require` names rests on a decided check (gate/coverage.py); otherwise
UNDECIDED. Exit codes (set by the pytest plugin and `medrcube qualify`):
QUALIFIED 0, NOT QUALIFIED 10, UNDECIDED 11; pytest's own codes (2 interrupted,
3 internal error, 4 usage error, 5 no tests) are never replaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from medrcube.records import GradedRecord

EXCERPT_CHARS = 160
NO_GUARANTEE = "no statistical guarantee (point rule)"


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNDECIDED = "undecided"  # the evidence decides neither way; says what would
    ERROR = "error"  # the evidence is incomplete (API errors) or the check cannot run


class GateStatus(StrEnum):
    QUALIFIED = "QUALIFIED"
    NOT_QUALIFIED = "NOT QUALIFIED"
    UNDECIDED = "UNDECIDED"


# Distinct from pytest's own exit codes (0-5), and from each other.
EXIT_CODES: dict[GateStatus, int] = {GateStatus.QUALIFIED: 0, GateStatus.NOT_QUALIFIED: 10, GateStatus.UNDECIDED: 11}


def letter(index: int | None) -> str | None:
    """Option letter of a 0-based index as shown to the model (A, B, ..., Z, AA, ...)."""
    if index is None:
        return None
    out = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        out = chr(65 + rem) + out
    return out


def excerpt(text: str | None, limit: int = EXCERPT_CHARS) -> str:
    """The response on one line, cut to `limit` characters."""
    if not text:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class WorstItem:
    """An item behind a verdict: its id, the expected and the given answer (letters as
    shown to the model), and the question when the caller knows it (the plugin adds it
    from the cube; the pure gate sees records only)."""

    id: str
    expected: str | None  # letter of the right option as shown
    given: str | None  # letter the model chose, None when unparsed
    question: str | None = None
    cell: str = ""  # "Chest/X-Ray/Disease Diagnosis"
    variant: str = "standard"
    rotation: int = 0
    outcome: str = ""
    response: str = ""  # excerpt
    note: str = ""  # why it is listed, when not simply a wrong answer

    @property
    def item_id(self) -> str:
        return self.id

    @property
    def extracted(self) -> str | None:
        return self.given

    @classmethod
    def of(cls, r: GradedRecord, note: str = "") -> WorstItem:
        return cls(
            id=r.item_id,
            expected=letter(r.answer),
            given=letter(r.extracted),
            cell="/".join(r.cell),
            variant=r.variant,
            rotation=r.rotation,
            outcome=r.outcome.value,
            response=excerpt(r.response),
            note=note,
        )

    def line(self) -> str:
        got = f"answered {self.given}" if self.given else f"{self.outcome}"
        where = f" [{self.variant}{f' r{self.rotation}' if self.variant == 'shuffled' else ''}]" \
            if self.variant != "standard" else ""
        text = f' "{self.response}"' if self.response else ""
        note = f" ({self.note})" if self.note else ""
        return f"{self.id} ({self.cell}){where}: expected {self.expected}, {got}{note}{text}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "expected": self.expected, "given": self.given, "question": self.question,
            "cell": self.cell, "variant": self.variant, "rotation": self.rotation, "outcome": self.outcome,
            "response": self.response, "note": self.note,
            # The names of gate.json schema 1, kept for readers of older files.
            "item_id": self.id, "extracted": self.given,
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    """One check's decision with its evidence."""

    check_id: str
    status: Status
    observed: float | None  # the check's metric (accuracy, grounding, drop, ...)
    interval: tuple[float, float] | None  # at the check's confidence, method in `method`
    bound: float | None
    n: int  # graded items (pairs for credibility, shared items for paired checks)
    chance: float | None  # the metric's value for random answers (mean 1/n_options)
    error_rate: float
    message: str
    worst: tuple[WorstItem, ...] = ()
    details: dict[str, Any] = field(default_factory=dict, hash=False, compare=True)
    required: bool = True
    rule: str = "lower_bound"
    decided_by: str = ""  # "confidence bound", "point estimate", or "" when undecided/error
    guarantee: str = ""  # in plain words: what this decision guarantees, or that it does not
    method: str = ""  # how the interval was computed
    p_pass: float | None = None  # one-sided p of "the bound is not met" (small: decisively met)
    p_fail: float | None = None  # one-sided p of "the bound is met", before the family adjustment
    p_fail_adjusted: float | None = None  # Holm-adjusted over the family of fail claims
    needed_n: int | None = None  # undecided: items that would decide with 80% power

    @property
    def passed(self) -> bool:
        return self.status is Status.PASS

    def to_dict(self) -> dict[str, Any]:
        return {
            "check_id": self.check_id,
            "status": self.status.value,
            "required": self.required,
            "rule": self.rule,
            "decided_by": self.decided_by,
            "guarantee": self.guarantee,
            "observed": self.observed,
            "interval": list(self.interval) if self.interval is not None else None,
            "method": self.method,
            "bound": self.bound,
            "n": self.n,
            "chance": self.chance,
            "error_rate": self.error_rate,
            "p_pass": self.p_pass,
            "p_fail": self.p_fail,
            "p_fail_adjusted": self.p_fail_adjusted,
            "needed_n": self.needed_n,
            "message": self.message,
            "worst": [w.to_dict() for w in self.worst],
            "details": self.details,
        }


@dataclass(frozen=True, slots=True)
class GateVerdict:
    """The gate's decision over every check of a run."""

    status: GateStatus
    counts: dict[str, int]  # per check status, over every check
    failed: tuple[str, ...]  # every check that failed: the required ones first, then the reported-only ones
    undecided: tuple[str, ...]  # required checks undecided or in error
    needs: dict[str, int | None]  # undecided required check -> items it would need
    guarantee: str  # what QUALIFIED / NOT QUALIFIED guarantee on this policy
    # Checks the policy requires but this cube cannot decide, or outside the intended-use
    # scope: reported, not required (gate/feasible.py), each with its reason.
    not_required: dict[str, str] = field(default_factory=dict)
    failed_reported: tuple[str, ...] = ()  # of `failed`, the reported-only checks
    required_counts: dict[str, int] = field(default_factory=dict)  # per status, over the required checks
    uncovered: tuple[str, ...] = ()  # values `coverage.require` names that hold no decided check

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def failed_names(self) -> str:
        """Every failed check, each reported-only one marked."""
        return ", ".join(f"{c} (reported-only)" if c in self.failed_reported else c for c in self.failed)

    def text(self) -> str:
        head = f"gate: {self.status.value}"
        if self.status is GateStatus.NOT_QUALIFIED:
            head += f" ({len(self.failed)} checks failed: {self.failed_names()})"
        elif self.status is GateStatus.UNDECIDED:
            if self.undecided:
                head += f" ({len(self.undecided)} required checks undecided or not graded)"
            if self.uncovered:
                head += f" (coverage.require not met: {'; '.join(self.uncovered)})"
        return f"{head}; {self.guarantee}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.status.value,
            "exit_code": self.exit_code,
            "counts": dict(self.counts),
            "failed": list(self.failed),
            "failed_reported": list(self.failed_reported),
            "required_counts": dict(self.required_counts),
            "undecided": list(self.undecided),
            "needs": dict(self.needs),
            "guarantee": self.guarantee,
            "not_required": dict(self.not_required),
            "uncovered": list(self.uncovered),
            "text": self.text(),
        }


def gate_verdict(entries: Iterable[Mapping[str, Any]], guarantee: str = "",
                 uncovered: Iterable[str] = ()) -> GateVerdict:
    """The gate's verdict from check entries (Verdict.to_dict() or gate.json payloads:
    they carry `status` or `verdict`, `required`, `needed_n`, `check_id` or `id`).

    Any failed check, required or reported-only, makes the gate NOT QUALIFIED. Fail
    closed otherwise: a required check that is undecided or errored, or a value that
    `coverage.require` names with no decided check (`uncovered`, gate/coverage.py), makes
    the gate UNDECIDED; QUALIFIED needs every required check passed (and at least one)."""
    counts = {s.value: 0 for s in Status}
    required_counts = {s.value: 0 for s in Status}
    failed: list[str] = []
    failed_reported: list[str] = []
    undecided: list[str] = []
    needs: dict[str, int | None] = {}
    required_seen = 0
    not_required: dict[str, str] = {}
    for e in entries:
        status = str(e.get("status", e.get("verdict")))
        cid = str(e.get("check_id", e.get("id")))
        counts[status] = counts.get(status, 0) + 1
        why = (e.get("details") or {}).get("not_required")
        if why:
            not_required[cid] = str(why)
        if not e.get("required", True):
            if status == Status.FAIL:
                failed_reported.append(cid)
            continue
        required_seen += 1
        required_counts[status] = required_counts.get(status, 0) + 1
        if status == Status.FAIL:
            failed.append(cid)
        elif status != Status.PASS:
            undecided.append(cid)
            needs[cid] = e.get("needed_n")
    uncovered = tuple(uncovered)
    if failed or failed_reported:
        status_ = GateStatus.NOT_QUALIFIED
    elif undecided or required_seen == 0 or uncovered:
        status_ = GateStatus.UNDECIDED
    else:
        status_ = GateStatus.QUALIFIED
    return GateVerdict(status_, counts, (*failed, *failed_reported), tuple(undecided), needs, guarantee, not_required,
                       tuple(failed_reported), required_counts, uncovered)
