"""Fast versions of benchmarks.credibility_oc and benchmarks.paper_power (the figures of
RESULTS.md sections 25 and 28 come from the full runs): the harnesses run on the real gate and
separate a shortcut from a grounded model in a few runs."""

from __future__ import annotations

import numpy as np

from benchmarks import credibility_oc, paper_power
from benchmarks.paper_oc import ROOT, paper_cube
from medrcube.cube import load_cube
from medrcube.gate.checks import build_checks
from medrcube.gate.feasible import assess
from medrcube.gate.thresholds import load_policy


def test_credibility_harness_never_qualifies_a_shortcut_on_the_bundled_cube() -> None:
    items = list(load_cube(str(ROOT / "fixtures" / "mini")).items)
    rng = np.random.default_rng(7)
    short = credibility_oc.gate_rates(items, credibility_oc.model(0.95, 0.9, False), 3, rng)
    grounded = credibility_oc.gate_rates(items, credibility_oc.model(0.95, 0.95, True), 3, rng)
    assert short["reps"] == grounded["reps"] == 3
    assert short["qualified"] == 0.0 and short["overall_pass"] == 0.0
    assert grounded["overall_fail"] == 0.0


def test_paper_power_bounds_of_a_task_own_checks_are_at_most_those_of_every_check() -> None:
    items = paper_cube()
    policy = load_policy(str(ROOT / "thresholds.yaml"))
    checks = assess(build_checks(sorted({it.cell for it in items}), policy), items, policy)
    every, own = paper_power.task_bounds(items, checks), paper_power.task_bounds(items, checks, own=True)
    assert set(own) <= set(every) and all(own[t] <= every[t] for t in own)
    assert every["DD"] >= 0.5  # the overall bound holds every task's items


def test_the_odds_ratio_p_value_is_monotone_where_the_point_null_one_was_not() -> None:
    rows = credibility_oc.p_values(np.random.default_rng(3), 30)
    assert [r["images"] for r in rows] == [2, 3, 5, 10, 20, 30, 40]
    assert all(r["composite_turns"] == 0.0 and r["composite_worst"] <= 1e-12 for r in rows)
    assert rows[0]["point_turns"] > 0.0  # the defect the composite p-value removes, on 2 images
    assert all(r["moved_by"] >= 0.0 for r in rows)
