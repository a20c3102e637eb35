"""The paired drop (clustered by image) and the agreement: estimates and intervals (the
gate decides on them: tests/gate/test_gate_clinical_decisions.py)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from medrcube.metrics.comparison import newcombe_paired_interval
from medrcube.metrics.perturbation import (
    clustered_paired_interval,
    difference_deff,
    perturbation_robustness,
    perturbation_variants,
    robustness_table,
    tango_interval,
)
from medrcube.records import GradedRecord, is_perturbation

Rec = Callable[..., GradedRecord]


def test_is_perturbation() -> None:
    assert is_perturbation("jpeg:30") and is_perturbation("flip") and is_perturbation("noise:0.03@7")
    assert not any(is_perturbation(v) for v in ("standard", "blind", "shuffled"))


def test_one_item_per_image_is_tangos_score_interval() -> None:
    pairs = [(f"i{i}", i % 3 != 0, i % 4 != 0) for i in range(60)]
    d = clustered_paired_interval(pairs)
    assert d.deff == 1.0
    assert (d.lo, d.hi) == pytest.approx(tango_interval(d.b, d.c, d.n))
    # at each bound the score statistic is +-1.96: recompute it from Tango's formula
    for delta, sign in ((d.lo, 1), (d.hi, -1)):
        w = -d.b - d.c + delta * (2 * d.n - d.b + d.c)
        q = (-w + math.sqrt(w * w + 8 * d.n * d.c * delta * (1 - delta))) / (4 * d.n)
        z = (d.b - d.c - d.n * delta) / math.sqrt(d.n * (2 * q + delta * (1 - delta)))
        assert z == pytest.approx(sign * 1.959964, abs=1e-6)
    # close to Newcombe's hybrid interval where discordance is not rare
    assert (d.lo, d.hi) == pytest.approx(newcombe_paired_interval(d.a, d.b, d.c, d.d), abs=0.02)


def test_the_design_effect_divides_the_score() -> None:
    wide, narrow = tango_interval(30, 5, 200, deff=4.0), tango_interval(30, 5, 200)
    assert wide[0] < narrow[0] < 25 / 200 < narrow[1] < wide[1]
    assert tango_interval(0, 0, 0) == (-1.0, 1.0)
    assert tango_interval(20, 0, 20)[1] == 1.0 and tango_interval(0, 20, 20)[0] == -1.0


def test_items_sharing_an_image_widen_the_interval() -> None:
    # 10 images x 6 items; on half the images every item is lost under the perturbation
    pairs = [(f"img{g}", True, g % 2 == 0) for g in range(10) for _ in range(6)]
    clustered = clustered_paired_interval(pairs)
    alone = clustered_paired_interval([(f"{k}-{i}", s, p) for i, (k, s, p) in enumerate(pairs)])
    assert clustered.drop == alone.drop == 0.5
    assert clustered.deff > 3
    assert clustered.hi - clustered.lo > alone.hi - alone.lo


def test_no_discordant_pair_still_has_width() -> None:
    d = clustered_paired_interval([(f"i{i}", True, True) for i in range(20)])
    assert d.drop == 0 and d.lo < 0 < d.hi
    assert difference_deff([("a", 0), ("a", 0)]) == 1.0


def test_the_interval_of_the_drop_tells_a_margin_apart_only_with_evidence() -> None:
    sure_fine = clustered_paired_interval([(f"i{i}", True, True) for i in range(400)])
    assert sure_fine.hi <= 0.05  # wholly within a 5-point margin
    sure_bad = clustered_paired_interval([(f"i{i}", True, i % 2 == 0) for i in range(400)])
    assert sure_bad.lo > 0.05  # wholly beyond it
    small = clustered_paired_interval([(f"i{i}", True, True) for i in range(10)])
    assert small.lo < 0.05 < small.hi  # 10 unchanged answers say neither


def test_agreement_and_scopes(rec: Rec) -> None:
    records = []
    for i in range(40):
        image, task = f"img{i // 2}", ("Organ Recognition" if i < 20 else "Modality Recognition")
        records.append(rec(f"x{i}", "correct", image=image, task=task))
        # the perturbed answer agrees on the first 30 items, then names another option
        records.append(rec(f"x{i}", "correct" if i < 30 else "wrong", image=image, task=task, variant="jpeg:30"))
    records.append(rec("x0", "error", variant="noise:0.1", image="img0"))
    assert perturbation_variants(records) == ["jpeg:30", "noise:0.1"]
    r = perturbation_robustness(records, "jpeg:30")
    assert (r.drop.n, r.drop.b, r.agreement.k, r.drop.clusters) == (40, 10, 30, 20)
    assert r.drop.drop == pytest.approx(0.25)
    assert r.agreement.hi < 0.9  # 30/40 alike: below a 0.9 bound for sure
    by_task = {x.scope: x for x in robustness_table(records, by="task") if x.variant == "jpeg:30"}
    assert by_task["task=Organ Recognition"].drop.drop == 0
    assert by_task["task=Modality Recognition"].drop.drop == pytest.approx(0.5)
    cells = robustness_table(records, by="cell", variants=["jpeg:30"])
    assert {c.scope for c in cells} == {"Chest/X-Ray/Organ Recognition", "Chest/X-Ray/Modality Recognition"}
    noisy = perturbation_robustness(records, "noise:0.1")
    assert (noisy.errors, noisy.asked, noisy.drop.n) == (1, 1, 0)
    assert noisy.error_rate == 1.0  # all it asked failed: the gate makes that an error, not evidence
    assert r.agreement.lo >= 0.5
