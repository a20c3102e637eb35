"""Selective prediction and the deferral utility (issue 16), by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from medrcube.metrics.selective import (
    DeferralCosts,
    abstention_summary,
    accuracy_at_coverage,
    aurc,
    coverage_at_risk,
    item_cost,
    ranked,
    ranked_from_arrays,
    risk_coverage,
    selective_summary,
    utility,
)
from medrcube.records import Outcome


def test_risk_coverage_by_hand() -> None:
    r = ranked_from_arrays([0.6, 0.9, 0.7, 0.8], [1, 1, 0, 1])  # ranked: 0.9 1, 0.8 1, 0.7 0, 0.6 1
    cov, risk = risk_coverage(r.correct)
    assert list(cov) == [0.25, 0.5, 0.75, 1.0]
    assert list(risk) == pytest.approx([0, 0, 1 / 3, 1 / 4])
    assert aurc(r.correct) == pytest.approx((1 / 3 + 1 / 4) / 4)
    assert accuracy_at_coverage(r, 0.5).value == 1.0
    assert accuracy_at_coverage(r, 0.75).value == pytest.approx(2 / 3)
    assert coverage_at_risk(r, 0.25, n_boot=20)["coverage"] == 1.0
    assert coverage_at_risk(r, 0.2, n_boot=20)["coverage"] == 0.5
    with pytest.raises(ValueError):
        accuracy_at_coverage(r, 0.0)


def _conf(r, value):
    return replace(r, confidence={"source": "logprobs", "value": value, "probs": None, "mass": 1.0})


def test_from_records_ties_and_missing(rec) -> None:
    recs = [_conf(rec("a"), 0.9), _conf(rec("b", Outcome.WRONG), 0.9), _conf(rec("c"), 0.5), rec("d"),
            _conf(rec("e", Outcome.ERROR), 0.99)]
    r = ranked(recs)
    assert r.n == 3 and r.missing == 1  # the error is not graded; d has no confidence
    assert ranked(list(reversed(recs))).correct.tolist() == r.correct.tolist()
    doc = selective_summary(recs)
    assert doc is not None and doc["n"] == 3 and set(doc["accuracy_at_coverage"]) == {"0.5", "0.8", "0.9"}
    assert selective_summary([rec("x")]) is None


def test_costs_and_utility_by_hand(rec) -> None:
    costs = DeferralCosts(error=2.0, deferral=0.5)
    assert item_cost(Outcome.DEFERRED, costs) == 0.5
    assert item_cost(Outcome.REFUSED, costs) == 2.0 and item_cost(Outcome.UNPARSED, costs) == 2.0
    assert item_cost(Outcome.ERROR, costs) is None and item_cost(Outcome.UNAVAILABLE, costs) is None
    recs = [rec("c1"), rec("c2"), rec("w", Outcome.WRONG), rec("u", Outcome.UNPARSED), rec("d1", Outcome.DEFERRED),
            rec("d2", Outcome.DEFERRED), rec("d3", Outcome.DEFERRED), rec("e", Outcome.ERROR)]
    recs = [replace(r, variant="abstain") for r in recs]
    u = utility(recs, costs)
    # By hand: 7 counted (the API error is not); cost = (2 x 2 + 3 x 0.5) / 7 = 5.5 / 7; utility = 1 - cost / 2.
    assert (u.n, u.correct, u.errors, u.deferred) == (7, 2, 2, 3)
    assert u.mean_cost == pytest.approx(5.5 / 7) and u.utility == pytest.approx(1 - 5.5 / 14)
    assert u.ci95[0] <= u.utility <= u.ci95[1]
    doc = abstention_summary(recs, costs)
    assert doc is not None and doc["global"]["deferred"] == 3
    assert list(doc["by_task_modality_parts"]) == ["task=Disease Diagnosis|modality=X-Ray|parts=Chest"]
    assert abstention_summary([rec("s")]) is None
    with pytest.raises(ValueError, match="deferral"):
        DeferralCosts(error=1.0, deferral=1.5)
