"""The clinical panel of report.html and the issue-16 keys of metrics_summary.json, on a
run whose records carry confidences (the simulated scorer of known calibration) and an
abstain variant."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from medrcube.records import Outcome
from medrcube.report.html import write_report_html
from medrcube.run.runner import RunResult
from medrcube.run.variants import ABSTAIN_OPTION
from medrcube.rundir.files import read_results, write_run_dir
from medrcube.testing.calibrated import SimulatedScorer

OPTIONS = ("Normal", "Pneumonia", "Effusion", "Cardiomegaly")


def _records() -> list:
    recs = [replace(r, options=OPTIONS) for r in SimulatedScorer(gap=0.1).records(300, 0)]
    recs += SimulatedScorer().records(200, 1, task="Modality Recognition")
    recs = [replace(r, item_id=f"{r.item_id}-{i}") for i, r in enumerate(recs)]
    abstain = [replace(r, variant="abstain", options=(*OPTIONS, ABSTAIN_OPTION), n_options=5, confidence=None)
               for r in recs[:300]]
    abstain = [replace(r, outcome=Outcome.DEFERRED, extracted=4) if i % 5 == 0 else r for i, r in enumerate(abstain)]
    return recs + abstain


def test_summary_keys_and_report_panel(tmp_path: Path) -> None:
    recs = _records()
    run = write_run_dir(tmp_path / "run", RunResult(records=recs, info={"variants": ["standard", "abstain"]}))
    doc = json.loads((run / "metrics_summary.json").read_text())
    assert {"findings", "calibration", "selective_prediction", "abstention"} <= set(doc)
    assert doc["calibration"]["high"]["n"] == 300 and doc["calibration"]["low"]["n"] == 200
    assert list(doc["findings"]) == ["task=Disease Diagnosis|modality=X-Ray|parts=Chest"]
    assert doc["abstention"]["global"]["deferred"] == 60
    assert doc["variants"]["abstain"]["global"]["n"] == 240  # deferrals are not in the accuracy denominator
    back = read_results(run / "results.jsonl")
    assert back == recs  # confidence and options survive results.jsonl

    html = write_report_html(run).read_text()
    for anchor in ('id="clinical"', 'id="findings"', 'id="calibration"', 'id="selective"', 'id="abstention"'):
        assert anchor in html
    assert (run / "plots" / "reliability.png").exists() and (run / "plots" / "risk_coverage.png").exists()


def test_a_run_without_any_of_it_has_no_panel(tmp_path: Path) -> None:
    recs = SimulatedScorer().records(50, 2, task="Modality Recognition")
    recs = [replace(r, confidence=None) for r in recs]
    run = write_run_dir(tmp_path / "plain", RunResult(records=recs, info={"variants": ["standard"]}))
    doc = json.loads((run / "metrics_summary.json").read_text())
    assert not {"findings", "calibration", "selective_prediction", "abstention"} & set(doc)
    assert 'id="clinical"' not in write_report_html(run).read_text()


def test_a_cell_where_no_answer_named_a_finding_is_not_applicable(tmp_path: Path) -> None:
    # Every diagnosis answer unparsed (a model that never named an option): no row may
    # read "sensitivity 0.0%, specificity 100.0%".
    recs = [replace(r, options=OPTIONS, outcome=Outcome.UNPARSED, extracted=None, confidence=None)
            for r in SimulatedScorer(gap=0.1).records(60, 3)]
    run = write_run_dir(tmp_path / "unparsed", RunResult(records=recs, info={"variants": ["standard"]}))
    html = write_report_html(run).read_text()
    table = html[html.index('id="findings"'):html.index("</table>", html.index('id="findings"'))]
    assert "<td>n/a</td>" in table and "100.0%" not in table and "0.0%" not in table
