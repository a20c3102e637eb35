"""What a gate run leaves behind: the run directory, JUnit properties, Allure results
(Behaviors labels, excluded parameters, stable history ids, attachments), the terminal
summary, and `medrcube qualify`."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from medrcube.commands import qualify


def _allure_results(directory: Path) -> dict[str, dict]:
    out = {}
    for path in directory.glob("*-result.json"):
        doc = json.loads(path.read_text(encoding="utf-8"))
        params = {p["name"]: p for p in doc.get("parameters", [])}
        if "check" not in params:  # the gate's own verdict case (plugin/allure_overview.py)
            assert doc["name"].startswith("Gate verdict: ")
            continue
        check = params["check"]["value"].strip("'")
        if check != "None":  # the placeholder of a kind with no check (skipped by a mark)
            out[check] = doc
    return out


def _labels(doc: dict, name: str) -> list[str]:
    return [label["value"] for label in doc["labels"] if label["name"] == name]


def test_run_directory_and_junit_properties(gate_ws):
    wrong = gate_ws.ids("Disease Diagnosis")
    result = gate_ws.run("--junitxml=junit.xml", model=gate_ws.replay("half.jsonl", wrong=wrong))

    run_dir = gate_ws.run_dirs()[-1]
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(records) == 27 and {r["outcome"] for r in records} == {"correct", "wrong"}
    summary = json.loads((run_dir / "metrics_summary.json").read_text())
    assert summary  # written by run.outputs in the reference layout
    assert json.loads((run_dir / "run.json").read_text())["run_id"] == run_dir.name

    root = ET.parse(gate_ws.path / "junit.xml").getroot()
    cases = {tc.get("name"): tc for tc in root.iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_cell[Chest/X-Ray/Disease Diagnosis]"].iter("property")}
    assert props["medrcube_status"] == "fail"
    assert props["medrcube_observed"] == "0" and props["medrcube_n"] == "12" and props["medrcube_bound"] == "0.6"
    assert json.loads(props["medrcube_verdict"])["id"] == "Chest/X-Ray/Disease Diagnosis"

    # The terminal summary: the table per modality, the numbers and the paths.
    result.stdout.fnmatch_lines(
        [
            "*= medrcube gate =*",
            "X-Ray *MR *DD",
            "  Chest *pass *FAIL",
            "MRI *OR",
            "  Brain *undec",
            "overall accuracy 0.556 [[]*[]] (*) n=27 (bound 0.60, point): fail",
            "credibility overall: grounding n/a; rationality n/a; shortcut probability n/a; "
            "12 pairs (A=0 B=12 C=0 D=0): undecided",
            f"written: {run_dir}/ (results.jsonl, metrics_summary.json, run.json, gate.json, thresholds.yaml, "
            "report.html, manifest.json)",
            "*- account -*",
            # the modality items are answered by their options alone: the checks over them (overall,
            # the Chest slice, the modality cell, credibility) leak and are not required; a decided
            # failure there still fails the gate, marked reported-only
            "verdict: NOT QUALIFIED (exit status 10); of 3 required checks 0 passed, 1 failed, 2 undecided, 0 in error; "
            "4 checks reported, not required: 1 passed, 2 failed, 1 undecided, 0 in error",
            "coverage parts: FAILED: Chest; undecided: Brain",
            "coverage modalities: FAILED: X-Ray; undecided: MRI",
            "coverage tasks: FAILED: Disease Diagnosis; decided (every check there passed): Modality Recognition; "
            "undecided: Organ Recognition",
            "failed (3):",
            "  Chest/X-Ray/Disease Diagnosis: fail: accuracy 0.000 [[]*[]] (*), bound 0.600, n=12",
            "  overall [[]reported-only[]]: fail: accuracy 0.556 [[]*[]] (*), bound 0.600, n=27",
            "  slice/part/Chest [[]reported-only[]]: fail: *",
            "required, not decided (2):",
            "*", "*",
            "run: 27 asked, 27 answered, 0 failed, 0 from the store, *27 requests sent",
            "exit status 10 (QUALIFIED 0, NOT QUALIFIED 10, UNDECIDED 11)",
            "gate: NOT QUALIFIED (3 checks failed: Chest/X-Ray/Disease Diagnosis, overall (reported-only), "
            "slice/part/Chest (reported-only)); *",
        ]
    )
    # JUnit: the account as the suite's properties, each failed check named.
    suite_props = [(p.get("name"), p.get("value")) for p in root.find("testsuite").find("properties")]
    assert ("medrcube_gate_verdict", "NOT QUALIFIED") in suite_props
    account = gate_ws.gate_json()["account"]
    assert ("medrcube_account", account["summary"]) in suite_props
    assert [v for k, v in suite_props if k == "medrcube_failed"] == [
        "Chest/X-Ray/Disease Diagnosis", "overall (reported-only)", "slice/part/Chest (reported-only)"]
    assert any(k == "medrcube_coverage" and v.startswith("coverage parts: FAILED: Chest") for k, v in suite_props)


def test_allure_labels_parameters_and_attachments(gate_ws):
    model = gate_ws.replay("half.jsonl", wrong=gate_ws.ids("Disease Diagnosis"))
    gate_ws.run("--alluredir=allure-a", model=model)
    results = _allure_results(gate_ws.path / "allure-a")

    cell = results["Chest/X-Ray/Disease Diagnosis"]
    assert _labels(cell, "epic") == ["Chest"]
    assert _labels(cell, "feature") == ["X-Ray"]
    assert _labels(cell, "story") == ["Disease Diagnosis"]
    assert _labels(cell, "severity") == ["critical"]  # a high-level task
    assert _labels(results["Chest/X-Ray/Modality Recognition"], "severity") == ["minor"]  # low level
    assert cell["status"] == "failed"
    assert cell["name"] == "Chest / X-Ray / Disease Diagnosis: accuracy"
    params = {p["name"]: p for p in cell["parameters"]}
    assert params["observed"]["value"] == "0.0" and params["observed"]["excluded"] is True  # a number, unquoted
    assert params["n"]["value"] == "12" and params["bound"]["excluded"] is True
    assert not params["check"].get("excluded")
    attachments = {a["name"]: a for a in cell["attachments"]}
    assert set(attachments) == {"check and verdict", "worst items"}
    csv_text = (gate_ws.path / "allure-a" / attachments["worst items"]["source"]).read_text()
    assert csv_text.splitlines()[0].startswith("item_id,cell,variant")
    assert "cx-dd-00" in csv_text
    attached = json.loads((gate_ws.path / "allure-a" / attachments["check and verdict"]["source"]).read_text())
    assert attached["check"]["id"] == attached["verdict"]["id"] == "Chest/X-Ray/Disease Diagnosis"

    assert (_labels(results["slice/part/Chest"], "epic"), _labels(results["slice/part/Chest"], "feature")) == (
        ["Slices"],
        ["By part"],
    )
    assert _labels(results["overall"], "epic") == ["Overall"]
    assert _labels(results["credibility/overall"], "epic") == ["Credibility"]
    assert results["Brain/MRI/Organ Recognition"]["status"] == "skipped"

    # A changed bound changes the numbers, not the history: same history ids. (0.4, not
    # lower: the Brain cell's 3-option questions have chance 1/3, and a bound at or below
    # chance is refused.)
    thresholds = gate_ws.path / "thresholds.yaml"
    thresholds.write_text(thresholds.read_text().replace('bound: 0.6}\n', 'bound: 0.4}\n'), encoding="utf-8")
    gate_ws.run("--alluredir=allure-b", model=model)
    again = _allure_results(gate_ws.path / "allure-b")
    moved = again["Chest/X-Ray/Modality Recognition"]
    assert {p["name"]: p["value"] for p in moved["parameters"]}["bound"] == "0.4"
    assert {k: v["historyId"] for k, v in again.items()} == {k: v["historyId"] for k, v in results.items()}


def test_errored_case_keeps_its_labels(gate_ws, gate_server):
    gate_server.set_script({"faults": [{"fault": "status", "status": 500}]})
    (gate_ws.path / "models.yaml").write_text(
        "version: 1\nmodels:\n  flaky: {provider: openai, model: test-model, base_url: '"
        + gate_server.base_url + "', max_retries: 0}\n",
        encoding="utf-8",
    )
    gate_ws.run("--alluredir=allure", "--models-file=models.yaml", model="flaky")
    results = _allure_results(gate_ws.path / "allure")
    cell = results["Chest/X-Ray/Disease Diagnosis"]
    assert cell["status"] == "broken"
    assert (_labels(cell, "epic"), _labels(cell, "feature"), _labels(cell, "story")) == (
        ["Chest"],
        ["X-Ray"],
        ["Disease Diagnosis"],
    )
    assert {p["name"]: p["value"] for p in cell["parameters"]}["verdict"] == "error"


def test_qualify_arguments_pass_through_to_pytest(capfd):
    from medrcube.cli import main

    # Unknown arguments (-k, --co, -q) reach pytest: only the Chest checks are collected.
    assert main(["qualify", "--model", "random:3", "--co", "-q", "-k", "Chest", "-p", "no:cacheprovider"]) == 0
    collected = [line for line in capfd.readouterr().out.splitlines() if "::test_" in line]
    assert collected and all("Chest" in line for line in collected)
    parser = __import__("argparse").ArgumentParser()
    qualify.add_arguments(parser)
    args, extra = parser.parse_known_args(["--model", "random:3", "-n", "2", "--co", "-k", "Chest", "--alluredir=out"])
    args.pytest_args = extra
    assert args.model == "random:3" and args.cube is None
    assert qualify.pytest_argv(args, Path("suite")) == ["suite", "--model=random:3", "-n", "2", "--co", "-k", "Chest", "--alluredir=out"]
    # The packaged suite is found from anywhere.
    assert (qualify.find_suite() / "test_gate.py").is_file()
    with pytest.raises(FileNotFoundError, match="no conftest.py"):
        qualify.find_suite("/nonexistent-suite")


def test_medrcube_qualify_runs_the_suite(gate_ws):
    result = gate_ws.pytester.run(
        sys.executable, "-m", "medrcube.cli", "qualify",
        "--suite", str(gate_ws.path / "tests_benchmark"), "--cube", "cube/cube.jsonl", "--model", gate_ws.replay("good.jsonl"),
        "--thresholds=thresholds.yaml", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q",
    )  # fmt: skip
    # The Brain cell (3 items) and credibility (no wrong perception) stay undecided: the
    # gate is UNDECIDED and `medrcube qualify` passes pytest's exit status (11) through.
    assert result.ret == 11, result.stdout.str()
    result.stdout.fnmatch_lines(["*= medrcube gate =*", "*passed*skipped*"])
    doc = gate_ws.gate_json()
    assert doc["passed"] is False and doc["gate"]["verdict"] == "UNDECIDED"



def test_usage_and_cost_per_run(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    (gate_ws.path / "models.yaml").write_text(
        "version: 1\nmodels:\n  priced:\n    provider: openai\n    model: test-model\n"
        f"    base_url: '{gate_server.base_url}'\n    price: {{prompt: 2.0, completion: 8.0, currency: USD}}\n",
        encoding="utf-8",
    )
    result = gate_ws.run("--models-file=models.yaml", model="priced")
    doc = gate_ws.gate_json()
    usage = doc["usage"]["candidate"]
    assert usage["requests"] == 27 and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    expected = (usage["prompt_tokens"] * 2.0 + usage["completion_tokens"] * 8.0) / 1e6
    assert usage["cost"] == pytest.approx(expected) and usage["currency"] == "USD"
    # The full public cube (7,626 items) at this run's cost per item.
    assert usage["projected_full_cube"] == pytest.approx(expected / 27 * 7626, abs=0.01)
    run_doc = json.loads((gate_ws.run_dirs()[-1] / "run.json").read_text(encoding="utf-8"))
    assert run_doc["usage"]["candidate"]["cost"] == usage["cost"]
    result.stdout.fnmatch_lines(["usage candidate: 27 requests, * prompt + 27 completion tokens, cost USD *"
                                 " (full public cube, 7,626 items: ~USD *)"])
    assert "usage" in (gate_ws.run_dirs()[-1] / "report.html").read_text(encoding="utf-8")


def test_medrcube_run_and_the_gate_write_the_same_run_directory(gate_ws):
    # One run service behind both: the same records, summary and run.json counts for the
    # same model and cube (each with its own fresh store).
    model = gate_ws.replay("half.jsonl", wrong=gate_ws.ids("Disease Diagnosis"))
    cli = gate_ws.pytester.run(
        sys.executable, "-m", "medrcube.cli", "run", "--model", model, "--cube", "cube/cube.jsonl",
        "--out", "cli-reports", "--response-store", "cli-store", "--no-progress",
    )  # fmt: skip
    assert cli.ret == 0, cli.stderr.str()
    gate_ws.run(model=model, store="gate-store")
    (cli_dir,) = sorted((gate_ws.path / "cli-reports").iterdir())
    gate_dir = gate_ws.run_dirs()[-1]
    assert cli_dir.name.rsplit("Z-", 1)[1] == gate_dir.name.rsplit("Z-", 1)[1]  # named by one function

    def rows(d: Path) -> list[dict]:
        out = [json.loads(line) for line in (d / "results.jsonl").read_text(encoding="utf-8").splitlines()]
        for r in out:
            r.pop("latency_s")
        return out

    assert rows(cli_dir) == rows(gate_dir) and rows(cli_dir)[0]["schema_version"] == 1
    assert (cli_dir / "metrics_summary.json").read_bytes() == (gate_dir / "metrics_summary.json").read_bytes()
    counts = [json.loads((d / "run.json").read_text(encoding="utf-8"))["counts"] for d in (cli_dir, gate_dir)]
    assert counts[0] == counts[1]
