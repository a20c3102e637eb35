"""Verdicts: what a check decided, with the numbers and the worst items as evidence."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from medrcube.records import GradedRecord

EXCERPT_CHARS = 160


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"  # insufficient evidence (n < min_n, or nothing to measure)
    ERROR = "error"  # the evidence is incomplete (API errors) or the check cannot run


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
    """An item behind a failure. The plugin adds the question text from the cube."""

    item_id: str
    cell: str  # "Chest/X-Ray/Disease Diagnosis"
    variant: str
    rotation: int
    expected: str | None  # letter of the right option as shown
    extracted: str | None  # letter the model chose, None when unparsed
    outcome: str
    response: str  # excerpt
    note: str = ""  # why it is listed, when not simply a wrong answer

    @classmethod
    def of(cls, r: GradedRecord, note: str = "") -> WorstItem:
        return cls(
            item_id=r.item_id,
            cell="/".join(r.cell),
            variant=r.variant,
            rotation=r.rotation,
            expected=letter(r.answer),
            extracted=letter(r.extracted),
            outcome=r.outcome.value,
            response=excerpt(r.response),
            note=note,
        )

    def line(self) -> str:
        got = f"answered {self.extracted}" if self.extracted else f"{self.outcome}"
        where = f" [{self.variant}{f' r{self.rotation}' if self.variant == 'shuffled' else ''}]" \
            if self.variant != "standard" else ""
        text = f' "{self.response}"' if self.response else ""
        note = f" ({self.note})" if self.note else ""
        return f"{self.item_id} ({self.cell}){where}: expected {self.expected}, {got}{note}{text}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Verdict:
    check_id: str
    status: Status
    observed: float | None  # the check's metric (accuracy, rationality, drop, ...)
    interval: tuple[float, float] | None  # at the check's confidence
    bound: float | None
    n: int  # graded items (pairs for credibility, shared items for paired checks)
    chance: float | None  # the metric's value for random answers (mean 1/n_options)
    error_rate: float
    message: str
    worst: tuple[WorstItem, ...] = ()
    details: dict[str, Any] = field(default_factory=dict, hash=False, compare=True)

    @property
    def passed(self) -> bool:
        return self.status is Status.PASS

    def to_dict(self) -> dict[str, Any]:
        return {
            "check_id": self.check_id,
            "status": self.status.value,
            "observed": self.observed,
            "interval": list(self.interval) if self.interval is not None else None,
            "bound": self.bound,
            "n": self.n,
            "chance": self.chance,
            "error_rate": self.error_rate,
            "message": self.message,
            "worst": [w.to_dict() for w in self.worst],
            "details": self.details,
        }
