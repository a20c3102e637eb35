"""The operating-characteristics scenario runs and reports what it claims (a few reps)."""

from __future__ import annotations

import numpy as np

from benchmarks import oc


def test_gate_rates_and_coverage_run_on_the_real_gate():
    r = oc.gate_rates(5, 1, np.full(len(oc.CELLS), 0.95), items=40)
    assert set(r) == {"QUALIFIED", "NOT QUALIFIED", "UNDECIDED", "cell_pass"}
    assert r["NOT QUALIFIED"] == 0.0 and r["cell_pass"] > 0.5  # far above every bound
    bad = oc.gate_rates(3, 2, np.full(len(oc.CELLS), 0.1), items=40)
    assert bad["NOT QUALIFIED"] == 1.0
    one, two = oc.coverage(50, 3, [4] * 20, 0.7, 0.3)
    assert 0.0 <= two <= one <= 1.0
