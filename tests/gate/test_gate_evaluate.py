"""evaluate(): pass, fail, skip and error for every kind of check, with their messages."""

from __future__ import annotations

import pytest

from medrcube.gate.checks import build_checks
from medrcube.gate.evaluate import evaluate
from medrcube.gate.thresholds import policy_from_dict
from medrcube.gate.verdict import Status
from medrcube.metrics.accuracy import wilson_interval
from medrcube.metrics.power import required_n

DD = ("Chest", "X-Ray", "Disease Diagnosis")
MR = ("Chest", "X-Ray", "Modality Recognition")
SG = ("Brain", "MRI", "Severity Grading")
CELLS = [DD, MR, SG, ("Brain", "MRI", "Organ Recognition")]


def checks(**sections):
    doc = {
        "version": 1,
        "defaults": {"rule": "point", "min_n": 10, "max_error_rate": 0.05},
        "overall": {"bound": 0.5},
        "slices": {"part": {"default": 0.5}},
        "cells": [{"match": "*/*/*", "bound": 0.6}],
        "credibility": {"min_rationality": 0.7, "max_shortcut_prob": 0.6, "min_pairs": 10},
        "image_dependence": {"min_drop": 0.1},
        "position_robustness": {"max_gap": 0.15, "min_circular_accuracy": 0.3},
        "regression": {"alpha": 0.05, "margin": 0.02},
    }
    for k, v in sections.items():
        doc[k] = {**doc[k], **v} if isinstance(doc.get(k), dict) and isinstance(v, dict) else v
    policy = policy_from_dict(doc)
    return {c.id: c for c in build_checks(CELLS, policy, variants="standard,blind,shuffled:2", has_baseline=True)}


def cell_records(rec, outcomes, cell=DD, prefix="i", **kw):
    return [
        rec(f"{prefix}{i}", o, part=cell[0], modality=cell[1], task=cell[2], **kw) for i, o in enumerate(outcomes)
    ]


# --------------------------------------------------------------------------- accuracy


def test_cell_point_pass(rec):
    v = evaluate(checks()["Chest/X-Ray/Disease Diagnosis"], cell_records(rec, ["correct"] * 7 + ["wrong"] * 3))
    assert v.status is Status.PASS
    assert (v.observed, v.n, v.bound, v.error_rate) == (0.7, 10, 0.6, 0.0)
    assert v.interval == pytest.approx(wilson_interval(7, 10))
    assert v.chance == pytest.approx(0.25)
    assert "accuracy 0.700 >= bound 0.600 (point rule) [bound set at `cells[0]`]" in v.message
    assert v.worst == ()


def test_cell_point_fail_message_is_actionable(rec):
    records = cell_records(rec, ["correct"] * 4 + ["wrong"] * 4 + ["unparsed", "refused"])
    v = evaluate(checks()["Chest/X-Ray/Disease Diagnosis"], records)
    assert v.status is Status.FAIL
    assert v.observed == pytest.approx(0.4) and v.n == 10
    lo, hi = wilson_interval(4, 10)
    for text in ("accuracy 0.400 < bound 0.600", f"95% CI [{lo:.3f}, {hi:.3f}]", "= 4/10", "chance level 0.250",
                 "4 wrong, 1 unparsed, 1 refused", "worst items:"):
        assert text in v.message, v.message
    assert len(v.worst) == 5
    assert [w.outcome for w in v.worst] == ["wrong"] * 4 + ["unparsed"]  # clear mistakes first
    w = v.worst[0]
    assert (w.item_id, w.expected, w.extracted, w.cell) == ("i4", "A", "B", "Chest/X-Ray/Disease Diagnosis")
    assert w.response == "answer for i4"
    assert "i4 (Chest/X-Ray/Disease Diagnosis): expected A, answered B" in v.message
    assert v.worst[4].extracted is None and "expected A, unparsed" in v.message


def test_lower_bound_fails_when_the_evidence_is_thin(rec):
    c = checks(cells=[{"match": "*/*/*", "bound": 0.6, "rule": "lower_bound"}])["Chest/X-Ray/Disease Diagnosis"]
    v = evaluate(c, cell_records(rec, ["correct"] * 7 + ["wrong"] * 3))
    assert v.status is Status.FAIL
    assert f"lower 95% bound {wilson_interval(7, 10)[0]:.3f} < bound 0.600" in v.message
    assert "the estimate clears the bound but the evidence does not" in v.message
    assert f"needs n>={required_n('lower_bound', 0.6, 0.7, stable=True)} for 80% power" in v.message


def test_lower_bound_uses_the_cluster_aware_interval(rec):
    c = checks(overall={"bound": 0.6, "rule": "lower_bound", "min_n": 10})["overall"]
    # 30 items, 24 right. Independent: Wilson(24, 30) lower bound .627 passes.
    independent = cell_records(rec, ["correct"] * 24 + ["wrong"] * 6)
    assert evaluate(c, independent).status is Status.PASS
    # The same answers on 10 images of 3 items, all-or-none per image: the evidence is 10 images.
    clustered = [
        rec(f"i{i}", "correct" if i < 24 else "wrong", part=DD[0], modality=DD[1], task=DD[2], image=f"img{i // 3}")
        for i in range(30)
    ]
    v = evaluate(c, clustered)
    assert v.status is Status.FAIL
    assert v.details["n_eff"] == pytest.approx(10.0)
    assert v.interval[0] == pytest.approx(wilson_interval(8, 10)[0])
    assert "clustered by image: 10 images, design effect 3.00" in v.message


def test_small_n_skips_with_the_items_needed(rec):
    v = evaluate(checks()["Chest/X-Ray/Disease Diagnosis"], cell_records(rec, ["correct"] * 4 + ["wrong"]))
    assert v.status is Status.SKIP
    assert v.message.startswith("n=5 < min_n=10 graded items: insufficient evidence; observed 4/5 = 0.800")
    need = required_n("point", .6, .8, stable=True)
    assert need < 10  # so the policy's min_n is the number a user must reach
    assert (f"at a true accuracy of 0.80 a point-estimate check against 0.60 needs n>=10 "
            f"(the policy's min_n; 80% power from n>={need})") in v.message
    empty = evaluate(checks()["Chest/X-Ray/Disease Diagnosis"], cell_records(rec, ["unavailable"] * 3))
    assert empty.status is Status.SKIP and empty.observed is None
    assert "n=0 < min_n=10" in empty.message and "3 unavailable" in empty.message


def test_api_errors_error_the_check_instead_of_failing_it(rec):
    records = cell_records(rec, ["correct"] * 10 + ["error"] * 2)
    v = evaluate(checks()["Chest/X-Ray/Disease Diagnosis"], records)
    assert v.status is Status.ERROR
    assert v.error_rate == pytest.approx(2 / 12)
    assert "2 errors of 12 requests (17% > max_error_rate 5%): the evidence is incomplete; not graded" in v.message
    assert "boom x2" in v.message
    # Below the allowed rate: errors are excluded from n, never counted as wrong.
    few = cell_records(rec, ["correct"] * 30 + ["error"])
    ok = evaluate(checks(cells=[{"match": "*/*/*", "bound": 0.6, "max_error_rate": 0.05}])[
        "Chest/X-Ray/Disease Diagnosis"], few)
    assert ok.status is Status.PASS and ok.n == 30 and ok.observed == 1.0


def test_scopes_select_their_records(rec):
    records = (
        cell_records(rec, ["correct"] * 10, cell=DD, prefix="dd")
        + cell_records(rec, ["wrong"] * 10, cell=SG, prefix="sg")
        + cell_records(rec, ["wrong"] * 10, cell=DD, prefix="dd", variant="blind")  # ignored by accuracy
    )
    cs = checks()
    assert evaluate(cs["slice/part/Chest"], records).observed == 1.0
    assert evaluate(cs["slice/part/Brain"], records).observed == 0.0
    overall = evaluate(cs["overall"], records)
    assert (overall.observed, overall.n) == (0.5, 20)
    # Worst items of a slice come from its weakest cells, one cell at a time.
    mixed = cell_records(rec, ["wrong"] * 6, cell=SG, prefix="sg") + cell_records(
        rec, ["wrong"] * 3 + ["correct"] * 7, cell=("Brain", "MRI", "Organ Recognition"), prefix="or")
    worst = evaluate(cs["slice/part/Brain"], mixed).worst
    assert [w.item_id for w in worst] == ["sg0", "or0", "sg1", "or1", "sg2"]


def test_chance_level_is_the_mean_of_one_over_options(rec):
    records = cell_records(rec, ["wrong"] * 5, n_options=2) + cell_records(rec, ["wrong"] * 5, prefix="j", n_options=5)
    v = evaluate(checks()["Chest/X-Ray/Disease Diagnosis"], records)
    assert v.chance == pytest.approx((5 * 0.5 + 5 * 0.2) / 10)


# --------------------------------------------------------------------------- credibility


def chain(rec, groups, part="Chest", modality="X-Ray", low_task="Modality Recognition", **kw):
    """One image per pair; groups is a string over A/B/C/D."""
    out = []
    for i, g in enumerate(groups):
        low_ok, high_ok = {"A": (1, 1), "B": (1, 0), "C": (0, 0), "D": (0, 1)}[g]
        img = f"{part}-img{i}"
        out.append(rec(f"{part}-h{i}", "correct" if high_ok else "wrong", part=part, modality=modality,
                       task="Disease Diagnosis", image=img, **kw))
        out.append(rec(f"{part}-l{i}", "correct" if low_ok else "wrong", part=part, modality=modality,
                       task=low_task, image=img, **kw))
    return out


def test_credibility_pass(rec):
    v = evaluate(checks()["credibility/overall"], chain(rec, "A" * 9 + "B" + "C" * 3 + "D"))
    # rationality = 1 - 1/10 = .9 >= .7; shortcut = 1/4 = .25 <= .6
    assert v.status is Status.PASS, v.message
    assert v.observed == pytest.approx(0.9) and v.n == 14
    assert v.details["shortcut_prob"] == pytest.approx(0.25)
    assert "rationality 0.900 >= 0.700; shortcut probability 0.250 <= 0.600" in v.message


def test_credibility_fail_lists_the_missed_perception(rec):
    v = evaluate(checks()["credibility/part/Chest"], chain(rec, "A" * 5 + "C" * 2 + "D" * 5))
    assert v.status is Status.FAIL
    assert v.observed == pytest.approx(0.5)
    assert "rationality 0.500 < 0.700; shortcut probability 0.714 > 0.600" in v.message
    assert "A=5 B=0 C=2 D=5 on 12 images" in v.message
    assert len(v.worst) == 5 and all(w.item_id.startswith("Chest-l") for w in v.worst)
    assert "yet Disease Diagnosis item Chest-h7 on the same image was right" in v.message


def test_credibility_skip_error_and_undefined(rec):
    c = checks()["credibility/overall"]
    few = evaluate(c, chain(rec, "AAD"))
    assert few.status is Status.SKIP and few.message.startswith("n=3 < min_n=10 pairs")
    # Only B pairs: rationality and shortcut probability are both undefined.
    b_only = evaluate(c, chain(rec, "B" * 12))
    assert b_only.status is Status.SKIP and "nothing to decide" in b_only.message and b_only.observed is None
    errs = chain(rec, "A" * 12)
    errs += [rec("e1", "error", task="Modality Recognition", image="Chest-img0"),
             rec("e2", "error", task="Modality Recognition", image="Chest-img1")]
    err = evaluate(c, errs)
    assert err.status is Status.ERROR and "2 errors of 26 requests" in err.message


# --------------------------------------------------------------------------- image dependence


def with_blind(rec, standard, blind):
    out = []
    for i, (s, b) in enumerate(zip(standard, blind, strict=True)):
        out.append(rec(f"i{i}", s, part=DD[0], modality=DD[1], task=DD[2]))
        out.append(rec(f"i{i}", b, part=DD[0], modality=DD[1], task=DD[2], variant="blind"))
    return out


def test_image_dependence_pass_fail_skip_error(rec):
    c = checks()["image-dependence/overall"]
    good = evaluate(c, with_blind(rec, ["correct"] * 16 + ["wrong"] * 4, ["correct"] * 4 + ["wrong"] * 16))
    assert good.status is Status.PASS and good.observed == pytest.approx(0.6)
    assert "drop 0.600 >= 0.100" in good.message

    same = ["correct"] * 10 + ["wrong"] * 10
    bad = evaluate(c, with_blind(rec, same, same))
    assert bad.status is Status.FAIL and bad.observed == 0.0
    assert "standard 0.500, blind 0.500 on 20 shared items" in bad.message
    assert "the answers barely depend on the image" in bad.message
    assert [w.note for w in bad.worst] == ["answered right without the image"] * 5
    assert all(w.variant == "blind" for w in bad.worst)

    assert evaluate(c, with_blind(rec, same[:6], same[:6])).status is Status.SKIP

    errors = with_blind(rec, same, ["error"] * 5 + same[5:])
    err = evaluate(c, errors)
    assert err.status is Status.ERROR and "5 errors of 40 requests" in err.message

    strict = checks(image_dependence={"min_drop": 0.1, "rule": "lower_bound"})["image-dependence/overall"]
    thin = evaluate(strict, with_blind(rec, ["correct"] * 7 + ["wrong"] * 3 + ["wrong"] * 10,
                                       ["correct"] * 4 + ["wrong"] * 16))
    assert thin.observed == pytest.approx(0.15) and thin.status is Status.FAIL  # lower bound < .1
    assert "lower 95% bound of the drop" in thin.message


# --------------------------------------------------------------------------- position robustness


def with_rotations(rec, standard, rotated):
    out = []
    for i, (s, rots) in enumerate(zip(standard, rotated, strict=True)):
        out.append(rec(f"i{i}", s, part=DD[0], modality=DD[1], task=DD[2]))
        for r, o in enumerate(rots, start=1):
            out.append(rec(f"i{i}", o, part=DD[0], modality=DD[1], task=DD[2], variant="shuffled", rotation=r))
    return out


def test_position_pass_fail_skip_error(rec):
    c = checks()["position/overall"]
    std = ["correct"] * 15 + ["wrong"] * 5
    stable = evaluate(c, with_rotations(rec, std, [(o, o) for o in std]))
    assert stable.status is Status.PASS and stable.observed == 0.75
    assert "gap to standard accuracy 0.000 <= 0.150" in stable.message

    flaky = [("correct", "wrong" if i % 2 else "correct") if o == "correct" else ("wrong", "wrong")
             for i, o in enumerate(std)]
    v = evaluate(c, with_rotations(rec, std, flaky))
    assert v.status is Status.FAIL
    assert v.observed == pytest.approx(8 / 20) and v.details["gap"] == pytest.approx(7 / 20)
    assert "gap to standard accuracy 0.350 > 0.150" in v.message
    assert v.worst[0].variant == "shuffled" and v.worst[0].rotation == 2
    assert "wrong with options rotated by 2" in v.message
    assert v.chance == pytest.approx(0.25**3)

    assert evaluate(c, with_rotations(rec, std[:5], [(o, o) for o in std[:5]])).status is Status.SKIP
    broken = with_rotations(rec, std, [("error", o) for o in std])
    err = evaluate(c, broken)
    assert err.status is Status.ERROR and "20 errors of 60 requests" in err.message


# --------------------------------------------------------------------------- regression


def paired(rec, cand, base, cell=DD):
    c = cell_records(rec, cand, cell=cell)
    b = cell_records(rec, base, cell=cell)
    return c, b


def test_regression_fail_pass_skip_error(rec):
    cs = checks()
    c = cs["regression/Chest/X-Ray/Disease Diagnosis"]
    cand, base = paired(rec, ["correct"] * 10 + ["wrong"] * 20, ["correct"] * 25 + ["wrong"] * 5)
    v = evaluate(c, cand, base)
    assert v.status is Status.FAIL
    assert v.observed == pytest.approx(0.5) and v.bound == 0.02 and v.n == 30
    assert "significantly worse (p=" in v.message and "exceeds the margin 0.020" in v.message
    assert "lost 15 items the baseline got right, gained 0" in v.message
    assert v.details["mcnemar"]["p_first_worse"] == pytest.approx(0.5**15)
    assert all(w.note == "the baseline answered it right" for w in v.worst)

    # Not significant: 3 lost, 1 gained.
    cand, base = paired(rec, ["wrong"] * 3 + ["correct"] * 27, ["correct"] * 29 + ["wrong"])
    ok = evaluate(c, cand, base)
    assert ok.status is Status.PASS and "not significantly worse" in ok.message

    # Significant but within the margin: 20 lost of 2000.
    cand, base = paired(rec, ["wrong"] * 20 + ["correct"] * 1980, ["correct"] * 2000)
    small = evaluate(cs["regression/overall"], cand, base)
    assert small.status is Status.PASS and "drop within the margin 0.020" in small.message
    assert small.details["mcnemar"]["p_first_worse"] < 0.05

    cand, base = paired(rec, ["correct"] * 5, ["correct"] * 5)
    assert evaluate(c, cand, base).status is Status.SKIP

    cand, base = paired(rec, ["error"] * 5 + ["correct"] * 25, ["correct"] * 30)
    assert evaluate(c, cand, base).status is Status.ERROR

    # Baseline errors drop pairs: counted, never graded.
    cand, base = paired(rec, ["correct"] * 30, ["error"] * 5 + ["correct"] * 25)
    dropped = evaluate(c, cand, base)
    assert dropped.n == 25 and dropped.details["counts"]["dropped"] == 5 and dropped.details["baseline_errors"] == 5

    missing = evaluate(c, cand, None)
    assert missing.status is Status.ERROR and "--baseline" in missing.message


def test_duplicate_records_error_instead_of_deciding(rec):
    c = checks()["regression/overall"]
    cand = cell_records(rec, ["correct"] * 12) + [rec("i0", "wrong", part=DD[0], modality=DD[1], task=DD[2])]
    v = evaluate(c, cand, cell_records(rec, ["correct"] * 12))
    assert v.status is Status.ERROR and "cannot evaluate: item 'i0' has two 'standard' records" in v.message


def test_verdict_serialises(rec):
    v = evaluate(checks()["Chest/X-Ray/Disease Diagnosis"], cell_records(rec, ["wrong"] * 10))
    d = v.to_dict()
    assert d["status"] == "fail" and d["check_id"] == "Chest/X-Ray/Disease Diagnosis"
    assert d["worst"][0]["item_id"] == "i0" and isinstance(d["interval"], list)


def test_above_chance_raises_the_bound_on_few_option_questions(rec):
    cs = checks(cells=[{"match": "*/*/*", "bound": 0.4, "above_chance": 0.1}])
    c = cs["Chest/X-Ray/Disease Diagnosis"]
    assert c.above_chance == 0.1
    # Yes/no questions answered 11 of 20 right: above the written .4, not above chance .5 + .1.
    binary = cell_records(rec, ["correct"] * 11 + ["wrong"] * 9, n_options=2)
    v = evaluate(c, binary)
    assert v.status is Status.FAIL and v.bound == pytest.approx(0.6)
    assert "bound 0.600 (raised from 0.400 to chance level 0.500 + above_chance 0.10" in v.message
    assert v.details["policy_bound"] == 0.4
    # On 5-option questions chance + .1 = .3 < .4: the written bound stands.
    five = cell_records(rec, ["correct"] * 11 + ["wrong"] * 9, n_options=5)
    ok = evaluate(c, five)
    assert ok.status is Status.PASS and ok.bound == 0.4 and "raised" not in ok.message


def test_verdicts_do_not_depend_on_record_order(rec):
    """xdist workers may deliver records in any order: verdicts must be identical."""
    import random

    rng = random.Random(7)
    records = []
    for i in range(120):
        cell = CELLS[i % 4]
        for variant, rotation in (("standard", 0), ("blind", 0), ("shuffled", 1), ("shuffled", 2)):
            records.append(rec(f"q{i}", rng.choice(["correct", "wrong", "unparsed"]), part=cell[0],
                               modality=cell[1], task=cell[2], image=f"img{i // 3}", variant=variant,
                               rotation=rotation, n_options=rng.choice([2, 3, 4, 5])))
    baseline = [rec(r.item_id, "correct", part=r.part, modality=r.modality, task=r.task, image=r.image)
                for r in records if r.variant == "standard"]
    shuffled = records[:]
    rng.shuffle(shuffled)
    for check in checks().values():
        assert evaluate(check, records, baseline).to_dict() == evaluate(check, shuffled, baseline[::-1]).to_dict()
