"""The rendered Allure report groups the Behaviors tree by anatomy, modality and task.

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
    for candidate in (os.environ.get("MEDRCUBE_ALLURE"), shutil.which("allure"), REPO / "node_modules/.bin/allure"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _tree(node: dict) -> dict:
    """behaviors.json as nested {name: subtree}, test cases as leaves ({})."""
    return {c["name"]: _tree(c) for c in node.get("children", [])}


def test_rendered_behaviors_tree(gate_ws):
    cli = _allure_cli()
    if cli is None:
        pytest.skip("no Allure command line: npm install allure-commandline (2.x, needs Java), or set MEDRCUBE_ALLURE")
    version = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=120).stdout.strip()
    if not version.startswith("2."):
        pytest.skip(f"this test reads the report data of Allure 2; found Allure {version!r}")

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
    assert set(tree["Regression"]) == {"Not requested"}
    assert set(tree) == {"Chest", "Brain", "Slices", "Overall", "Credibility", "Image dependence",
                         "Position robustness", "Regression"}  # fmt: skip
