"""The subgroup benchmark runs on the real gate core and reports what it claims (a few reps)."""

from __future__ import annotations

from benchmarks import subgroups


def test_gate_rates_run_both_directions_on_the_real_gate() -> None:
    worse = subgroups.gate_rates(3, 1, {"*": 0.85, "Siemens": 0.45}, stratum="manufacturer/Siemens")
    assert worse["NOT QUALIFIED"] == 1.0 and worse["named"] == 1.0 and worse["other_named"] == 0.0
    assert worse["accuracy_failed"] == 1.0 and worse["strata_images"] == [150, 300]
    base = subgroups.gate_rates(3, 1, {"*": 0.85, "Siemens": 0.45}, subgroups=None, stratum="manufacturer/Siemens")
    assert base["named"] == 0.0 and base["QUALIFIED"] + base["UNDECIDED"] == 1.0


def test_the_layout_holds_each_attribute_in_its_exact_shares() -> None:
    import numpy as np

    st = subgroups.strata_of(subgroups.layout({"GE": 240, "Siemens": 210, "Philips": 150}, np.random.default_rng(0)))
    assert st == {"manufacturer": {"GE": 240, "Siemens": 210, "Philips": 150}, "sex": {"female": 300, "male": 300},
                  "age_band": {"50-59": 180, "60-69": 240, "70-79": 180}}


def test_plan_rates_name_each_stratum_and_the_planned_directions() -> None:
    rows = subgroups.plan_rates(1, 2)
    assert {(r["stratum"], r["check"], r["direction"]) for r in rows} == {
        (v, k, d) for v in subgroups.VENDORS for k, d in (("accuracy", "pass"), ("accuracy", "fail"), ("gap", "fail"))}
    assert all(r["images_of_stratum"] >= r["planned_for_this_check"] for r in rows)
    assert {r["family_size"] for r in rows} == {7}


def test_under_prove_the_plan_also_plans_the_gaps_pass() -> None:
    rows = subgroups.plan_rates(1, 2, gap="prove", only=[("gap", "pass")])
    assert [(r["rule"], r["stratum"], r["check"], r["direction"]) for r in rows] == [
        ("prove", v, "gap", "pass") for v in ("GE", "Philips", "Siemens")]
