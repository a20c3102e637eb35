"""The robustness panel of report.html and the robustness columns of the leaderboard."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.gate.checks import build_checks
from medrcube.gate.evaluate import evaluate_gate
from medrcube.gate.thresholds import load_policy
from medrcube.plugin.summary import gate_document, verdict_payload
from medrcube.report.html import write_report_html
from medrcube.report.leaderboard import leaderboard
from medrcube.run.runner import run_cube
from medrcube.rundir.files import write_run_dir
from medrcube.testing.pixel_model import NoiseBlindModel

MINI = Path(__file__).resolve().parents[2] / "fixtures" / "mini"


def _write_gate(run_dir: Path, cube, records, variants: str) -> None:
    """gate.json of the gate's robustness and agreement checks on these records (what the
    pytest gate writes), so that the panel has the gate's verdicts to show."""
    policy_path = run_dir / "robustness.yaml"
    policy_path.write_text("version: 1\nrobustness: {margin: 0.05, min_agreement: 0.9, scopes: [overall, task]}\n",
                           encoding="utf-8")
    cells = {(it.part, it.modality, it.task) for it in cube.items}
    checks = [c for c in build_checks(cells, load_policy(policy_path), variants=variants)
              if c.kind in ("robustness", "robustness_agreement")]
    by_id = evaluate_gate(checks, records).by_id()
    doc = gate_document([verdict_payload(c, by_id[c.id]) for c in checks], {"run_id": run_dir.name})
    (run_dir / "gate.json").write_text(json.dumps(doc), encoding="utf-8")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    cube = load_cube(MINI)
    root = tmp_path_factory.mktemp("robust")
    a = run_cube(cube, NoiseBlindModel(cube), variants="standard,jpeg:30,noise:0.1,flip")
    b = run_cube(cube, NoiseBlindModel(cube), variants="standard,jpeg:30")
    write_run_dir(root / "a", a, {"run_id": "a", "cube_spec": str(MINI)})
    _write_gate(root / "a", cube, a.records, "standard,jpeg:30,noise:0.1,flip")
    write_run_dir(root / "b", b, {"run_id": "b", "cube_spec": str(MINI)})
    return root / "a", root / "b"


def test_the_panel_shows_accuracy_agreement_and_the_strip(runs: tuple[Path, Path]) -> None:
    html = write_report_html(runs[0], cube=load_cube(MINI)).read_text()
    panel = html[html.index('id="robustness"'):html.index('id="worst"')]
    for text in ("jpeg:30", "noise:0.1", "flip", "agreement", "What was asked"):
        assert text in panel
    assert panel.count('class="rb-tile"') == 4  # standard and the three perturbations of one item
    # The gate's verdicts, as gate.json holds them: the report decides nothing itself.
    gate = {c["id"]: c["verdict"] for c in json.loads((runs[0] / "gate.json").read_text())["checks"]}
    assert gate["robustness/noise:0.1/overall"] == "fail" and gate["robustness/jpeg:30/overall"] == "pass"
    table = panel[panel.index('<table class="rb">'):].split("</table>")[0]
    assert '<span class="status fail">fail</span>' in table and '<span class="status pass">pass</span>' in table
    assert "a margin of 5.0 points" in panel
    assert (runs[0] / "plots" / "robustness.png").is_file()


def test_without_a_gate_run_the_panel_shows_no_verdict(runs: tuple[Path, Path]) -> None:
    html = write_report_html(runs[1], cube=load_cube(MINI)).read_text()
    panel = html[html.index('id="robustness"'):html.index('id="worst"')]
    table = panel[panel.index('<table class="rb">'):].split("</table>")[0]
    assert "jpeg:30" in table and 'class="status' not in table and "<td>–</td>" in table


def test_no_panel_without_perturbations(tmp_path: Path) -> None:
    cube = load_cube(MINI)
    write_run_dir(tmp_path / "s", run_cube(cube, NoiseBlindModel(cube)), {"run_id": "s", "cube_spec": str(MINI)})
    assert 'id="robustness"' not in write_report_html(tmp_path / "s", cube=cube).read_text()


def test_the_leaderboard_has_robustness_columns(runs: tuple[Path, Path], tmp_path: Path) -> None:
    result = leaderboard(list(runs), tmp_path / "board", plots=False)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "board" / "robustness.csv").read_text())))
    assert [r["run"] for r in rows] == ["a", "b"] or [r["run"] for r in rows] == ["b", "a"]
    by_run = {r["run"]: r for r in rows}
    assert by_run["a"]["noise:0.1_acc"] == "0.00" and float(by_run["a"]["noise:0.1_drop"]) > 70
    assert by_run["b"]["noise:0.1_acc"] == ""  # not asked in that run
    assert by_run["a"]["jpeg:30_drop"] == "0.00" and by_run["a"]["jpeg:30_agreement"] == "100.00"
    md = (tmp_path / "board" / "robustness.md").read_text()
    assert "`jpeg:30`" in md and "100% same" in md
    page = (tmp_path / "board" / "leaderboard.html").read_text()
    assert 'id="robustness"' in page
    assert list(result.robustness.variants) == ["jpeg:30", "noise:0.1", "flip"]
