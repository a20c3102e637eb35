"""A site's own check as a gate check: a proportion over graded records, decided with an
interval against a bound, reported in gate.json, the summary and Allure like a built-in
check (docs/site-tests.md has the worked example).

    def test_pneumothorax_sensitivity(medrcube_records, medrcube_verdict):
        positives = [r for r in medrcube_records if is_pneumothorax(r)]
        medrcube_verdict("site/pneumothorax sensitivity", positives, bound=0.9)

`hit(record)` says whether a record counts as a success (default: answered correctly).
Records whose image was unavailable are left out; records with an API error or an answer
cut at the token limit (truncated) are counted apart (never as misses) and, above
`max_error_rate`, make the check an error.

The decision (rule `lower_bound`: the Wilson interval's lower end must reach the bound;
`point`: the observed proportion) is the gate's accuracy rule; this module applies it to
the site's numbers only, with the gate's own interval function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from medrcube.records import NOT_ANSWERED, GradedRecord, Outcome

MAX_WORST = 5


@dataclass(frozen=True)
class SiteCheck:
    """The identity of a site check (what a built-in Check carries for Allure and gate.json)."""

    id: str
    bound: float
    rule: str = "lower_bound"
    confidence: float = 0.95
    min_n: int = 10
    max_error_rate: float = 0.05
    metric: str = "proportion"
    source: str = "site test"
    part: str | None = None
    modality: str | None = None
    task: str | None = None
    required: bool = True
    kind: str = "site"
    params: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=lambda: {"severity": "critical", "kind": "site"})

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _letter(index: int | None) -> str | None:
    if index is None:
        return None
    out, index = "", index + 1
    while index:
        index, rem = divmod(index - 1, 26)
        out = chr(65 + rem) + out
    return out


def decide_proportion(
    check: SiteCheck, records: Iterable[GradedRecord], hit: Callable[[GradedRecord], bool]
) -> dict[str, Any]:
    """Decide a site check over records; returns its gate.json entry."""
    from medrcube.metrics.accuracy import wilson_interval
    from medrcube.plugin.summary import _base_payload, _clean

    asked = [r for r in records if r.outcome is not Outcome.UNAVAILABLE]
    errors = [r for r in asked if r.outcome in NOT_ANSWERED]  # errored and truncated: not graded
    graded = [r for r in asked if r.outcome not in NOT_ANSWERED]
    hits = sum(bool(hit(r)) for r in graded)
    n = len(graded)
    error_rate = len(errors) / len(asked) if asked else 0.0
    observed = hits / n if n else None
    interval = wilson_interval(hits, n, check.confidence) if n else None
    value = interval[0] if check.rule == "lower_bound" and interval else observed
    what = f"{check.metric} {hits}/{n}"
    if error_rate > check.max_error_rate:
        status = "error"
        truncated = sum(r.outcome is Outcome.TRUNCATED for r in errors)
        cut = f", {truncated} of them truncated at the token limit" if truncated else ""
        message = (
            f"{len(errors)} errors of {len(asked)} requests{cut} ({error_rate:.0%} > max_error_rate "
            f"{check.max_error_rate:.0%}): the evidence is incomplete; not graded"
        )
    elif n < check.min_n:
        status = "undecided"
        message = f"n={n} < min_n={check.min_n} records: insufficient evidence"
    elif value is not None and value >= check.bound:
        status = "pass"
        message = f"{what} = {observed:.3f}, {_rule_text(check)} {value:.3f} >= bound {check.bound:.3f}"
    elif check.rule == "lower_bound" and interval is not None and interval[1] >= check.bound:
        # The interval straddles the bound: the evidence decides neither way.
        status = "undecided"
        message = (
            f"{what} = {observed:.3f}, interval [{interval[0]:.3f}, {interval[1]:.3f}] contains the bound "
            f"{check.bound:.3f}: insufficient evidence"
        )
    else:
        status = "fail"
        message = f"{what} = {observed:.3f}, {_rule_text(check)} {value:.3f} < bound {check.bound:.3f}"
    misses = [r for r in graded if not hit(r)][:MAX_WORST]
    payload = _base_payload(check)
    payload.update(
        {
            "verdict": status,
            "bound": check.bound,
            "observed": observed,
            "interval": list(interval) if interval else None,
            "n": n,
            "chance": None,
            "error_rate": error_rate,
            "message": f"{check.id}: {message}",
            "worst": [
                {
                    "item_id": r.item_id,
                    "cell": "/".join(r.cell),
                    "variant": r.variant,
                    "expected": _letter(r.answer),
                    "extracted": _letter(r.extracted),
                    "outcome": r.outcome.value,
                    "response": " ".join((r.response or "").split())[:160],
                }
                for r in misses
            ],
            "details": {"hits": hits, "errors": len(errors)},
        }
    )
    return _clean(payload)


def _rule_text(check: SiteCheck) -> str:
    return f"{check.confidence:.0%} lower bound" if check.rule == "lower_bound" else "observed"


class SiteVerdict:
    """The `medrcube_verdict` fixture: call it once per site test."""

    def __init__(self, node: pytest.Item, session: Any) -> None:
        self.node = node
        self.session = session

    def __call__(
        self,
        check_id: str,
        records: Iterable[GradedRecord],
        *,
        bound: float,
        hit: Callable[[GradedRecord], bool] = lambda r: r.outcome is Outcome.CORRECT,
        rule: str = "lower_bound",
        confidence: float = 0.95,
        min_n: int = 10,
        max_error_rate: float = 0.05,
        metric: str = "proportion",
        required: bool = True,
    ) -> Any:
        from medrcube.plugin import session as gate

        if rule not in ("lower_bound", "point"):
            raise pytest.UsageError(f"medrcube_verdict({check_id!r}): rule={rule!r}; choices: lower_bound, point")
        if not 0.0 <= bound <= 1.0:
            raise pytest.UsageError(f"medrcube_verdict({check_id!r}): bound={bound!r} must lie in [0, 1]")
        check = SiteCheck(
            id=check_id, bound=bound, rule=rule, confidence=confidence, min_n=min_n,
            max_error_rate=max_error_rate, metric=metric, required=required,
        )
        records = list(records)
        payload = decide_proportion(check, records, hit)
        questions = self.session.questions
        for w in payload["worst"]:
            w["question"] = questions.get(w["item_id"])
        decided = gate.publish(self.node, check, None, payload, model=self.session.options.model)
        gate.enforce(decided)
        return decided
