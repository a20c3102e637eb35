"""The paper-scale Heart/US cases run on the real gate and are never QUALIFIED (a few reps)."""

from __future__ import annotations

import numpy as np

from benchmarks import heart_us
from benchmarks.paper_oc import ROOT, paper_cube


def test_a_zero_on_cardiac_ultrasound_is_not_qualified_and_the_failed_cell_is_named():
    r = heart_us.run_rates(paper_cube(), str(ROOT / "thresholds.yaml"), heart_us.zero_on("Disease Diagnosis"), 2,
                           np.random.default_rng(0))
    assert r.not_qualified == 1.0 and r.n == 7626
    assert ("Heart/US/Disease Diagnosis", 2) in r.failed


def test_a_scoped_run_asks_only_the_scope_and_a_third_wrong_is_not_qualified(tmp_path):
    text = (ROOT / "thresholds.yaml").read_text(encoding="utf-8")
    scoped = tmp_path / "thresholds.yaml"
    scoped.write_text(text.replace("\nscope: {}", "\nscope: {parts: [Heart], modalities: [US]}"), encoding="utf-8")
    items = paper_cube()
    r = heart_us.run_rates(items, str(scoped), heart_us.third_wrong("concentrated"), 2, np.random.default_rng(1))
    assert r.n == sum(heart_us.heart_us(it) for it in items) and r.qualified == 0.0
    assert r.not_qualified == 1.0
