"""The subgroup benchmark runs on the real gate core and reports what it claims (a few reps)."""

from __future__ import annotations

from benchmarks import subgroups


def test_gate_rates_run_both_directions_on_the_real_gate() -> None:
    name = "subgroup_gap/manufacturer/Siemens"
    worse = subgroups.gate_rates(3, 1, {"*": 0.85, "Siemens": 0.45}, named=name)
    assert worse["NOT QUALIFIED"] == 1.0 and worse["named"] == 1.0
    base = subgroups.gate_rates(3, 1, {"*": 0.85, "Siemens": 0.45}, subgroups=None)
    assert set(base) == {"QUALIFIED", "NOT QUALIFIED", "UNDECIDED", "named"} and base["named"] == 0.0


def test_plan_rates_name_each_stratum_and_direction() -> None:
    rows = subgroups.plan_rates(1, 2)
    assert {(r["stratum"], r["check"], r["direction"]) for r in rows} == {
        (v, k, d) for v in subgroups.VENDORS for k in ("accuracy", "gap") for d in ("pass", "fail")}
    assert all(r["images_of_stratum"] >= r["planned_for_this_check"] for r in rows)
