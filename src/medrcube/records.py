"""Graded records: one per (item, variant instance), the only input of metrics and gate."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from copy import deepcopy
from dataclasses import MISSING, dataclass, fields
from enum import StrEnum
from operator import attrgetter, itemgetter
from typing import Any


class Outcome(StrEnum):
    CORRECT = "correct"
    WRONG = "wrong"
    UNPARSED = "unparsed"  # the response names no single option: never guessed
    REFUSED = "refused"
    TRUNCATED = "truncated"  # cut off at the token limit (finish_reason length): never graded as an answer
    ERROR = "error"  # the model was not reached or failed: never graded as wrong
    UNAVAILABLE = "unavailable"  # the image is restricted: not asked in an image variant
    # The model chose the offered abstention option ("Cannot be determined from this
    # image", the `abstain` variant): never wrong, never a refusal, never in an accuracy
    # denominator; selective prediction and the deferral utility count it (metrics.selective).
    DEFERRED = "deferred"


# Outcomes that count in an accuracy denominator. Errors, truncated answers and
# unavailable items do not: the gate reports them separately (an error rate above the
# bound errors the check); a truncated answer is counted like an error, not guessed.
GRADED = frozenset({Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSED, Outcome.REFUSED})
# Asked, but no answer to grade: every consumer counts these against its error bound,
# never as a miss (an outage or a token limit is not a wrong answer).
NOT_ANSWERED = frozenset({Outcome.ERROR, Outcome.TRUNCATED})


# The coarse, non-identifying attributes of an item's image that a gate can stratify by
# (sex, a decade age band, the scanner's manufacturer and model, the site's own code, the
# protocol family). Every value is from a closed vocabulary or a short code, never free
# text; what a value may be is cube/attributes.py's.
ATTRIBUTE_NAMES: tuple[str, ...] = ("sex", "age_band", "manufacturer", "model", "site", "protocol")
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Attributes:
    """An image's subgroup attributes ("unknown" where the source does not say)."""

    sex: str = UNKNOWN
    age_band: str = UNKNOWN
    manufacturer: str = UNKNOWN
    model: str = UNKNOWN
    site: str = UNKNOWN
    protocol: str = UNKNOWN

    def get(self, name: str) -> str:
        if name not in ATTRIBUTE_NAMES:
            raise KeyError(f"unknown subgroup attribute {name!r}; expected one of {', '.join(ATTRIBUTE_NAMES)}")
        return str(getattr(self, name))

    def to_dict(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in ATTRIBUTE_NAMES}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Attributes:
        return cls(**{k: str(d[k]) for k in ATTRIBUTE_NAMES if k in d and d[k] is not None})

    @property
    def known(self) -> bool:
        return any(getattr(self, name) != UNKNOWN for name in ATTRIBUTE_NAMES)


@dataclass(frozen=True, slots=True)
class GradedRecord:
    item_id: str
    dataset: str
    task: str
    modality: str
    part: str
    image: str | None  # the cube's image key (groups items into chains)
    image_digest: str | None
    variant: str  # "standard", "blind" or "shuffled"
    rotation: int  # cyclic shift of the options for "shuffled" (0 otherwise)
    answer: int  # index of the correct option as shown to the model
    n_options: int
    prompt_hash: str
    response: str | None
    extracted: int | None  # index of the chosen option as shown, None when unparsed
    how: str  # how extraction decided ("bare_letter", "judge", ...)
    outcome: Outcome
    latency_s: float = 0.0
    cached: bool = False
    error: str | None = None
    # The model's confidence in its answer, where it was measured (models.confidence):
    # {"source": "logprobs" | "logits" | "verbal", "value": P(chosen option) or None,
    #  "probs": [P(option i as shown)] or None, "mass": probability mass seen on the
    #  option letters (logprobs/logits)}. None when no confidence was measured.
    confidence: Mapping[str, Any] | None = None
    # The option texts as shown (rotated for "shuffled", with the abstention option last
    # for "abstain"): per-finding metrics read the labels of the answer and the choice.
    # Empty in records written before it existed.
    options: tuple[str, ...] = ()
    # The item's subgroup attributes (Item.attributes), None when the cube has none.
    attributes: Attributes | None = None

    @property
    def correct(self) -> bool:
        return self.outcome is Outcome.CORRECT

    @property
    def graded(self) -> bool:
        return self.outcome in GRADED

    @property
    def cell(self) -> tuple[str, str, str]:
        return (self.part, self.modality, self.task)

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data, equal to `dataclasses.asdict` with the outcome's
        value. Written out field by field: asdict's generic recursion was the largest of
        medrcube's own costs after the last answer (results.jsonl and the hand-over each
        turn every record into a dict once). Only `confidence` nests, and is copied deeply as asdict does."""
        d = {name: getattr(self, name) for name in _FIELD_NAMES}
        d["outcome"] = self.outcome.value
        d["options"] = type(self.options)(self.options)
        if self.confidence is not None:
            d["confidence"] = deepcopy(self.confidence)
        if self.attributes is not None:  # the one other nesting: a plain dict, as asdict gives
            d["attributes"] = self.attributes.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GradedRecord:
        """The record of `to_dict`'s dict, or of results.jsonl's line read as JSON (its other keys
        ignored). A dict with every field (results.jsonl's lines, the shards' files) is read by
        one lookup of all of them and passed by position (8.5 -> 4 us a record: the xdist workers
        and the controller read tens of thousands after the last answer); one written before a
        field existed takes that field's default."""
        try:
            values = list(_ALL_FIELDS(d))
        except KeyError:
            given = {k: d[k] for k in _FIELD_NAMES if k in d}
            values = [given.get(name, _DEFAULTS.get(name, _REQUIRED)) for name in _FIELD_NAMES]
            if _REQUIRED in values:  # as the constructor says it: the missing fields by name
                return cls(**{**given, "outcome": Outcome(d["outcome"])})
        outcome = values[_AT_OUTCOME]
        values[_AT_OUTCOME] = (_OUTCOMES.get(outcome) if isinstance(outcome, str) else None) or Outcome(outcome)
        if values[_AT_OPTIONS] is not None:
            values[_AT_OPTIONS] = tuple(values[_AT_OPTIONS])  # a JSON list back to a tuple
        if values[_AT_CONFIDENCE] is not None:
            values[_AT_CONFIDENCE] = dict(values[_AT_CONFIDENCE])
        if values[_AT_ATTRIBUTES] is not None:
            values[_AT_ATTRIBUTES] = Attributes.from_dict(values[_AT_ATTRIBUTES])
        return cls(*values)

    @property
    def confidence_value(self) -> float | None:
        """P(the chosen option is right) as the model gave it; None when not measured."""
        c = self.confidence
        v = c.get("value") if c else None
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(GradedRecord))
_ALL_FIELDS = itemgetter(*_FIELD_NAMES)  # every field's value of a dict, in the constructor's order
_AT_OUTCOME, _AT_OPTIONS, _AT_CONFIDENCE, _AT_ATTRIBUTES = (
    _FIELD_NAMES.index(name) for name in ("outcome", "options", "confidence", "attributes"))
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(GradedRecord) if f.default is not MISSING}
_REQUIRED = object()  # a field without a default, missing from the dict
_OUTCOMES: dict[str, Outcome] = {o.value: o for o in Outcome}


# The variants that change the text of an ask (run/variants.py). Every other variant a
# record carries is an image perturbation's spec (run/perturbations.py, whose registry a
# site package extends): "<kind>:<level>" ("jpeg:30", "noise:0.03", "noise:0.03@7" with a
# seed) or a kind without a level ("flip"); metrics pair it with the standard record of
# the same item.
TEXT_VARIANTS: tuple[str, ...] = ("standard", "blind", "shuffled", "abstain")


def is_perturbation(variant: str) -> bool:
    """Whether a record's variant is an image perturbation ("jpeg:30", "flip")."""
    head = variant.partition(":")[0].partition("@")[0]
    return bool(head) and head not in TEXT_VARIANTS


_OUTCOME, _CACHED = attrgetter("outcome"), attrgetter("cached")


def outcome_pairs(records: Sequence[GradedRecord],
                  counted: Mapping[tuple[Outcome, bool], int] | None = None) -> Counter[tuple[Outcome, bool]]:
    """How many of `records` have each (outcome, cached): `counted` when it counts as many records (a run's
    counts made as it graded them, run/runner.RunResult.outcome_pairs), else counted from the records, each
    read once (C loops)."""
    if counted is not None and sum(counted.values()) == len(records):
        return Counter(counted)
    return Counter(zip(map(_OUTCOME, records), map(_CACHED, records), strict=True))


def outcome_counts(records: Iterable[GradedRecord]) -> dict[Outcome, int]:
    """How many records have each outcome (every outcome, 0 when none), counted by C loops."""
    counted = Counter(map(_OUTCOME, records))
    return {o: counted[o] for o in Outcome}
