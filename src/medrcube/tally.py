"""The run's one set of counters: what became of every item the cube holds.

`Tally` is computed once per run, from the candidate's graded records, the requests its
model adapter sent (the usage meter) and the items the cube refused at load, and every
output renders it: the live line's counters are its categories, the terminal summary,
gate.json and run.json (`tally`), and report.html. Its identity holds by construction:

    asks = unavailable + cached + answered + failed + not_asked

`asks` are the (item, variant) pairs the run planned; an ask is `answered` when this run
got a response for it, `cached` when the response store held one (from an earlier run),
`failed` when its request was sent and failed (an outage, a refusal of the request:
never graded), `not_asked` when the run stopped before sending it (a circuit breaker,
a refused key, Ctrl-C, a budget: `stop` says why; a rerun on the same store asks only
these and the failed ones), `unavailable` when its image is restricted. `requests` are
the requests the model adapter sent (identical prompts share one), `failed_requests` those
of them that failed (the usage meter's errors: the summary's "failed requests"). `skipped` are the
items the cube holds that were not loaded, each with its reason (`medrcube validate`
names the same), so that `items = loaded + len(skipped)`; a `--sequential` run asks only what its checks
need: the items it never planned are `not_needed`.

A record that was not asked carries `how == NOT_ASKED` (run/grade.py), so the counts
read back from results.jsonl are the counts the run printed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrcube.records import GRADED, GradedRecord, Outcome, outcome_pairs

# `GradedRecord.how` of an ask the run stopped before sending (run/grade.py).
NOT_ASKED = "not_asked"

# The live categories, in the order every output names them.
CATEGORIES: tuple[str, ...] = ("answered", "cached", "failed", "not_asked", "unavailable")


@dataclass(frozen=True, slots=True)
class SkippedItem:
    """An item the cube holds and the run could not load (cube/item.py `Problem`, an error)."""

    item_id: str
    reason: str  # the stable code: image_missing, image_path_escapes, image_not_a_file, ...
    message: str  # where and what, as `medrcube validate` says it

    def to_dict(self) -> dict[str, str]:
        return {"item_id": self.item_id, "reason": self.reason, "message": self.message}


def category(record: GradedRecord) -> str:
    """Which of CATEGORIES an ask's record falls in."""
    return _category_of(record.outcome, record.how == NOT_ASKED if record.outcome is Outcome.ERROR else record.cached)


def _category_of(outcome: Outcome, flag: bool) -> str:
    """`flag`: for an error, whether it was never asked (the run stopped first); else whether cached."""
    if outcome is Outcome.UNAVAILABLE:
        return "unavailable"
    if outcome is Outcome.ERROR:
        return "not_asked" if flag else "failed"
    return "cached" if flag else "answered"


@dataclass(frozen=True)
class Tally:
    """The counters of one run (see the module docstring); built by `tally`."""

    asks: int
    answered: int
    cached: int
    failed: int
    not_asked: int
    unavailable: int
    graded: int  # answered or cached, and graded (right, wrong, unparsed, refused)
    requests: int  # requests the candidate's adapter sent
    loaded: int  # items loaded from the cube
    skipped: tuple[SkippedItem, ...] = ()
    stop: str | None = None  # why the run stopped early (a breaker, a refused key, a budget)
    not_needed: int = 0  # items a --sequential run never planned: its verdict was final, or a budget stopped it
    failed_requests: int = 0  # of `requests`, those that failed (xdist workers each retry an ask another's failed)
    outcomes: Mapping[str, int] = field(default_factory=dict)

    @property
    def items(self) -> int:
        """Items the cube holds: loaded, and skipped at load."""
        return self.loaded + len(self.skipped)

    @property
    def complete(self) -> bool:
        """Every planned ask has an answer or a failure of its own (none left unasked)."""
        return self.not_asked == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": self.items, "loaded": self.loaded, "asks": self.asks,
            "answered": self.answered, "cached": self.cached, "failed": self.failed, "not_asked": self.not_asked,
            "unavailable": self.unavailable, "graded": self.graded, "requests": self.requests,
            "skipped": [s.to_dict() for s in self.skipped], "stop": self.stop, "not_needed": self.not_needed,
            "failed_requests": self.failed_requests,
            "outcomes": dict(sorted(self.outcomes.items())),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Tally:
        """A tally read back from gate.json or run.json."""
        return cls(
            asks=int(d["asks"]), answered=int(d["answered"]), cached=int(d["cached"]), failed=int(d["failed"]),
            not_asked=int(d["not_asked"]), unavailable=int(d["unavailable"]), graded=int(d["graded"]),
            requests=int(d["requests"]), loaded=int(d["loaded"]),
            skipped=tuple(SkippedItem(str(s["item_id"]), str(s["reason"]), str(s["message"]))
                          for s in d.get("skipped") or ()),
            stop=d.get("stop"), outcomes={str(k): int(v) for k, v in (d.get("outcomes") or {}).items()},
            not_needed=int(d.get("not_needed") or 0), failed_requests=int(d.get("failed_requests") or 0),
        )

    def lines(self, *, shown: int = 5) -> list[str]:
        """The account of the items in plain words (the terminal summary's, report.html's)."""
        head = (f"items: {self.items} in the cube, {self.loaded} loaded; asks (items x variants): {self.asks}: "
                f"{self.answered} answered, {self.cached} from the response store, {self.failed} failed")
        if self.not_asked:
            head += f", {self.not_asked} not asked (the run stopped)"
        if self.unavailable:
            head += f", {self.unavailable} unavailable (restricted image)"
        head += f"; {self.graded} graded; {self.requests} requests sent, {self.failed_requests} of them failed"
        out = [head]
        if self.not_needed:
            out.append(f"not planned: {self.not_needed} items a --sequential run did not ask "
                       f"({self.stop or 'its verdict was final'})")
        if self.skipped:
            out.append(f"skipped at load: {len(self.skipped)} items (`medrcube validate` names the same):")
            out += [f"  {s.item_id}: {s.reason}: {s.message}" for s in self.skipped[:shown]]
            if len(self.skipped) > shown:
                out.append(f"  ... and {len(self.skipped) - shown} more (gate.json `tally.skipped`)")
        return out


def skipped_items(problems: Iterable[Any]) -> tuple[SkippedItem, ...]:
    """The items a cube refused at load, from its problems (cube/item.py `Problem`): one
    entry per item, its first error. A problem that names no item (a whole file) is not
    an item's."""
    out: dict[str, SkippedItem] = {}
    for p in problems:
        if getattr(p, "severity", "error") != "error" or p.item_id is None:
            continue
        out.setdefault(str(p.item_id), SkippedItem(str(p.item_id), str(p.reason), str(p)))
    return tuple(out.values())


def tally(
    records: Sequence[GradedRecord],
    *,
    requests: int,
    loaded: int,
    skipped: Sequence[SkippedItem] = (),
    stop: str | None = None,
    not_needed: int = 0,
    failed_requests: int = 0,
    pairs: Mapping[tuple[Outcome, bool], int] | None = None,
) -> Tally:
    """The run's Tally from the candidate's records (every variant), the requests its
    adapter sent, the items loaded and those skipped at load. `pairs`: how many records
    have each (outcome, cached), as the run counted them while grading
    (run/runner.RunResult.outcome_pairs), read instead of the records when they are as many."""
    # Counted by C loops over every record (records.outcome_pairs: each read once, or the run's counts made
    # as it graded them), then by Python over the few errors: what decides a category is the outcome,
    # whether cached, and for an error how it came. The enum's `.value` is read once per outcome, not per record.
    by_outcome: Counter[Outcome] = Counter()
    cached: Counter[Outcome] = Counter()
    for (outcome, was_cached), n in outcome_pairs(records, pairs).items():
        by_outcome[outcome] += n
        if was_cached:
            cached[outcome] += n
    not_asked = sum(1 for r in records if r.outcome is Outcome.ERROR and r.how == NOT_ASKED) \
        if by_outcome[Outcome.ERROR] else 0
    keyed: Counter[tuple[Outcome, bool]] = Counter()
    for outcome, n in by_outcome.items():
        flagged = not_asked if outcome is Outcome.ERROR else cached[outcome]
        keyed[(outcome, True)] += flagged
        keyed[(outcome, False)] += n - flagged
    by: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for (outcome, flag), n in keyed.items():
        by[_category_of(outcome, flag)] += n
        if n:
            outcomes[outcome.value] += n
    return Tally(
        asks=len(records), answered=by["answered"], cached=by["cached"], failed=by["failed"],
        not_asked=by["not_asked"], unavailable=by["unavailable"],
        graded=sum(n for outcome, n in outcomes.items() if Outcome(outcome) in GRADED), requests=int(requests),
        loaded=int(loaded), skipped=tuple(skipped), stop=stop, outcomes=dict(outcomes), not_needed=max(0, int(not_needed)),
        failed_requests=int(failed_requests),
    )


__all__ = ["CATEGORIES", "NOT_ASKED", "SkippedItem", "Tally", "category", "skipped_items", "tally"]
