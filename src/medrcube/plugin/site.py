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

The decision is the gate's, as for a built-in accuracy check: the same interval, clustered
by image (finite-sample with few images), and the same family (gate.evaluate.decide_joining:
the check joins the built-in checks' Holm family; rule `point` decides on the observed
proportion from min_n records on). This module only names the check and publishes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from medrcube.records import GradedRecord, Outcome


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


def gate_check(check: SiteCheck) -> Any:
    """The decision core's Check for a site check (kind `site`): the gate decides it."""
    from medrcube.gate.checks import Check, CheckKind

    return Check(id=check.id, kind=CheckKind.SITE, metric=check.metric, part=check.part, modality=check.modality,
                 task=check.task, bound=check.bound, rule=check.rule, confidence=check.confidence,
                 min_n=check.min_n, max_error_rate=check.max_error_rate, source=check.source,
                 required=check.required, labels=dict(check.labels))


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
        from medrcube.plugin import outcome

        if rule not in ("lower_bound", "point"):
            raise pytest.UsageError(f"medrcube_verdict({check_id!r}): rule={rule!r}; choices: lower_bound, point")
        if not 0.0 <= bound <= 1.0:
            raise pytest.UsageError(f"medrcube_verdict({check_id!r}): bound={bound!r} must lie in [0, 1]")
        check = SiteCheck(
            id=check_id, bound=bound, rule=rule, confidence=confidence, min_n=min_n,
            max_error_rate=max_error_rate, metric=metric, required=required,
        )
        from medrcube.plugin.summary import verdict_payload

        verdict = self.session.site_verdict(gate_check(check), list(records), hit)
        payload = verdict_payload(check, verdict, self.session.questions)
        decided = outcome.publish(self.node, check, verdict, payload, model=self.session.options.model)
        outcome.enforce(decided)
        return decided
