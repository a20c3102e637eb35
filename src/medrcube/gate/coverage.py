"""What the verdict covers: per part, modality and task, whether it rests on decided
evidence there, and if not, why.

A check lies *within* a value of an axis when its selector fixes that axis to the value
(`slice/part/Chest`, every `Chest/.../...` cell and `credibility/part/Chest` lie within
the part Chest; `overall` lies within none). Per value, from the decided checks within it:

    failed         a check within it failed (required or reported-only: NOT QUALIFIED)
    undecided      a required check within it is undecided or in error, none failed
    decided        at least one check within it decided, every decided one passed, no
                   required one open: a failure there would have made the gate NOT
                   QUALIFIED, so a QUALIFIED rests on it
    not evaluated  no check within it decided, with the reasons (too few images on this
                   cube, not measurable, no check in the policy) or outside the
                   intended-use scope

Per cell on request (`coverage: {cells: true}`): every cube cell "Part/Modality/Task",
from the checks that fix all three axes (its accuracy check, its findings).

`coverage: {require: {parts: [...], modalities: [...], tasks: [...]}}` names values the
verdict must rest on: while one of them is not `decided` (or `failed`), QUALIFIED is
refused (UNDECIDED, the value named). Pure: reads check entries (gate.json payloads or
`Verdict.to_dict()` with the check's selector), no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

AXES = ("part", "modality", "task")
AXIS_TITLES = {"part": "parts", "modality": "modalities", "task": "tasks", "cell": "cells"}
# Per cell on request (`coverage: {cells: true}`): a cell "Part/Modality/Task" covers the
# checks that fix all three axes to its values (its accuracy check, its findings, ...).
CELL = "cell"
# The fail power at chance (gate/feasible.py) from which a check is counted able to fail a
# model guessing blindly on its items.
FAILS_AT_CHANCE = 0.99


class Covered(StrEnum):
    DECIDED = "decided"
    FAILED = "failed"
    UNDECIDED = "undecided"
    NOT_EVALUATED = "not evaluated"
    OUTSIDE = "outside the scope"


@dataclass(frozen=True, slots=True)
class ValueCoverage:
    """One value of one axis: its state, the checks within it that decided (passed or
    failed), those open, and why nothing decided there (state `not evaluated`)."""

    axis: str
    value: str
    state: Covered
    passed: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    open: tuple[str, ...] = ()  # required checks within it, undecided or in error
    why: str = ""  # not evaluated / outside: the reason in a few words
    # A check within it would fail a model at chance there with probability >= FAILS_AT_CHANCE
    # (computed before the run, gate/feasible.py): a model guessing there is NOT QUALIFIED.
    fails_at_chance: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"axis": self.axis, "value": self.value, "state": self.state.value, "passed": list(self.passed),
                "failed": list(self.failed), "open": list(self.open), "why": self.why,
                "fails_at_chance": self.fails_at_chance}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ValueCoverage:
        return cls(str(d["axis"]), str(d["value"]), Covered(d["state"]), tuple(d.get("passed") or ()),
                   tuple(d.get("failed") or ()), tuple(d.get("open") or ()), str(d.get("why") or ""),
                   bool(d.get("fails_at_chance", False)))


@dataclass(frozen=True, slots=True)
class Coverage:
    """Every value of every axis of the cube (and those a policy names), in order, and the
    required values (`coverage.require`) that hold no decided check."""

    values: tuple[ValueCoverage, ...] = ()
    missing: tuple[str, ...] = ()  # "part Chest (not evaluated: too few images)"

    def of(self, axis: str) -> list[ValueCoverage]:
        return [v for v in self.values if v.axis == axis]

    def named(self, state: Covered) -> list[ValueCoverage]:
        return [v for v in self.values if v.state is state]

    def to_dict(self) -> dict[str, Any]:
        return {"values": [v.to_dict() for v in self.values], "missing": list(self.missing)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Coverage:
        d = d or {}
        return cls(tuple(ValueCoverage.from_dict(v) for v in d.get("values") or ()), tuple(d.get("missing") or ()))

    def lines(self, verdict: str = "") -> list[str]:
        """In words, per axis: what the verdict rests on, what failed, what is open and what
        could not be evaluated (and why)."""
        head = "QUALIFIED for" if verdict == "QUALIFIED" else "decided (every check there passed)"
        out = []
        for axis in (*AXES, CELL):
            rows = self.of(axis)
            if not rows:
                continue
            parts = []
            for state, word in ((Covered.FAILED, "FAILED"), (Covered.DECIDED, head),
                                (Covered.UNDECIDED, "undecided"), (Covered.NOT_EVALUATED, "not evaluated"),
                                (Covered.OUTSIDE, "outside the scope")):
                mine = [v for v in rows if v.state is state]
                if not mine:
                    continue
                if state in (Covered.NOT_EVALUATED, Covered.OUTSIDE):
                    by_why: dict[str, list[str]] = {}
                    for v in mine:
                        by_why.setdefault(v.why, []).append(v.value)
                    parts += [f"{word}{f' ({why})' if why and state is Covered.NOT_EVALUATED else ''}: "
                              f"{', '.join(vals)}" for why, vals in by_why.items()]
                else:
                    parts.append(f"{word}: {', '.join(v.value for v in mine)}")
            out.append(f"coverage {AXIS_TITLES[axis]}: " + "; ".join(parts))
        guarded = [f"{AXIS_TITLES[a]} {', '.join(v.value for v in self.of(a) if v.fails_at_chance)}" for a in AXES
                   if any(v.fails_at_chance for v in self.of(a))]
        if guarded:
            out.append(f"coverage at chance (a check there fails blind guessing with probability >= "
                       f"{FAILS_AT_CHANCE:g}): " + "; ".join(guarded))
        if self.missing:
            out.append("coverage.require not met (QUALIFIED refused): " + "; ".join(self.missing))
        return out


def _status(e: Mapping[str, Any]) -> str:
    s = str(e.get("verdict", e.get("status", ""))).lower()
    return {"skip": "undecided", "skipped": "undecided"}.get(s, s)


def _why_short(reason: str) -> str:
    """A not-required reason (gate/feasible.py) in a few words."""
    r = reason.lower()
    if "power at margin" in r:
        m = re.search(r"power at margin [0-9.]+", r)
        return f"too few images for {m.group(0) if m else 'power'}"
    if "images under it" in r or "would not pass" in r:
        return "too few images"
    if "not measurable" in r:
        return "not measurable on this cube"
    if "leak" in r:
        return "its items leak the answer"
    if "scope" in r:
        return "outside the scope"
    return reason.split(":")[0][:60]


def coverage_of(
    entries: Iterable[Mapping[str, Any]],
    axis_values: Mapping[str, Sequence[str]] | None = None,
    *,
    outside: Mapping[str, Sequence[str]] | None = None,
    require: Mapping[str, Sequence[str]] | None = None,
) -> Coverage:
    """The coverage of a run's checks. `axis_values`: the (scoped) cube's values per axis
    (None: the values the checks name), and under `cell` its cells "Part/Modality/Task"
    when coverage per cell is asked; `outside`: axis -> the cube's values a scoped run
    left out; `require`: axis -> values the verdict must rest on."""
    entries = list(entries)
    values: dict[str, list[str]] = {a: list((axis_values or {}).get(a) or ()) for a in AXES}
    for e in entries:
        for a in AXES:
            v = e.get(a)
            if v is not None and v not in values[a]:
                values[a].append(str(v))
    left_out = {a: [v for v in (outside or {}).get(a) or () if v not in values[a]] for a in AXES}
    cells = list((axis_values or {}).get(CELL) or ())
    for a, named in (require or {}).items():
        values[a] += [v for v in named if v not in values[a] and v not in left_out[a]]
    out: list[ValueCoverage] = []
    for a in AXES:
        for value in values[a]:
            out.append(_value(a, value, [e for e in entries if e.get(a) == value]))
        out += [ValueCoverage(a, v, Covered.OUTSIDE, why="outside the intended-use scope") for v in left_out[a]]
    if cells:
        by_cell: dict[str, list[Mapping[str, Any]]] = {}
        for e in entries:
            if all(e.get(a) is not None for a in AXES):
                by_cell.setdefault("/".join(str(e[a]) for a in AXES), []).append(e)
        out += [_value(CELL, cell, by_cell.get(cell, [])) for cell in [*cells, *(c for c in by_cell if c not in cells)]]
    missing = []
    by_key = {(v.axis, v.value): v for v in out}
    for a, named in (require or {}).items():
        for value in named:
            v = by_key[(a, value)]
            if v.state not in (Covered.DECIDED, Covered.FAILED):
                missing.append(f"{a} {value} ({v.state.value}{f': {v.why}' if v.why else ''})")
    return Coverage(tuple(out), tuple(missing))


def _value(axis: str, value: str, within: list[Mapping[str, Any]]) -> ValueCoverage:
    v = _state(axis, value, within)
    guarded = any(float((e.get("details") or {}).get("fail_power_at_chance") or 0.0) >= FAILS_AT_CHANCE
                  for e in within)
    return replace(v, fails_at_chance=True) if guarded else v


def _state(axis: str, value: str, within: list[Mapping[str, Any]]) -> ValueCoverage:
    ids = [str(e.get("id", e.get("check_id"))) for e in within]
    st = [_status(e) for e in within]
    passed = tuple(i for i, s in zip(ids, st, strict=True) if s == "pass")
    failed = tuple(i for i, s in zip(ids, st, strict=True) if s == "fail")
    open_ = tuple(i for i, s, e in zip(ids, st, within, strict=True)
                  if s not in ("pass", "fail") and e.get("required", True))
    if failed:
        return ValueCoverage(axis, value, Covered.FAILED, passed, failed, open_)
    if open_:
        return ValueCoverage(axis, value, Covered.UNDECIDED, passed, failed, open_)
    if passed:
        return ValueCoverage(axis, value, Covered.DECIDED, passed)
    if not within:
        return ValueCoverage(axis, value, Covered.NOT_EVALUATED, why="no check of the policy lies within it")
    reasons = sorted({_why_short(str((e.get("details") or {}).get("not_required") or ""))
                      for e in within if (e.get("details") or {}).get("not_required")})
    why = ", ".join(reasons) if reasons else "its checks did not decide"
    return ValueCoverage(axis, value, Covered.NOT_EVALUATED, why=why)
