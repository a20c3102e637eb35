"""Calibration (issue 16): ECE and the debiased calibration error by hand, and on the
simulated scorer with known calibration (medrcube.testing.calibrated)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from medrcube.metrics.calibration import (
    by_level,
    calibration,
    calibration_summary,
    from_arrays,
    reliability,
    scored,
)
from medrcube.records import Outcome
from medrcube.testing.calibrated import CALIBRATED, OVERCONFIDENT, SimulatedScorer


def test_ece_and_ce_by_hand() -> None:
    s = from_arrays([0.8, 0.2, 0.6, 0.4], [1, 0, 1, 1])
    c = calibration(s, n_bins=2, n_boot=50)
    # bins {0.2, 0.4}: acc 0.5, conf 0.3; {0.6, 0.8}: acc 1, conf 0.7 -> ECE = (0.2 + 0.3) / 2
    assert c.ece == pytest.approx(0.25)
    # ce^2 = 0.5 (0.2^2 - 0.25 / 1) + 0.5 (0.3^2 - 0) = -0.06 -> 0
    assert c.ce == 0.0
    assert [b["n"] for b in c.bins] == [2, 2]
    assert [b["accuracy"] for b in reliability(s, 2)] == [0.5, 1.0]
    assert c.mean_confidence == pytest.approx(0.5) and c.accuracy == pytest.approx(0.75)


def test_records_without_confidence_are_missing_and_order_does_not_matter(rec) -> None:
    recs = CALIBRATED.records(200, seed=1)
    recs.append(rec("noconf"))
    recs.append(replace(rec("err", Outcome.ERROR), confidence={"source": "logits", "value": 0.9}))
    a = calibration(scored(recs), n_boot=100)
    b = calibration(scored(list(reversed(recs))), n_boot=100)
    assert a.n == 200 and a.missing == 1
    assert a == b


def test_recovers_the_truth() -> None:
    for sim in (CALIBRATED, OVERCONFIDENT):
        ces = [calibration(scored(sim.records(800, seed)), n_boot=150, seed=seed).ce for seed in range(8)]
        assert np.mean(ces) == pytest.approx(sim.true_ece, abs=0.03)


def test_by_level_and_summary(rec) -> None:
    recs = SimulatedScorer(gap=0.1).records(100, 0) + SimulatedScorer().records(100, 1, task="Modality Recognition")
    levels = by_level(recs, n_boot=50)
    assert set(levels) == {"all", "low", "high"} and levels["all"].n == 200
    doc = calibration_summary(recs)
    assert doc is not None and doc["sources"] == ["logits"] and "bins" in doc["high"]
    assert calibration_summary([rec("a")]) is None
