"""A site package extends the gate by entry point, with no edit under src/: the toy check
kind, model provider and image perturbation of tests/toyplugins (each one file, found
through their package's entry_points.txt on the PYTHONPATH) are found and used by the
gate end to end, alone and under `-n 2`, and appear in the terminal summary, gate.json,
results.jsonl and report.html."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOYS = Path(__file__).resolve().parents[1] / "toyplugins" / "site"


@pytest.fixture
def toy_site(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The toy package's directory first on the PYTHONPATH of the runs started from here."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(TOYS), os.environ.get("PYTHONPATH")) if p))
    return TOYS


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_registries_find_the_toys_after_the_product_s_own(toy_site: Path) -> None:
    out = _python(
        "from medrcube.gate import kinds; from medrcube.models import providers; "
        "from medrcube.run import perturbations; "
        "print([e.name for e in kinds.registered()]); print(providers.names()); print(perturbations.names())")
    kind_names, provider_names, perturbation_names = (eval(line) for line in out.splitlines())  # noqa: S307
    assert kind_names[0] == "overall" and kind_names[-1] == "toy_share" and "subgroup" in kind_names
    assert provider_names[0] == "random" and provider_names[-1] == "toy"
    assert perturbation_names[0] == "jpeg" and perturbation_names[-1] == "invert"


def test_without_the_package_there_are_no_toys() -> None:
    out = _python("from medrcube.gate import kinds; print('toy_share' in [e.name for e in kinds.registered()])")
    assert out.strip() == "False"


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "two-workers"])
def test_the_toys_run_through_the_whole_gate(toy_site: Path, gate_ws, monkeypatch: pytest.MonkeyPatch,
                                             workers: tuple[str, ...]) -> None:
    monkeypatch.setenv("MEDRCUBE_REPORT_HTML", "now")
    thresholds = gate_ws.path / "thresholds.yaml"
    thresholds.write_text(thresholds.read_text() + "toy_share: {min_share: 0.01}\n"
                          "robustness: {margin: 0.5, min_agreement: 0.05, scopes: [overall], min_n: 10}\n",
                          encoding="utf-8")
    result = gate_ws.run_subprocess(*workers, "--variants=standard,invert", model="toy:7")

    # The terminal summary: the toy kind's own line; its case and the perturbation's.
    result.stdout.fnmatch_lines(["*toy share of right answers (share; 1 pass): overall * n=27 pass*"])
    result.stdout.fnmatch_lines(["PASSED *::test_toy_share?toy_share/overall?*"])
    result.stdout.fnmatch_lines(["* *::test_robustness_agreement?agreement/invert/overall?*"])

    # gate.json: the model is the toy provider's; the toy kind's check and the perturbation's, decided.
    doc = gate_ws.gate_json()
    by_id = {c["id"]: c for c in doc["checks"]}
    toy = by_id["toy_share/overall"]
    assert (toy["kind"], toy["verdict"], toy["n"]) == ("toy_share", "pass", 27)
    assert doc["checks"][-1]["id"] == "toy_share/overall"  # discovered last: listed last
    assert {"robustness/invert/overall", "agreement/invert/overall"} <= set(by_id)
    # The toy model answers from the bytes it is shown: the inverted images reached it.
    assert by_id["agreement/invert/overall"]["observed"] < 1.0

    run_dir = gate_ws.run_dirs()[-1]
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r.get("variant") for r in records if isinstance(r, dict)} >= {"standard", "invert"}
    assert json.dumps(doc).count("toy:7") >= 1

    # report.html: the toy kind's panel and the perturbation's column.
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert 'id="kind-toy_share"' in html and "toy share of right answers" in html
    assert "<code>toy_share/overall</code>" in html and "invert" in html
