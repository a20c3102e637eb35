"""Per-finding metrics (issue 16) on a fixed table computed by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from medrcube.metrics.accuracy import wilson_interval
from medrcube.metrics.findings import (
    NORMAL,
    cell_findings,
    findings_by_cell,
    kish_proportion,
    label_of,
    site_predictive_values,
)


def test_labels() -> None:
    assert label_of(" No  abnormality. ") == NORMAL == label_of("Normal") == label_of("no finding")
    assert label_of("Pleural  Effusion") == "pleural effusion"


def test_confusion_sensitivity_specificity_and_predictive_values(rec, pneumothorax_table) -> None:
    cell = cell_findings(pneumothorax_table, ("Chest", "X-Ray", "Disease Diagnosis"))
    assert cell.n == 40
    assert cell.confusion == {"normal": {"normal": 24, "pneumothorax": 4},
                              "pneumothorax": {"(none)": 1, "normal": 3, "pneumothorax": 8}}
    ptx = cell.findings["pneumothorax"]
    assert (ptx.tp, ptx.fn, ptx.fp, ptx.tn) == (8, 4, 4, 24)  # the unparsed answer is a miss
    assert ptx.sensitivity.value == pytest.approx(8 / 12)
    assert ptx.specificity.value == pytest.approx(24 / 28)
    assert ptx.ppv.value == pytest.approx(8 / 12)
    assert ptx.npv.value == pytest.approx(24 / 28)
    assert ptx.prevalence == pytest.approx(12 / 40)
    normal = cell.findings[NORMAL]
    assert (normal.tp, normal.fn, normal.fp, normal.tn) == (24, 4, 3, 9)
    assert cell.balanced_accuracy == pytest.approx((8 / 12 + 24 / 28) / 2)
    # One item per image: no clustering, the interval is plain Wilson.
    assert (ptx.sensitivity.lo, ptx.sensitivity.hi) == pytest.approx(wilson_interval(8, 12))


def test_site_prevalence_matches_hand_computed_values(rec, pneumothorax_table) -> None:
    cell = cell_findings(pneumothorax_table, prevalence={"Pneumothorax": 0.05})
    site = cell.findings["pneumothorax"].site
    assert site is not None
    se, sp, pi = 8 / 12, 24 / 28, 0.05
    # By hand: PPV = 0.0333.. / (0.0333.. + 0.1357..) = 0.19718; NPV = 0.81428.. / (0.81428.. + 0.01666..) = 0.97994
    assert site["ppv"] == pytest.approx(se * pi / (se * pi + (1 - sp) * (1 - pi)))
    assert site["ppv"] == pytest.approx(0.197183, abs=1e-6)
    assert site["npv"] == pytest.approx(sp * (1 - pi) / (sp * (1 - pi) + (1 - se) * pi))
    assert site["npv"] == pytest.approx(0.979943, abs=1e-6)
    lo, hi = site["ppv_ci95"]
    assert lo < site["ppv"] < hi
    with pytest.raises(ValueError, match="prevalence"):
        site_predictive_values(cell.findings["pneumothorax"].sensitivity, cell.findings["pneumothorax"].specificity, 1.0)


def test_findings_by_cell_only_diagnosis_tasks_and_per_cell_prevalence(rec, pneumothorax_table) -> None:
    other = [replace(rec("m1", task="Modality Recognition"), options=("CT", "MRI"))]
    cells = findings_by_cell(pneumothorax_table + other, {"Chest|X-Ray|Disease Diagnosis": {"pneumothorax": 0.1}})
    assert list(cells) == [("Chest", "X-Ray", "Disease Diagnosis")]
    assert cells[("Chest", "X-Ray", "Disease Diagnosis")].findings["pneumothorax"].site["prevalence"] == 0.1


def test_records_without_option_texts_are_counted_not_guessed(rec, pneumothorax_table) -> None:
    cell = cell_findings([rec("x1"), *pneumothorax_table])
    assert cell.skipped == 1 and cell.n == 40


def test_kish_design_effect_and_the_image_count_fallback() -> None:
    # Perfectly correlated clusters of sizes 1, 2, 3, 4 (rho = 1): deff = sum m^2 / n = 30 / 10.
    clusters = [(1, 1), (0, 2), (3, 3), (0, 4), (2, 2), (0, 3)]
    p = kish_proportion(clusters)
    assert p.icc == pytest.approx(1.0)
    assert p.deff == pytest.approx(sum(m * m for _, m in clusters) / 15)
    # Every item agrees: rho not estimable, so n_eff = the number of images (deff = n / K).
    same = kish_proportion([(3, 3), (2, 2), (1, 1)])
    assert same.icc is None and same.deff == pytest.approx(6 / 3)
    assert (same.lo, same.hi) == pytest.approx(wilson_interval(3, 3))
