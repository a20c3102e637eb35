"""A site's own tests beside the cube checks (fixtures medrcube_model, medrcube_cube,
medrcube_records, medrcube_verdict), with and without xdist; and the live progress line
reaching the terminal through pytest's capture."""

from __future__ import annotations

import json

import pytest

SITE_TEST = '''
def test_model_and_cube(medrcube_model, medrcube_cube):
    assert medrcube_model.spec.startswith("openai:test-model@")
    assert len(medrcube_cube) == 27


def test_chest_diagnosis(medrcube_records, medrcube_verdict):
    chest = [r for r in medrcube_records if r.task == "Disease Diagnosis" and r.variant == "standard"]
    medrcube_verdict("site/chest diagnosis", chest, bound={bound}, rule="point", min_n=10)


def test_small_selection_is_undecided(medrcube_records, medrcube_verdict):
    brain = [r for r in medrcube_records if r.part == "Brain"]
    medrcube_verdict("site/brain", brain, bound=0.5, min_n=10)
'''


def _site(gate_ws, bound: float) -> None:
    (gate_ws.path / "tests_benchmark" / "test_site.py").write_text(SITE_TEST.format(bound=bound), encoding="utf-8")


@pytest.mark.parametrize("bound", [0.5, 0.9])
def test_a_site_check_takes_part_in_the_verdict(gate_ws, gate_server, bound):
    # Half of the diagnoses wrong: 6/12 = 0.5 passes a 0.5 bound and fails a 0.9 one.
    gate_server.set_script({"answer_key": gate_ws.answer_key(wrong=gate_ws.ids("Disease Diagnosis")[::2])})
    _site(gate_ws, bound)
    result = gate_ws.run("--alluredir=allure", model=gate_ws.openai(gate_server))

    doc = gate_ws.gate_json()
    entry = next(c for c in doc["checks"] if c["id"] == "site/chest diagnosis")
    assert entry["kind"] == "site" and entry["n"] == 12 and entry["observed"] == 0.5
    assert entry["interval"][0] < 0.5 < entry["interval"][1]
    assert entry["verdict"] == ("pass" if bound == 0.5 else "fail")
    assert next(c for c in doc["checks"] if c["id"] == "site/brain")["verdict"] == "undecided"
    result.stdout.fnmatch_lines([f"site check site/chest diagnosis: proportion 0.500 * n=12 (bound {bound:.2f}, point): *"])
    if bound == 0.9:
        assert doc["verdict"] == "NOT QUALIFIED"
        result.stdout.fnmatch_lines(["*question of cx-dd-*: Case *"])  # worst items with their questions
    # In Allure like a built-in check.
    results = [json.loads(p.read_text()) for p in (gate_ws.path / "allure").glob("*-result.json")]
    site = next(r for r in results if r["name"] == "site/chest diagnosis: proportion")
    assert {label["value"] for label in site["labels"] if label["name"] == "epic"} == {"Site checks"}
    assert {p["name"] for p in site["parameters"]} >= {"verdict", "observed", "bound", "n", "model"}
    # The records were asked once and shared with the cube checks: 27 asks + the pre-flight.
    assert gate_server.stats()["total"] == 27


def test_truncated_answers_are_not_misses_of_a_site_check(gate_ws, gate_server):
    # The init project's example check on answers all cut at the token limit: not graded,
    # so the gate is UNDECIDED (exit 11), never NOT QUALIFIED on "0 of n correct".
    gate_server.set_script({"faults": [{"fault": "length", "text": "The answer is"}]})
    _site(gate_ws, 0.5)
    result = gate_ws.run(model=gate_ws.openai(gate_server))

    doc = gate_ws.gate_json()
    entry = next(c for c in doc["checks"] if c["id"] == "site/chest diagnosis")
    # The gate's error-rate criterion names the truncated answers (not graded, never misses).
    assert entry["verdict"] == "error" and "Errors: truncated x12" in entry["message"]
    assert doc["verdict"] == "UNDECIDED" and result.ret == 11


@pytest.mark.slow
def test_site_checks_under_xdist_match_a_serial_run(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key(wrong=gate_ws.ids("Disease Diagnosis")[::2])})
    _site(gate_ws, 0.9)
    gate_ws.run(model=gate_ws.openai(gate_server), store="store-serial")
    serial = {c["id"]: c for c in gate_ws.gate_json()["checks"]}
    gate_server.reset_stats()
    gate_ws.run_subprocess("-n", "2", model=gate_ws.openai(gate_server), store="store-parallel")
    parallel = {c["id"]: c for c in gate_ws.gate_json()["checks"]}
    assert parallel["site/chest diagnosis"] == serial["site/chest diagnosis"]
    assert parallel == serial
    assert gate_server.stats()["total"] == 27
    assert gate_server.stats()["duplicates"] == 0


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_progress_line_reaches_the_terminal_through_the_capture(gate_ws, gate_server, workers):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run_subprocess(*workers, "--medrcube-progress=yes", model=gate_ws.openai(gate_server))
    result.stdout.fnmatch_lines(["medrcube: 27/27 done (answered *, cached *, failed 0), */s, ETA -"])


def test_progress_is_quiet_by_default_outside_a_terminal(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run_subprocess(model=gate_ws.openai(gate_server))
    assert "medrcube: 27/27 done" not in result.stdout.str()


def test_a_log_gets_a_progress_line_at_a_steady_interval(monkeypatch):
    from medrcube.plugin import progress

    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    pace = progress.LogPace()
    due = []
    for _ in range(60):  # an advance every second for a minute
        now[0] += 1.0
        due.append(pace.due(final=False))
    assert sum(due) == 60 // int(progress.LOG_INTERVAL_S)
    assert pace.due(final=True)  # the last line, whenever it comes
