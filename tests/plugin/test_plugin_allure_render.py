"""The rendered Allure report groups the Behaviors tree by anatomy, modality and task, and
says what was qualified: the model of every result, the environment, the executor and
the categories (decided fail, undecided, API errors).

Needs the Allure command line (2.x, from the npm registry: `npm install
allure-commandline`, which runs on Java): found through $MEDRCUBE_ALLURE, on PATH, or in
the checkout's node_modules/.bin. Without it this test is skipped, saying so; the labels
themselves are tested without it in test_plugin_reports.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _allure_cli() -> str | None:
    for candidate in (
        os.environ.get("MEDRCUBE_ALLURE"),
        shutil.which("allure"),
        REPO / ".tools/node_modules/.bin/allure",
        REPO / "node_modules/.bin/allure",
    ):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _tree(node: dict) -> dict:
    """behaviors.json as nested {name: subtree}, test cases as leaves ({})."""
    return {c["name"]: _tree(c) for c in node.get("children", [])}


def _cli_or_skip() -> str:
    cli = _allure_cli()
    if cli is None:
        pytest.skip("no Allure command line: npm install --prefix .tools allure-commandline@2.46.1 (needs Java), "
                    "or set MEDRCUBE_ALLURE")
    version = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=120).stdout.strip()
    if not version.startswith("2."):
        pytest.skip(f"this test reads the report data of Allure 2; found Allure {version!r}")
    return cli


def test_rendered_behaviors_tree(gate_ws):
    cli = _cli_or_skip()

    model = gate_ws.replay("half.jsonl", wrong=gate_ws.ids("Disease Diagnosis"))
    gate_ws.run("--alluredir=allure-results", "--variants=standard,blind", model=model)
    out = gate_ws.path / "allure-report"
    subprocess.run([cli, "generate", "allure-results", "-o", str(out), "--clean"], cwd=gate_ws.path,
                   check=True, capture_output=True, timeout=300)  # fmt: skip

    tree = _tree(json.loads((out / "data" / "behaviors.json").read_text(encoding="utf-8")))
    # Cells: part > modality > task > the case.
    assert set(tree["Chest"]) == {"X-Ray"}
    assert set(tree["Chest"]["X-Ray"]) == {"Disease Diagnosis", "Modality Recognition"}
    assert list(tree["Chest"]["X-Ray"]["Disease Diagnosis"]) == ["Chest / X-Ray / Disease Diagnosis: accuracy"]
    assert set(tree["Brain"]["MRI"]) == {"Organ Recognition"}
    # The other checks group beside the anatomy.
    assert set(tree["Slices"]) == {"By part"} and set(tree["Slices"]["By part"]) == {"Chest", "Brain"}
    assert set(tree["Credibility"]) == {"All parts"}
    assert "All parts" in tree["Image dependence"]
    # No placeholder for the kinds not requested (regression, position).
    # and the gate's own verdict (plugin/allure_overview.py).
    assert set(tree) == {"Chest", "Brain", "Slices", "Overall", "Credibility", "Image dependence", "Gate verdict"}
    assert list(tree["Gate verdict"]) == ["Gate verdict: NOT QUALIFIED"]


def test_two_models_in_one_report_with_environment_executor_and_categories(gate_ws):
    cli = _cli_or_skip()
    good = gate_ws.replay("good.jsonl")
    bad = gate_ws.replay("bad.jsonl", wrong=gate_ws.ids("Disease Diagnosis"))
    gate_ws.run("--alluredir=allure-results", model=good)
    gate_ws.run("--alluredir=allure-results", "--allure-keep", model=bad)  # both runs in one report
    out = gate_ws.path / "allure-report"
    subprocess.run([cli, "generate", "allure-results", "-o", str(out), "--clean"], cwd=gate_ws.path,
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    data = out / "data"
    widgets = out / "widgets"

    # Every result names its model (a label, the parent suite and a parameter): the two
    # runs are two sets of results, not retries of each other.
    suites = _tree(json.loads((data / "suites.json").read_text(encoding="utf-8")))
    assert set(suites) == {good, bad}
    cases = [json.loads(p.read_text(encoding="utf-8")) for p in (data / "test-cases").glob("*.json")]
    by_model: dict[str, int] = {}
    for case in cases:
        params = {p["name"]: p["value"] for p in case.get("parameters", [])}
        labels = {label["name"]: label["value"] for label in case.get("labels", [])}
        assert labels["model"] == params["model"]
        by_model[params["model"]] = by_model.get(params["model"], 0) + 1
        assert not case.get("retriesCount"), case["name"]
        if params.get("observed") not in (None, "n/a"):
            float(params["observed"])  # a number, not a quoted string
    assert by_model[good] == by_model[bad] > 0

    env = {e["name"]: e["values"] for e in json.loads((widgets / "environment.json").read_text(encoding="utf-8"))}
    assert env["model"] == [bad] and env["cube.items"] == ["27"]
    assert {"model.fingerprint", "cube", "cube.fingerprint", "thresholds", "profile", "variants",
            "medrcube.version"} <= set(env)  # fmt: skip
    executors = json.loads((widgets / "executors.json").read_text(encoding="utf-8"))
    assert executors and executors[0]["name"] == "medrcube" and bad in executors[0]["reportName"]
    categories = {c["name"] for c in json.loads((data / "categories.json").read_text(encoding="utf-8"))["children"]}
    assert "Decided fail (below its bound)" in categories
    assert "Undecided (insufficient evidence)" in categories
    assert "Product defects" not in categories


def test_the_overview_shows_the_gate_verdict_and_a_trend_across_runs(gate_ws):
    cli = _cli_or_skip()
    bad = gate_ws.replay("bad.jsonl", wrong=gate_ws.ids("Disease Diagnosis"))
    first = gate_ws.run("--alluredir=allure-results", model=bad)
    second = gate_ws.run("--alluredir=allure-results", model=bad)  # a fresh results directory, the trend kept
    assert first.ret == second.ret == 10
    out = gate_ws.path / "allure-report"
    subprocess.run([cli, "generate", "allure-results", "-o", str(out), "--clean"], cwd=gate_ws.path,
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    widgets = out / "widgets"

    cases = [json.loads(p.read_text(encoding="utf-8")) for p in (out / "data" / "test-cases").glob("*.json")]
    (verdict,) = [c for c in cases if c["name"].startswith("Gate verdict")]
    assert verdict["name"] == "Gate verdict: NOT QUALIFIED" and verdict["status"] == "failed"
    assert "NOT QUALIFIED" in verdict["statusMessage"]
    env = {e["name"]: e["values"] for e in json.loads((widgets / "environment.json").read_text(encoding="utf-8"))}
    assert env["verdict"] == ["NOT QUALIFIED"]
    executors = json.loads((widgets / "executors.json").read_text(encoding="utf-8"))
    assert executors[0]["reportName"].endswith(": NOT QUALIFIED")
    suites = json.loads((widgets / "suites.json").read_text(encoding="utf-8"))
    assert suites["items"][0]["name"] == bad  # the model's suite, whose first child is the verdict
    trend = json.loads((widgets / "history-trend.json").read_text(encoding="utf-8"))
    assert len(trend) == 2 and trend[0]["data"] == trend[1]["data"]  # this run and the one before
    assert [t["buildOrder"] for t in trend] == [2, 1]
