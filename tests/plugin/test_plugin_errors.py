"""API errors become pytest errors (never failures), and every mistake in the options or
the thresholds is exactly one usage error, raised before any model call."""

from __future__ import annotations

import json
import re

import pytest

MODELS_YAML = """\
version: 1
models:
  flaky:
    provider: openai
    model: test-model
    base_url: {url}
    api_key_env: MEDRCUBE_TEST_KEY
    max_retries: 0
    timeout: 10
"""


def usage_errors(result: pytest.RunResult) -> list[str]:
    return [line for line in result.errlines if line.startswith("ERROR:")]


@pytest.mark.parametrize("status", [500, 401])
def test_api_errors_are_errors_not_failures(gate_ws, gate_server, status):
    # (A key refused by a real provider stops the run in the pre-flight's GET /models;
    # the scripted server faults chat completions only, so 401 reaches the checks here.)
    gate_server.set_script({"faults": [{"fault": "status", "status": status}]})
    (gate_ws.path / "models.yaml").write_text(MODELS_YAML.format(url=gate_server.base_url), encoding="utf-8")
    result = gate_ws.run("--models-file=models.yaml", model="flaky")

    counts = result.parseoutcomes()
    assert counts.get("failed", 0) == 0 and counts.get("passed", 0) == 0
    decided = gate_ws.gate_json()["checks"]
    assert decided and all(c["verdict"] == "error" for c in decided)
    assert counts["errors"] == len(decided)  # each check errors in setup: "errors", not "failed"
    text = result.stdout.str()
    # One line per errored check, without the plugin's traceback.
    assert "Traceback" not in text and "def verdict" not in text and "session.py" not in text
    if status == 500:  # every request errored: each check says its evidence is incomplete
        lines = [line for line in result.outlines if line.startswith("medrcube: ") and "max_error_rate" in line]
        assert len(lines) == len(decided)
        assert "errors of" in lines[0] and "the evidence is incomplete; not graded" in lines[0]
    else:  # a refused key stops the run: every check errors, the asks not sent named as such
        lines = [line for line in result.outlines if line.startswith("medrcube: ") and "not asked" in line]
        assert len(lines) == len(decided) and "(the run stopped early)" in lines[0] and "auth x" in lines[0]
        result.stdout.fnmatch_lines(["the run stopped early: authentication failed: *"])
    # The most frequent causes, once, in the summary.
    result.stdout.fnmatch_lines(["failed requests: *; most frequent causes:", f"  * x *HTTP {status}*"])
    assert result.ret == 11  # UNDECIDED: required checks not graded (issue 12), never a failed gate
    assert gate_server.stats()["total"] >= 1


def test_dead_endpoint_stops_at_once_naming_the_url(gate_ws):
    url, expected = "http://127.0.0.1:9/v1", "connection failed"  # nothing listens there
    result = gate_ws.run(model=f"openai:test-model@{url}")
    # A usage error from the pre-flight: no item was asked, so no request was retried and
    # no test ran (how long it takes is benchmarks/' to measure, never asserted here).
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "passed" not in result.stdout.str() and "test_gate" not in result.stdout.str()
    errors = usage_errors(result)
    assert len(errors) == 1, result.errlines
    assert url.removesuffix("/v1") in errors[0] and expected in errors[0]
    assert gate_ws.run_dirs() == []


@pytest.mark.parametrize("workers", [0, 2])
def test_a_name_the_server_lists_as_a_path_is_asked_as_listed(gate_ws, gate_server, workers):
    # `transformers serve ./my-vlm` lists "./my-vlm" and refuses every other name with
    # HTTP 400: the pre-flight resolves "my-vlm" to it, every request carries the listed
    # name (an xdist worker's too), and none is refused.
    gate_server.set_script({"answer_key": gate_ws.answer_key(), "models": ["./my-vlm"], "pinned": 400})
    spec = f"openai:my-vlm@{gate_server.base_url}"
    result = gate_ws.run_subprocess("-n", str(workers), model=spec) if workers else gate_ws.run(model=spec)
    stats = gate_server.stats()
    assert dict(stats["models"]) == {"./my-vlm": len(gate_ws.items)}  # one request per item, as listed
    assert "400" not in stats["by_status"]
    result.stdout.fnmatch_lines(["model openai:my-vlm@* (served as ./my-vlm)*"])
    assert gate_ws.gate_json()["served_model"] == "./my-vlm"


def test_a_near_miss_model_name_is_one_usage_error_before_any_request(gate_ws, gate_server):
    gate_server.set_script({"default": "A", "models": ["./my-vlm"], "pinned": 400})
    result = gate_ws.run(model=f"openai:my-vlmm@{gate_server.base_url}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = usage_errors(result)
    assert len(errors) == 1 and "did you mean './my-vlm'?" in errors[0], result.errlines
    assert gate_server.stats()["total"] == 0 and gate_ws.run_dirs() == []


def test_no_api_key_is_one_usage_error(gate_ws, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    result = gate_ws.run(model="gpt-5.1")
    errors = usage_errors(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and len(errors) == 1, result.errlines
    assert "OPENAI_API_KEY" in errors[0] and errors[0].startswith("ERROR: --model=gpt-5.1")


def test_bad_thresholds_file_is_one_usage_error(gate_ws, gate_server):
    (gate_ws.path / "thresholds.yaml").write_text(
        "version: 1\noverall: {bound: 1.5}\ncells:\n  - {match: '*/*/*', bound: 0.5}\n", encoding="utf-8"
    )
    result = gate_ws.run(model=gate_ws.openai(gate_server))

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = usage_errors(result)
    assert len(errors) == 1, result.errlines
    assert errors[0].startswith("ERROR: --thresholds=")
    assert "overall.bound" in errors[0] and "1.5" in errors[0]
    assert gate_server.stats()["total"] == 0
    assert gate_ws.run_dirs() == []


def test_cell_pattern_matching_no_cell_is_one_usage_error(gate_ws):
    (gate_ws.path / "thresholds.yaml").write_text(
        "version: 1\ncells:\n  - {match: 'Chest/X-Ray/Disease Diagnosis', bound: 0.5}\n"
        "  - {match: 'Chset/X-Ray/*', bound: 0.5}\n",
        encoding="utf-8",
    )
    result = gate_ws.run(model="random")
    errors = usage_errors(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and len(errors) == 1, result.errlines
    assert "cells[1].match" in errors[0] and "did you mean 'Chest'" in errors[0]


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("--variants=standard,blnd", ["--variants=standard,blnd", "did you mean 'blind'", "choices: standard, blind"]),
        ("--model=opneai:gpt", ["--model=opneai:gpt", "did you mean 'openai'", "providers:"]),
        ("--model=randm", ["--model=randm", "did you mean 'random'"]),
        ("--concurrency=0", ["--concurrency=0", "positive integer"]),
        ("--profile=deploy", ["--profile=deploy", "unknown profile 'deploy'"]),
        ("--baseline=replay:missing.jsonl", ["--baseline=replay:missing.jsonl", "not found"]),
    ],
)
def test_bad_option_is_one_usage_error(gate_ws, gate_server, option, expected):
    result = gate_ws.run(option, model=None if option.startswith("--model") else gate_ws.openai(gate_server))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = usage_errors(result)
    assert len(errors) == 1, result.errlines
    for text in expected:
        assert text in errors[0]
    assert gate_server.stats()["total"] == 0


def test_usage_error_under_xdist_stops_in_the_controller(gate_ws, gate_server):
    # Raised in the controller's pytest_sessionstart, before xdist starts any worker.
    result = gate_ws.run_subprocess("-n", "2", "--variants=blind,blnd", model=gate_ws.openai(gate_server))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = usage_errors(result)
    assert len(errors) == 1 and "did you mean 'blind'" in errors[0], result.errlines
    assert "gw0" not in result.stdout.str()
    assert gate_server.stats()["total"] == 0


def test_the_default_cube_is_the_packaged_mini_cube(gate_ws):
    result = gate_ws.pytester.runpytest("tests_benchmark", "--co", "-q", "-p", "no:cacheprovider")
    assert result.ret == 0, result.errlines
    from medrcube.suite import bundled_cube

    mini = bundled_cube()
    assert mini is not None and (mini / "NOTICE").is_file()


def test_gate_options_without_a_gate_suite_are_a_usage_error(pytester):
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest("--model=random", "--cube=x", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = usage_errors(result)
    assert len(errors) == 1, result.errlines
    assert "--model, --cube given" in errors[0] and "pytest --pyargs medrcube.suite" in errors[0]


def test_the_plugin_is_idle_without_a_gate_suite(pytester):
    # Installed through its entry point, it must not load a cube or a model elsewhere.
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "medrcube gate" not in result.stdout.str()
    assert not (pytester.path / "reports").exists()


DYING_YAML = """\
version: 1
models:
  dying:
    provider: openai
    model: test-model
    base_url: {url}
    api_key_env: MEDRCUBE_TEST_KEY
    concurrency: 2
    breaker_failures: 3
    breaker_seconds: 0.5
"""


def test_a_server_that_dies_mid_run_ends_the_gate_undecided_in_one_message(gate_ws, gate_server, monkeypatch):
    # The server answers ten requests and is gone: the gate stops asking (the breaker),
    # grades the ten answers it got, and ends UNDECIDED, naming the URL once.
    gate_server.set_script({"answer_key": gate_ws.answer_key(), "faults": [{"fault": "die", "after": 10}]})
    url = gate_server.base_url
    (gate_ws.path / "models.yaml").write_text(DYING_YAML.format(url=url), encoding="utf-8")
    monkeypatch.setenv("MEDRCUBE_REPORT_HTML", "now")  # report.html drawn before the exit: compared below
    result = gate_ws.run("--models-file=models.yaml", model="dying")

    assert result.ret == 11
    doc = gate_ws.gate_json()
    assert doc["verdict"] == "UNDECIDED" and "circuit open" in doc["aborted"]
    errored = [c for c in doc["checks"] if c["verdict"] == "error"]
    assert errored and all("not asked (the run stopped early)" in c["message"] for c in errored)
    assert max(c["n"] for c in doc["checks"]) > 0  # the answers got before the stop are graded
    result.stdout.fnmatch_lines([f"the run stopped early: circuit open for {url}: *"])
    records = [json.loads(line) for line in (gate_ws.run_dirs()[-1] / "results.jsonl").read_text().splitlines()]
    answered = [r for r in records if r["outcome"] in ("correct", "wrong")]
    assert len(answered) == 10  # the answers before the death are kept (a rerun asks only the rest)
    # One set of counters, the same in the records, gate.json, run.json and the terminal.
    tally = doc["tally"]
    unasked = sum(r["how"] == "not_asked" for r in records)
    assert tally["answered"] == 10 and tally["not_asked"] == unasked > 0 and tally["stop"] == doc["aborted"]
    assert tally["answered"] + tally["failed"] + tally["not_asked"] + tally["cached"] == len(records)
    assert json.loads((gate_ws.run_dirs()[-1] / "run.json").read_text())["tally"] == tally
    assert tally["requests"] == tally["answered"] + tally["failed"]  # what was sent: answered or failed
    assert tally["failed_requests"] == tally["failed"]
    result.stdout.fnmatch_lines([f"items: 27 in the cube, 27 loaded; asks (items x variants): 27: 10 answered, "
                                 f"0 from the response store, {tally['failed']} failed, {unasked} not asked "
                                 f"(the run stopped); 10 graded; {tally['requests']} requests sent, "
                                 f"{tally['failed']} of them failed",
                                 f"usage candidate: {tally['requests']} requests, *",
                                 f"failed requests: {tally['failed']}; most frequent causes:",
                                 "answers: 10 asked live in this run, 0 from the response store*"])
    page = (gate_ws.run_dirs()[-1] / "report.html").read_text(encoding="utf-8")
    terminal = next(line for line in result.outlines if line.startswith("items: 27 in the cube"))
    assert terminal in page  # the same account on the page
    # The account's first lines (the verdict with the required checks' counts, then what the
    # verdict covers) are the same in the terminal, gate.json and report.html after the stop.
    summary = doc["account"]["summary"]
    assert f"verdict: UNDECIDED (exit status 11); {summary}" in result.outlines
    shown = re.search(r'<div class="account-summary">([^<]*)</div>', page)
    assert shown and shown.group(1).strip() == summary
    for axis in ("parts", "modalities", "tasks"):
        assert any(line.startswith(f"coverage {axis}: ") for line in result.outlines) and f"coverage {axis}: " in page


@pytest.mark.parametrize("workers", [0, 2])
def test_a_server_failing_mid_run_counts_its_failures_the_same_everywhere(gate_ws, gate_server, monkeypatch, workers):
    # Every request after the twelfth answers HTTP 500 (no retry): nothing stops the run,
    # the failures are counted once, as failed requests, never as unasked or answered
    # (under xdist too: the workers' counts are one run's).
    gate_server.set_script({"answer_key": gate_ws.answer_key(),
                            "faults": [{"fault": "status", "status": 500, "after": 12}]})
    (gate_ws.path / "models.yaml").write_text(MODELS_YAML.format(url=gate_server.base_url), encoding="utf-8")
    monkeypatch.setenv("MEDRCUBE_REPORT_HTML", "now")
    args = ("--models-file=models.yaml", "--alluredir=allure")
    result = gate_ws.run_subprocess(*args, "-n", "2", model="flaky") if workers else gate_ws.run(*args, model="flaky")
    doc = gate_ws.gate_json()
    tally = doc["tally"]
    env = (gate_ws.path / "allure" / "environment.properties").read_text(encoding="utf-8").splitlines()
    assert {"tally.answered=12", "tally.failed=15", "tally.not_asked=0", f"tally.requests={tally['requests']}"} <= set(env)
    sent = gate_server.stats()["total"]
    # Under xdist a worker asks again what another's request failed on: more requests, one count.
    assert tally["requests"] == sent == tally["failed_requests"] + 12 and (sent == 27 or workers)
    assert tally["answered"] == 12 and tally["failed"] == 15
    assert tally["not_asked"] == 0 and tally["stop"] is None and doc.get("aborted") is None
    assert max(c["n"] for c in doc["checks"]) > 0
    result.stdout.fnmatch_lines(["items: 27 in the cube, 27 loaded; asks (items x variants): 27: 12 answered, "
                                 f"0 from the response store, 15 failed; * graded; {sent} requests sent, "
                                 f"{sent - 12} of them failed",
                                 f"usage candidate: {sent} requests, *",
                                 f"failed requests: {sent - 12}; most frequent causes:",
                                 "answers: 12 asked live in this run, 0 from the response store*"])
    page = (gate_ws.run_dirs()[-1] / "report.html").read_text(encoding="utf-8")
    assert next(line for line in result.outlines if line.startswith("items: 27 in the cube")) in page


def test_ctrl_c_prints_the_partial_account_and_the_command_that_resumes(gate_ws, gate_server):
    # Interrupted mid-inference: no verdict, but how far the run got, where its answers
    # are, and the command that asks only the rest.
    import os
    import signal
    import subprocess
    import sys
    import time

    # After six answers the server never answers again: the run is mid-inference when the
    # signal comes, however fast or loaded the machine (no race against a latency).
    gate_server.set_script({"answer_key": gate_ws.answer_key(),
                            "faults": [{"fault": "hang", "after": 6, "seconds": 600}]})
    args = gate_ws.args(model=gate_ws.openai(gate_server), store="store")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=gate_ws.path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300  # a bound on a hang only
        while gate_server.stats()["total"] < 7 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("interrupted before the verdict"))
    assert lines[at + 1].endswith(" not asked") and "asks done before the interruption: answered " in lines[at + 1]
    assert "the same command resumes" in lines[at + 2] and "response store" in lines[at + 2]
    assert lines[at + 3].startswith("  pytest tests_benchmark ") and "--model=openai:test-model@" in lines[at + 3]
    assert gate_ws.run_dirs() == []


def test_items_the_cube_refuses_at_load_are_named_in_every_output(gate_ws):
    # An image path leaving the cube, a FIFO and a missing file: skipped as `medrcube
    # validate` says, and named in the summary and gate.json, never only counted.
    import os

    rows = [json.loads(line) for line in (gate_ws.path / "cube" / "cube.jsonl").read_text().splitlines()]
    rows[0]["image"] = "../outside.png"
    (gate_ws.path / "outside.png").write_bytes((gate_ws.path / "cube" / "img" / "cx0.png").read_bytes())
    os.mkfifo(gate_ws.path / "cube" / "img" / "fifo.png")
    rows[1]["image"] = "img/fifo.png"
    rows[2]["image"] = "img/gone.png"
    (gate_ws.path / "cube" / "cube.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = gate_ws.run(model="random")
    tally = gate_ws.gate_json()["tally"]
    assert tally["items"] == 27 and tally["loaded"] == 24
    assert {s["item_id"]: s["reason"] for s in tally["skipped"]} == {
        rows[0]["id"]: "image_path_escapes", rows[1]["id"]: "image_not_a_file", rows[2]["id"]: "image_missing"}
    result.stdout.fnmatch_lines(["model random on cube * (24 items, 3 more skipped at load: named below)*",
                                 "items: 27 in the cube, 24 loaded; *",
                                 "skipped at load: 3 items (`medrcube validate` names the same):",
                                 f"  {rows[0]['id']}: image_path_escapes: *outside the cube root*"])
