"""One account of a run, computed once from its checks' entries and rendered by every
output (the terminal's last block, gate.json's `account`, JUnit's properties, the Allure
verdict case and report.html):

1. the verdict and the required checks' outcome counts ("of 18 required checks 16 passed,
   1 failed, 1 undecided, 0 in error"), then the reported-only ones';
2. what the verdict covers and what could not be evaluated, per part, modality and task
   (gate/coverage.py);
3. the failed checks first, required or reported-only (each marked); then the required
   checks still open with what would decide them; then the reported-only checks;
   the checks in error;
4. the run's request counters (asked, answered, failed, cached, stopped before asking,
   skipped with a reason) as the run hands them over: rendered, never recomputed here.

Every value beside a check is its own: its metric's estimate, and the interval of that
estimate labelled with the method that computed it. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from medrcube.gate.coverage import Coverage
from medrcube.gate.verdict import GateVerdict

# The run's counters in the order they are shown, with their words; a counter the run
# hands over under another name is shown after these, its name in words.
COUNTER_WORDS = {"asked": "asked", "answered": "answered", "failed": "failed", "cached": "from the store",
                 "stopped_before_asking": "stopped before asking", "skipped": "skipped with a reason",
                 "requests_sent": "requests sent", "answers_live": "answers asked live",
                 "answers_stored": "answers from the store"}
STATUS_ORDER = ("pass", "fail", "undecided", "error")


def _status(e: Mapping[str, Any]) -> str:
    s = str(e.get("verdict", e.get("status", ""))).lower()
    return {"skip": "undecided", "skipped": "undecided"}.get(s, s)


def _num(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def short_method(method: Any, limit: int = 48) -> str:
    """An interval's method in a few words (its first clause, cut at a word); the whole
    text is the check's `method` in gate.json."""
    text = str(method or "").split(";")[0].strip()
    head, sep, rest = text.partition(": ")
    if sep and len(head) < 24:  # "luck rate: cluster-robust ..." names the value, not the method
        text = rest
    for cut in (" (", ", t("):
        text = text.split(cut)[0]
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(",") + "..."


@dataclass(frozen=True, slots=True)
class CheckLine:
    """One check as the account names it: its own value, that value's interval and method."""

    id: str
    kind: str
    status: str
    required: bool
    metric: str = ""
    observed: float | None = None
    interval: tuple[float, float] | None = None
    method: str = ""
    bound: float | None = None
    n: int | None = None
    needed_n: int | None = None
    why: str = ""  # the first line of its verdict's message
    not_required: str = ""  # why it is reported, not required

    @classmethod
    def of(cls, e: Mapping[str, Any]) -> CheckLine:
        iv = e.get("interval")
        interval = (float(iv[0]), float(iv[1])) if iv and iv[0] is not None and iv[1] is not None else None
        return cls(
            id=str(e.get("id", e.get("check_id"))), kind=str(e.get("kind", "")), status=_status(e),
            required=bool(e.get("required", True)), metric=str(e.get("metric") or ""),
            observed=e.get("observed"), interval=interval, method=str(e.get("method") or ""),
            bound=e.get("bound"), n=e.get("n"), needed_n=e.get("needed_n"),
            why=(str(e.get("message") or "").split("\n")[0])[:240],
            not_required=str((e.get("details") or {}).get("not_required") or ""),
        )

    def value_text(self) -> str:
        """`accuracy 0.412 [0.301, 0.530] (Wilson score on the Kish effective n), bound 0.600`:
        the value, its own interval with its method, and the bound."""
        name = (self.metric or "value").replace("_", " ")
        out = f"{name} {_num(self.observed)}"
        if self.interval is not None and self.observed is not None:
            out += f" [{self.interval[0]:.3f}, {self.interval[1]:.3f}]"
            if self.method:
                out += f" ({short_method(self.method)})"
        if self.bound is not None:
            out += f", bound {self.bound:.3f}"
        if self.n is not None:
            out += f", n={self.n}"
        return out

    def text(self) -> str:
        mark = "" if self.required else " [reported-only]"
        tail = ""
        if self.status in ("undecided", "error") and self.needed_n:
            tail = f"; about {self.needed_n} items would decide it"
        return f"{self.id}{mark}: {self.status}: {self.value_text()}{tail}"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "status": self.status, "required": self.required,
                "metric": self.metric, "observed": self.observed,
                "interval": list(self.interval) if self.interval is not None else None, "method": self.method,
                "bound": self.bound, "n": self.n, "needed_n": self.needed_n, "why": self.why,
                "not_required": self.not_required}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CheckLine:
        iv = d.get("interval")
        return cls(str(d["id"]), str(d.get("kind", "")), str(d["status"]), bool(d.get("required", True)),
                   str(d.get("metric") or ""), d.get("observed"), (iv[0], iv[1]) if iv else None,
                   str(d.get("method") or ""), d.get("bound"), d.get("n"), d.get("needed_n"),
                   str(d.get("why") or ""), str(d.get("not_required") or ""))


@dataclass(frozen=True, slots=True)
class Account:
    """The run's account (see the module's docstring)."""

    verdict: str
    exit_code: int
    required: Mapping[str, int]  # status -> required checks
    reported: Mapping[str, int]  # status -> reported-only checks
    coverage: Coverage
    failed: tuple[CheckLine, ...]  # required first, then reported-only
    open_required: tuple[CheckLine, ...]  # required, undecided or in error
    reported_only: tuple[CheckLine, ...]  # reported-only, not failed
    errors: tuple[CheckLine, ...]  # any check in error
    uncovered: tuple[str, ...] = ()  # coverage.require values with no decided check
    counters: Mapping[str, int | None] = field(default_factory=dict)  # the run's request/item counters

    @property
    def required_total(self) -> int:
        return sum(self.required.values())

    @property
    def reported_total(self) -> int:
        return sum(self.reported.values())

    def counts_line(self) -> str:
        """`of 18 required checks 16 passed, 1 failed, 1 undecided, 0 in error; 59 reported-only
        checks: 50 passed, 1 failed, 8 undecided, 0 in error`."""
        r, o = self.required, self.reported
        line = (f"of {self.required_total} required checks {r.get('pass', 0)} passed, {r.get('fail', 0)} failed, "
                f"{r.get('undecided', 0)} undecided, {r.get('error', 0)} in error")
        if self.reported_total:
            line += (f"; {self.reported_total} checks reported, not required: {o.get('pass', 0)} passed, "
                     f"{o.get('fail', 0)} failed, {o.get('undecided', 0)} undecided, {o.get('error', 0)} in error")
        return line

    def counters_line(self) -> str | None:
        keys = [k for k in COUNTER_WORDS if k in self.counters] + [k for k in self.counters if k not in COUNTER_WORDS]
        shown = [(k, self.counters[k]) for k in keys if self.counters[k] is not None]
        if not shown:
            return None
        return "run: " + ", ".join(f"{v} {COUNTER_WORDS.get(k, k.replace('_', ' '))}" for k, v in shown)

    def lines(self, limit: int = 6) -> list[str]:
        """The terminal's last block: short enough for a CI log (at most `limit` checks
        per list, the rest counted), the verdict on the first line."""
        out = [f"verdict: {self.verdict} (exit status {self.exit_code}); {self.counts_line()}"]
        out += self.coverage.lines(self.verdict)
        if self.uncovered:
            out.append("QUALIFIED refused by coverage.require: " + "; ".join(self.uncovered))
        for title, rows in (("failed", self.failed), ("required, not decided", self.open_required),
                            ("in error", [c for c in self.errors if c not in self.open_required])):
            if rows:
                out.append(f"{title} ({len(rows)}):")
                out += [f"  {c.text()}" for c in rows[:limit]]
                if len(rows) > limit:  # every one named; their numbers are in gate.json
                    out.append("  and " + ", ".join(c.id + ("" if c.required else " [reported-only]")
                                                    for c in rows[limit:]))
        if self.reported_only:
            tally: dict[str, int] = {}
            for c in self.reported_only:
                tally[c.status] = tally.get(c.status, 0) + 1
            out.append(f"reported-only, not failed ({len(self.reported_only)}): "
                       + ", ".join(f"{n} {s}" for s, n in tally.items()) + " (every one in gate.json)")
        if (counters := self.counters_line()) is not None:
            out.append(counters)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict, "exit_code": self.exit_code, "summary": self.counts_line(),
            "required": dict(self.required), "reported": dict(self.reported),
            "coverage": self.coverage.to_dict(), "coverage_lines": self.coverage.lines(self.verdict),
            "failed": [c.to_dict() for c in self.failed],
            "open_required": [c.to_dict() for c in self.open_required],
            "reported_only": [c.to_dict() for c in self.reported_only],
            "errors": [c.to_dict() for c in self.errors],
            "uncovered": list(self.uncovered), "counters": dict(self.counters),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Account:
        def rows(key: str) -> tuple[CheckLine, ...]:
            return tuple(CheckLine.from_dict(r) for r in d.get(key) or ())

        return cls(str(d["verdict"]), int(d["exit_code"]), dict(d.get("required") or {}),
                   dict(d.get("reported") or {}), Coverage.from_dict(d.get("coverage")), rows("failed"),
                   rows("open_required"), rows("reported_only"), rows("errors"), tuple(d.get("uncovered") or ()),
                   dict(d.get("counters") or {}))


def account_of(entries: Iterable[Mapping[str, Any]], gate: GateVerdict, coverage: Coverage,
               counters: Mapping[str, int | None] | None = None) -> Account:
    """The account of a run from its checks' entries (gate.json payloads), the gate's
    verdict on them and their coverage."""
    entries = list(entries)
    lines = [CheckLine.of(e) for e in entries]
    known = {c.id for c in lines}
    # A required check that left no entry (deselected, or the run stopped) is open.
    lines += [CheckLine(id=cid, kind="", status="undecided", required=True, why="no verdict: the check did not run")
              for cid in gate.undecided if cid not in known]
    required = {s: 0 for s in STATUS_ORDER}
    reported = {s: 0 for s in STATUS_ORDER}
    for c in lines:
        tally = required if c.required else reported
        tally[c.status] = tally.get(c.status, 0) + 1
    failed = [c for c in lines if c.status == "fail"]
    failed.sort(key=lambda c: not c.required)  # stable: required first, each half in the run's order
    return Account(
        verdict=gate.status.value, exit_code=gate.exit_code, required=required, reported=reported,
        coverage=coverage, failed=tuple(failed),
        open_required=tuple(c for c in lines if c.required and c.status in ("undecided", "error")),
        reported_only=tuple(c for c in lines if not c.required and c.status != "fail"),
        errors=tuple(c for c in lines if c.status == "error"),
        uncovered=gate.uncovered, counters=dict(counters or {}),
    )

