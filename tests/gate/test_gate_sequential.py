"""The gate's group-sequential decisions, on looks given as p-values: a pass at the look's
nominal level, fails by Holm at spent levels (a rejection frees its share and earlier
looks of the others are tested again), the point rule only at the final look."""

from __future__ import annotations

import pytest

from medrcube.gate.checks import Check, CheckKind
from medrcube.gate.sequential import FAILED_EARLY, CheckLooks, Look, decide_looks, verdict_is_final
from medrcube.gate.verdict import Status
from medrcube.metrics.group_sequential import nominal_levels

LOOKS = (0.2, 0.5, 1.0)


def check(name: str, *, required: bool = True, rule: str = "lower_bound") -> Check:
    return Check(id=name, kind=CheckKind.CELL, metric="accuracy", part=None, modality=None, task=None, bound=0.5,
                 rule=rule, confidence=0.95, min_n=10, max_error_rate=0.05, required=required)


def looks(name: str, *pairs: tuple[float, float], **kw: object) -> CheckLooks:
    m = CheckLooks(check(name, **kw), LOOKS)  # type: ignore[arg-type]
    m.looks = [Look(10 * (i + 1), LOOKS[i], p_pass, p_fail) for i, (p_pass, p_fail) in enumerate(pairs)]
    return m


def test_a_pass_needs_the_looks_nominal_level_not_alpha() -> None:
    early = nominal_levels(LOOKS, 0.025)[0]
    a = looks("a", (early * 2, 0.9))
    b = looks("b", (early / 2, 0.9))
    decide_looks([a, b])
    assert a.status is None and b.status is Status.PASS and b.decided_at == 0


def test_holm_frees_a_share_and_tests_earlier_looks_again() -> None:
    at_half = nominal_levels(LOOKS, 0.025 / 2)[0]  # look 1's level with two claims left
    at_third = nominal_levels(LOOKS, 0.025 / 3)[0]
    strong = looks("strong", (0.99, at_third / 10))
    middle = looks("middle", (0.99, (at_third + at_half) / 2))
    weak = looks("weak", (0.99, 0.5))
    new = decide_looks([strong, middle, weak])
    # strong is rejected at alpha/3; middle, not at alpha/3, is at alpha/2 once strong is out.
    assert {m.check.id for m in new} == {"strong", "middle"}
    assert middle.status is Status.FAIL and middle.fail_alpha == pytest.approx(0.025 / 2) and middle.decided_at == 0
    assert weak.status is None and weak.fail_alpha == pytest.approx(0.025)
    # One family: a reported-only check's failure fails the gate, so it takes a share too.
    alone = looks("alone", (0.99, at_half * 1.01))
    optional = looks("optional", (0.99, 0.5), required=False)
    decide_looks([alone, optional, looks("other", (0.99, 0.5))])
    assert alone.status is None and alone.fail_alpha == pytest.approx(0.025 / 3)


def test_a_reported_only_failure_makes_the_sequential_verdict_final() -> None:
    optional = looks("optional", (0.99, 1e-9), required=False)
    required = looks("required", (0.5, 0.5))
    decide_looks([optional, required])
    assert optional.status is Status.FAIL and verdict_is_final([optional, required]) == FAILED_EARLY


def test_the_point_rule_decides_only_at_the_final_look() -> None:
    m = looks("p", (0.4, 0.6), (0.4, 0.6), rule="point")
    m.looks = [Look(10, 0.2, 0.4, 0.6, point_ok=True), Look(25, 0.5, 0.4, 0.6, point_ok=True)]
    decide_looks([m])
    assert m.status is None
    m.looks.append(Look(50, 1.0, 0.4, 0.6, point_ok=False))
    decide_looks([m])
    assert m.status is Status.FAIL and m.by_point
