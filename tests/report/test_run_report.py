"""report.html of a real run (`medrcube run` on a generated cube), with a gate.json made by
the gate's own functions: self-contained, verdict up front, heatmaps, worst items with
thumbnails; robust to missing optional files."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from medrcube.cli import main
from medrcube.cube import load_cube
from medrcube.report.html import standard_worst, write_report_html
from medrcube.rundir.files import read_results


@pytest.fixture(scope="module")
def run_dir(small_cube: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    code = main(["run", "--model", "random", "--cube", str(small_cube), "--variant", "standard,blind",
                 "--out", str(out), "--run-id", "rnd", "--no-store", "--no-progress"])
    assert code == 0
    return out / "rnd"


def _gate_document(cube_dir: Path, run: Path, *, only_passing: bool = False) -> dict:
    """gate.json as the plugin writes it, from the gate's own checks and verdicts."""
    from medrcube.gate.checks import build_checks
    from medrcube.gate.evaluate import evaluate
    from medrcube.gate.thresholds import load_policy
    from medrcube.plugin.options import packaged_thresholds
    from medrcube.plugin.summary import gate_document, verdict_payload
    from medrcube.run.variants import parse_variants

    cube = load_cube(cube_dir)
    records = read_results(run / "results.jsonl")
    policy = load_policy(packaged_thresholds())
    checks = build_checks(sorted({it.cell for it in cube.items}), policy,
                          variants=parse_variants("standard,blind"), has_baseline=False)
    questions = {it.id: it.question for it in cube.items}
    entries = [verdict_payload(c, evaluate(c, records), questions) for c in checks]
    if only_passing:
        entries = [e for e in entries if e["verdict"] == "pass"]  # QUALIFIED: every check passed
    return gate_document(entries, {"run_id": run.name, "model": "random",
                                   "cube": {"source": str(cube_dir), "fingerprint": cube.fingerprint}})


def _copy(run: Path, tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(run, dest)
    return dest


def _with_gate(run: Path, doc: dict) -> None:
    """gate.json written into the run directory and the directory sealed again, as the
    gate's controller does (the report refuses a sealed directory edited afterwards)."""
    from medrcube.rundir.seal import seal_run_dir

    (run / "gate.json").write_text(json.dumps(doc), encoding="utf-8")
    seal_run_dir(run, {})


def _assert_self_contained(page: str) -> None:
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page and "<link" not in page and "@import" not in page
    sources = re.findall(r'src="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/") for s in sources)
    assert re.findall(r"url\(", page) == []


def test_report_with_a_failed_gate(small_cube: Path, run_dir: Path, tmp_path: Path) -> None:
    run = _copy(run_dir, tmp_path, "with-gate")
    doc = _gate_document(small_cube, run)
    assert doc["passed"] is False  # a random model fails
    _with_gate(run, doc)
    path = write_report_html(run)
    assert path == run / "report.html"
    page = path.read_text(encoding="utf-8")
    _assert_self_contained(page)

    # The verdict comes first, with the counts.
    assert doc["gate"]["verdict"] == "NOT QUALIFIED"
    assert page.index("NOT QUALIFIED") < page.index("The cube: accuracy per cell")
    counts = doc["counts"]
    for status, words in (("pass", "passed"), ("fail", "failed"), ("undecided", "undecided"), ("error", "errors")):
        assert f"{counts[status]} {words}" in page
    failing = [c["id"] for c in doc["checks"] if c["verdict"] == "fail"]
    assert failing and f"<code>{failing[0]}</code>" in page

    # One heatmap per modality of the cube, with the gate's marks on the cells it failed.
    cube = load_cube(small_cube)
    modalities = {it.modality for it in cube.items}
    captions = re.findall(r'<table class="heat">\s*<caption>([^<]+)</caption>', page)
    assert set(captions) == modalities
    if any(c["kind"] == "cell" and c["verdict"] == "fail" for c in doc["checks"]):
        assert 'class="mark fail">✗<' in page
    # A cell is shaded by its verdict and interval: an undecided cell is pale grey, never
    # dark green, whatever its point estimate.
    from medrcube.report.plots import cell_colour

    assert cell_colour("undecided", 0.21, 1.0)[0] == cell_colour("undecided", 0.21, 1.0)[0]
    pale, strong = cell_colour("pass", 0.2, 1.0)[0], cell_colour("pass", 0.85, 0.95)[0]
    assert pale != strong and int(pale[1:3], 16) > int(strong[1:3], 16)  # wide interval: nearer white
    assert cell_colour("undecided", 0.9, 1.0)[0] != cell_colour("pass", 0.9, 1.0)[0]

    # The worst items, each with its image, question and the expected and given options.
    records = read_results(run / "results.jsonl")
    worst = standard_worst(records)
    assert worst
    items = {it.id: it for it in cube.items}
    for r in worst:
        assert f"<code>{r.item_id}</code>" in page
        assert items[r.item_id].question.replace("'", "&#39;") in page
    assert page.count('src="data:image/jpeg;base64,') == len(worst)
    assert page.count('<span class="tag">expected</span>') == len(worst)

    # Standard against blind, credibility, and the figures on disk as PNG and SVG.
    assert "With the image and without it" in page and "rationality" in page
    for name in ("cube_heatmaps", "accuracy_by_axis", "standard_vs_blind"):
        assert (run / "plots" / f"{name}.png").stat().st_size > 1000
        assert (run / "plots" / f"{name}.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_report_with_a_passed_gate_and_regression_rows(small_cube: Path, run_dir: Path, tmp_path: Path) -> None:
    run = _copy(run_dir, tmp_path, "passed")
    doc = _gate_document(small_cube, run, only_passing=True)
    doc["checks"].append({
        "id": "regression/overall", "kind": "regression", "verdict": "pass", "observed": 0.012,
        "interval": [-0.03, 0.05], "n": 120, "bound": 0.05, "message": "no regression",
        "details": {"counts": {"first_acc": 0.41, "second_acc": 0.422, "b": 9, "c": 11},
                    "mcnemar": {"p_first_worse": 0.41}},
    })
    from medrcube.plugin.summary import gate_document

    doc = gate_document(doc["checks"], {k: doc[k] for k in ("run_id", "model", "cube")})  # the verdict, again
    assert doc["verdict"] == "QUALIFIED"
    _with_gate(run, doc)
    page = write_report_html(run).read_text(encoding="utf-8")
    assert "QUALIFIED" in page and "NOT QUALIFIED" not in page and "UNDECIDED" not in page
    assert "Against the baseline" in page and "<code>regression/overall</code>" in page
    assert "41.0%" in page and "42.2%" in page


def test_report_without_optional_files_or_cube(run_dir: Path, tmp_path: Path) -> None:
    run = _copy(run_dir, tmp_path, "bare")
    for name in ("run.json", "metrics_summary.json", "manifest.json"):  # as written before the seal
        (run / name).unlink()
    page = write_report_html(run).read_text(encoding="utf-8")
    _assert_self_contained(page)
    assert "NO GATE RUN" in page
    assert "no run.json" in page
    assert "question not available" in page  # no cube: worst items without their questions
    assert "NOT SEALED" in page  # and it says its files cannot be verified
    assert 'src="data:image/jpeg' not in page


def test_a_changed_cube_is_not_used_for_thumbnails(small_cube: Path, run_dir: Path, tmp_path: Path) -> None:
    from medrcube.testing.gencube import generate_release_cube

    run = _copy(run_dir, tmp_path, "changed")
    other = load_cube(generate_release_cube(tmp_path / "other-cube", n_items=30, n_datasets=3, n_images=10,
                                            image_size=16, n_base_images=2, seed=9))
    page = write_report_html(run, cube=other).read_text(encoding="utf-8")
    assert "changed since" in page and 'src="data:image/jpeg' not in page


def test_a_gate_without_results_still_gets_its_verdict_page(small_cube: Path, run_dir: Path, tmp_path: Path) -> None:
    """When inference failed the gate leaves only gate.json: the page shows the verdict."""
    doc = _gate_document(small_cube, run_dir)
    run = tmp_path / "gate-only"
    run.mkdir()
    (run / "gate.json").write_text(json.dumps(doc), encoding="utf-8")
    page = write_report_html(run).read_text(encoding="utf-8")
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "NOT QUALIFIED" in page and "no results.jsonl" in page


def test_a_run_where_every_request_failed_gets_a_page_saying_so(tmp_path: Path) -> None:
    """No graded answer means no accuracy to draw: the figures used to fail ("Number of
    columns must be a positive integer, not 0") and the run most in need of reading had
    no report.html. The page is written, says why, and lists the most frequent errors."""
    from dataclasses import replace

    from report_builders import rec, write_run

    from medrcube.records import Outcome
    from medrcube.report.plots import axis_bars, cube_heatmaps, save

    cells = [("Chest", "X-Ray", "Disease Diagnosis"), ("Brain", "MRI", "Modality Recognition")]
    messages = ["HTTP 400 from http://127.0.0.1/v1: bad request", "connection refused"]
    records = [
        replace(rec(f"it-{i:02d}", cells[i % 2], outcome=Outcome.ERROR, variant=variant),
                error=messages[int(i % 3 == 0)])
        for i in range(9) for variant in ("standard", "blind")
    ]
    run = write_run(tmp_path, "all-failed", records)
    page = write_report_html(run).read_text(encoding="utf-8")
    assert "http://" not in page.replace(messages[0], "") and "<script" not in page
    assert "No graded answer: every request failed (9 errors)" in page
    # The errors, most frequent first, with their counts.
    assert page.index(messages[0]) < page.index(messages[1])
    assert re.search(rf"<code>{re.escape(messages[0])}</code></td><td>6<", page)
    assert re.search(rf"<code>{re.escape(messages[1])}</code></td><td>3<", page)
    # No accuracy figure or heatmap of nothing, and no claim that nothing was wrong.
    assert '<table class="heat">' not in page and "accuracy per axis" not in page
    assert "With the image and without it" not in page
    assert "No wrong answer" not in page and "no worst items" in page
    assert not (run / "plots" / "accuracy_by_axis.png").exists()

    # Items with a restricted image were never asked: every request sent still failed.
    restricted = replace(records[2], outcome=Outcome.UNAVAILABLE, error=None)
    page = write_report_html(write_run(tmp_path, "mixed", [records[0], restricted])).read_text(encoding="utf-8")
    assert "No graded answer: every request failed (1 error; 1 item not asked, image unavailable)" in page
    # Nothing asked at all: the page says how the records ended.
    page = write_report_html(write_run(tmp_path, "none-asked", [restricted])).read_text(encoding="utf-8")
    assert "No graded answer: 1 unavailable" in page and "every request failed" not in page

    # The figure functions themselves draw an empty state rather than raise.
    from medrcube.report.analysis import profile

    p = profile([r for r in records if r.variant == "standard"])
    assert save(axis_bars(p.axes, {a: list(p.axes[a]) for a in p.axes}), "axes", None).png[:4] == b"\x89PNG"
    assert save(cube_heatmaps([], [], [], {}, {}), "cube", None).png[:4] == b"\x89PNG"
