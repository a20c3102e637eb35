"""The gate's decisions (issue 12): three outcomes, decisive evidence decides at any n,
the family is controlled, the gate fails closed.

This file replaces the pre-issue-12 tests of evaluate: their expectations (a skip below
min_n, McNemar for regression, bounds on rationality and shortcut probability) changed
deliberately; every kind is tested again here under the new rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medrcube.cube.item import Cube
from medrcube.gate.checks import build_checks
from medrcube.gate.evaluate import evaluate, evaluate_gate
from medrcube.gate.family import holm_adjust
from medrcube.gate.thresholds import policy_from_dict
from medrcube.gate.verdict import EXIT_CODES, GateStatus, Status
from medrcube.models.simulate import SimulatedAdapter, parse_simulation

DD, MR = "Disease Diagnosis", "Modality Recognition"


def policy(rule: str = "lower_bound", **extra):
    doc = {
        "version": 1,
        "defaults": {"rule": rule, "confidence": 0.95, "min_n": 50, "max_error_rate": 0.05},
        "overall": {"bound": 0.5},
        "cells": [{"match": "*/*/*", "bound": 0.5}],
        "credibility": {"min_grounding": 0.1, "min_pairs": 50, "by_part": False, "exclude_low_tasks": []},
        "image_dependence": {"min_drop": 0.1},
        "position_robustness": {"max_gap": 0.15, "min_circular_accuracy": 0.4},
        "regression": {"margin": 0.05},
    }
    doc.update(extra)
    return policy_from_dict(doc)


def only(checks, kind):
    return next(c for c in checks if c.kind == kind)


@pytest.mark.parametrize("rule", ["point", "lower_bound"])
def test_a_model_wrong_on_every_item_never_exits_zero(rec, rule):
    for n in (1, 2, 5, 24):
        records = [rec(f"i{k}", "wrong") for k in range(n)]
        checks = build_checks(sorted({r.cell for r in records}), policy(rule))
        gate = evaluate_gate(checks, records).gate
        assert gate.status is not GateStatus.QUALIFIED and gate.exit_code != 0, (n, gate)
    # 24 of 24 wrong against 0.5: decisive below min_n=50 (Wilson upper bound 0.138).
    assert gate.status is GateStatus.NOT_QUALIFIED and gate.exit_code == EXIT_CODES[GateStatus.NOT_QUALIFIED] == 10


def test_exit_codes_are_distinct_and_outside_pytests():
    assert EXIT_CODES[GateStatus.QUALIFIED] == 0
    assert len(set(EXIT_CODES.values())) == 3 and not set(EXIT_CODES.values()) & {1, 2, 3, 4, 5}


@pytest.mark.parametrize("rule", ["point", "lower_bound"])
def test_accuracy_decides_below_min_n_both_ways(rec, rule):
    checks = build_checks([("Chest", "X-Ray", DD)], policy(rule))
    cell = only(checks, "cell")
    good = [rec(f"g{k}", "correct") for k in range(20)]
    bad = [rec(f"b{k}", "wrong") for k in range(20)]
    assert cell.min_n == 50
    v = evaluate(cell, good)
    assert v.status is Status.PASS and v.decided_by == "confidence bound"
    v = evaluate(cell, bad)
    assert v.status is Status.FAIL and v.decided_by == "confidence bound" and v.worst
    # A thin, non-decisive sample stays undecided under either rule (point needs min_n)
    # and says how many items would decide.
    thin = [rec("t0", "correct"), rec("t1", "wrong"), rec("t2", "correct")]
    v = evaluate(cell, thin)
    assert v.status is Status.UNDECIDED and v.needed_n and v.needed_n > 3
    assert "would decide" in v.message


def test_point_rule_decides_on_the_estimate_from_min_n_and_says_it_has_no_guarantee(rec):
    checks = build_checks([("Chest", "X-Ray", DD)], policy("point", defaults={"rule": "point", "min_n": 10}))
    cell = only(checks, "cell")
    records = [rec(f"i{k}", "correct" if k < 6 else "wrong") for k in range(10)]  # 0.6: not decisive
    v = evaluate(cell, records)
    assert v.status is Status.PASS and v.decided_by == "point estimate"
    assert "no statistical guarantee" in v.guarantee and "no statistical guarantee" in v.message
    lb = only(build_checks([("Chest", "X-Ray", DD)], policy()), "cell")
    assert evaluate(lb, records).status is Status.UNDECIDED


def pairs(rec, n, *, high, low, prefix="p"):
    """n images, each with one DD and one MR item; high/low: k -> bool."""
    out = []
    for k in range(n):
        img = f"{prefix}{k}.png"
        out.append(rec(f"{prefix}dd{k}", "correct" if high(k) else "wrong", task=DD, image=img))
        out.append(rec(f"{prefix}mr{k}", "correct" if low(k) else "wrong", task=MR, image=img))
    return out


def test_credibility_decides_below_min_pairs(rec):
    checks = build_checks([("Chest", "X-Ray", DD), ("Chest", "X-Ray", MR)], policy())
    cred = only(checks, "credibility")
    grounded = pairs(rec, 30, high=lambda k: k % 2 == 0, low=lambda k: k % 2 == 0)
    assert cred.min_n == 50 and evaluate(cred, grounded).status is Status.PASS
    # Independence: P(H|L) = P(H|not L). Deciding that grounding is below 0.1 takes many pairs.
    independent = pairs(rec, 400, high=lambda k: k % 2 == 0, low=lambda k: (k // 2) % 2 == 0)
    v = evaluate(cred, independent)
    assert v.status is Status.FAIL
    assert v.details["expected_D_independent"] == pytest.approx(100.0) and v.details["D"] == 100
    assert "shortcut probability" in v.message  # the paper's numbers are kept


def sim_records(rec, spec, images=900):
    """Records of a simulated model on `images` images with one DD and one MR item each."""
    cube = Cube(items=(), source="sim", fingerprint="sim", read_image=lambda key: b"")
    sim = SimulatedAdapter(parse_simulation(spec), cube, spec=f"simulate:{spec}")
    out = []
    for k in range(images):
        img = f"s{k}.png"
        for task, tag in ((DD, "dd"), (MR, "mr")):
            ok = sim.correct(f"{tag}{k}", img, task)
            out.append(rec(f"{tag}{k}", "correct" if ok else "wrong", task=task, image=img))
    return out


def test_credibility_does_not_reward_or_punish_accuracy(rec):
    checks = build_checks([("Chest", "X-Ray", DD), ("Chest", "X-Ray", MR)], policy())
    cred = only(checks, "credibility")
    weak = evaluate(cred, sim_records(rec, "DD=0.45,MR=0.7,icc=0.2,seed=3"))
    strong = evaluate(cred, sim_records(rec, "DD=0.85,MR=0.7,icc=0.2,seed=4"))
    assert weak.status == strong.status == Status.FAIL
    grounded = evaluate(cred, sim_records(rec, "DD=0.7,MR=0.7,icc=0.2,seed=5,grounded=true"))
    assert grounded.status is Status.PASS


def test_image_dependence_and_position_decide_below_min_n(rec):
    checks = build_checks([("Chest", "X-Ray", DD)], policy(), variants="standard,blind,shuffled:1")
    idc = only(checks, "image_dependence")
    std = [rec(f"i{k}", "correct") for k in range(30)]
    blind_wrong = [rec(f"i{k}", "wrong", variant="blind") for k in range(30)]
    blind_right = [rec(f"i{k}", "correct", variant="blind") for k in range(30)]
    assert idc.min_n == 50
    assert evaluate(idc, std + blind_wrong).status is Status.PASS
    assert evaluate(idc, std + blind_right).status is Status.FAIL
    pos = only(checks, "position")
    rot_right = [rec(f"i{k}", "correct", variant="shuffled", rotation=1) for k in range(30)]
    rot_wrong = [rec(f"i{k}", "wrong", variant="shuffled", rotation=1) for k in range(30)]
    assert evaluate(pos, std + rot_right).status is Status.PASS
    assert evaluate(pos, std + rot_wrong).status is Status.FAIL


def test_regression_is_non_inferiority(rec):
    checks = build_checks([("Chest", "X-Ray", DD)], policy(), has_baseline=True)
    reg = only(checks, "regression")
    base = [rec(f"i{k}", "correct") for k in range(60)]
    same = [rec(f"i{k}", "correct") for k in range(60)]
    worse = [rec(f"i{k}", "wrong" if k < 30 else "correct") for k in range(60)]
    assert evaluate(reg, same, baseline=base).status is Status.PASS  # upper bound of the drop within 0.05
    v = evaluate(reg, worse, baseline=base)
    assert v.status is Status.FAIL and v.worst and "non" not in v.guarantee
    few = [rec(f"i{k}", "correct" if k else "wrong") for k in range(4)]
    assert evaluate(reg, few, baseline=base[:4]).status is Status.UNDECIDED
    # Per-cell regression checks are optional by default: they never block.
    assert [c.required for c in checks if c.kind == "regression"] == [True, False]


def test_api_errors_error_and_keep_the_gate_undecided(rec):
    checks = build_checks([("Chest", "X-Ray", DD)], policy())
    records = [rec(f"i{k}", "correct") for k in range(20)] + [rec(f"e{k}", "error") for k in range(5)]
    result = evaluate_gate(checks, records)
    assert {v.status for v in result.verdicts} == {Status.ERROR}
    assert result.gate.status is GateStatus.UNDECIDED and result.gate.exit_code == 11


def test_a_failed_reported_only_check_makes_the_gate_not_qualified(rec):
    # Failure is evidence everywhere: `required: false` decides which checks must pass,
    # not which failures count.
    pol = policy(cells=[{"match": "*/*/*", "bound": 0.5, "required": False}])
    checks = build_checks([("Chest", "X-Ray", DD), ("Chest", "X-Ray", MR)], pol)
    records = [rec(f"d{k}", "correct", task=DD) for k in range(40)] + [
        rec(f"m{k}", "wrong" if k < 30 else "correct", task=MR) for k in range(40)]
    checks = [c for c in checks if c.kind != "credibility"]
    result = evaluate_gate(checks, records)
    by = result.by_id()
    assert by["Chest/X-Ray/Modality Recognition"].status is Status.FAIL
    assert not by["Chest/X-Ray/Modality Recognition"].required
    gate = result.gate
    assert gate.status is GateStatus.NOT_QUALIFIED and gate.exit_code == 10, gate
    assert gate.failed == ("Chest/X-Ray/Modality Recognition",)
    assert gate.failed_reported == ("Chest/X-Ray/Modality Recognition",)
    assert gate.required_counts["fail"] == 0 and gate.undecided == ()
    assert "Chest/X-Ray/Modality Recognition (reported-only)" in gate.text()


def test_an_undecided_reported_only_check_does_not_block(rec):
    pol = policy(cells=[{"match": "*/*/*", "bound": 0.5, "required": False}])
    checks = build_checks([("Chest", "X-Ray", DD), ("Chest", "X-Ray", MR)], pol)
    records = [rec(f"d{k}", "correct", task=DD) for k in range(40)] + [
        rec(f"m{k}", "wrong" if k < 2 else "correct", task=MR) for k in range(3)]
    checks = [c for c in checks if c.kind != "credibility"]
    result = evaluate_gate(checks, records)
    assert result.by_id()["Chest/X-Ray/Modality Recognition"].status is Status.UNDECIDED
    assert result.gate.status is GateStatus.QUALIFIED, result.gate


def test_holm_adjusts_fail_claims_over_the_family():
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_adjust([]) == []


def test_verdict_to_dict_is_structured(rec):
    cell = only(build_checks([("Chest", "X-Ray", DD)], policy()), "cell")
    d = evaluate(cell, [rec(f"b{k}", "wrong") for k in range(20)]).to_dict()
    assert d["status"] == "fail" and d["required"] is True and d["method"]
    w = d["worst"][0]
    assert {"id", "expected", "given", "question"} <= set(w) and w["expected"] == "A" and w["given"] == "B"


PARTS3, MODS3, TASKS3 = ("Chest", "Brain", "Heart"), ("X-Ray", "CT", "MRI"), (DD, MR, "Organ Recognition")


VARIANTS3 = ("standard", "blind", "shuffled")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PARTS3), st.sampled_from(MODS3), st.sampled_from(TASKS3),
                          st.sampled_from(VARIANTS3)), max_size=40),
       st.lists(st.tuples(*(st.sampled_from((None, *axis)) for axis in (PARTS3, MODS3, TASKS3)),
                          st.sampled_from((None, ("standard",), ("standard", "blind"), ("shuffled", "standard")))),
                min_size=1, max_size=6))
def test_the_family_selects_each_checks_records_as_the_check_does(rec, scopes, wanted):
    """evaluate_gate groups the records by scope and variant once (evidence.ByScope): every check
    gets exactly the records `Check.selects` of the variants its kind reads, in the run's order,
    whatever scopes and variants are present."""
    from dataclasses import replace

    from medrcube.gate.evidence import ByScope

    records = [rec(f"i{k}", part=p, modality=m, task=t, variant=v) for k, (p, m, t, v) in enumerate(scopes)]
    base = build_checks([("Chest", "X-Ray", DD)], policy())[0]
    grouped = ByScope(records)
    for part, modality, task, variants in wanted:
        check = replace(base, part=part, modality=modality, task=task)
        expected = [r for r in records if check.selects(r) and (variants is None or r.variant in variants)]
        assert grouped.select(check, variants) == expected
        assert grouped.select(check, variants) == expected  # from its memo too


