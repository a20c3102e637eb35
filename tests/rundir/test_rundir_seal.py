"""The seal of a run directory and `medrcube verify` (issue 26), on directories written by
the real `medrcube run` (the random model, a generated cube, a real store)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from medrcube.cli import main
from medrcube.report.after_exit import wait_drawn
from medrcube.run import signing
from medrcube.rundir.seal import MANIFEST, PAGE_SEAL, seal_page, seal_run_dir, verify_run_dir
from medrcube.testing.gencube import generate_release_cube


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sealed")
    cube = generate_release_cube(root / "cube", n_items=24, n_datasets=2, n_images=8, image_size=16,
                                 n_base_images=2, seed=3)
    code = main(["run", "--model", "random:1", "--cube", str(cube), "--out", str(root / "reports"),
                 "--run-id", "r", "--response-store", str(root / "store"), "--no-progress"])
    assert code == 0
    run = root / "reports" / "r"
    # The page drawn after the run's exit by its own process (report/after_exit.py), before the
    # run is sealed again: else each test's copy would carry the placeholder, and `verify`
    # waits for a page no process is drawing any more (60 s).
    assert wait_drawn(run) == "drawn"
    (run / "thresholds.yaml").write_text("version: 1\noverall: 0.5\n", encoding="utf-8")  # a policy on record
    seal_run_dir(run, json.loads((run / MANIFEST).read_text(encoding="utf-8"))["identity"])
    seal_page(run)  # the page belongs to the run's seal, so it is sealed again after it (as a redraw does)
    return run


def _without_page(run_dir: Path) -> None:
    """The run directory without its page (report.html, plots/, their seal): for the tests
    that re-seal the run by hand, after which the page is no longer this run's."""
    (run_dir / "report.html").unlink()
    (run_dir / PAGE_SEAL).unlink()
    shutil.rmtree(run_dir / "plots", ignore_errors=True)


@pytest.fixture
def run_dir(sealed: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(sealed, tmp_path / "run"))


def _verify(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["verify", str(path)])
    return code, capsys.readouterr().out


def test_an_untouched_run_verifies(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _verify(run_dir, capsys)
    assert code == 0 and ": verified, 4 files sealed, UNSIGNED" in out
    identity = verify_run_dir(run_dir).identity
    assert identity["cube_fingerprint"] and identity["model"]["spec"] == "random:1" and identity["medrcube_version"]


def _flip_one_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    i = data.index(b'"outcome": "') + len(b'"outcome": "')
    data[i] = ord("x") if data[i] != ord("x") else ord("y")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: _flip_one_byte(d / "results.jsonl"), "results.jsonl: changed after sealing"),
        (lambda d: (d / "run.json").write_text(
            (d / "run.json").read_text(encoding="utf-8").replace('"aborted": null', '"aborted": "edited"'),
            encoding="utf-8"), "run.json: changed after sealing"),
        (lambda d: (d / "metrics_summary.json").unlink(), "metrics_summary.json: removed after sealing"),
        (lambda d: (d / "thresholds.yaml").write_text("version: 1\noverall: 0.01\n", encoding="utf-8"),
         "thresholds.yaml: changed after sealing"),  # the policy swapped
        (lambda d: (d / "extra.jsonl").write_text("{}\n", encoding="utf-8"), "extra.jsonl: added after sealing"),
    ],
    ids=["one-byte-of-results", "run-json", "file-removed", "policy-swapped", "file-added"],
)
def test_each_edit_fails_naming_the_file(run_dir: Path, capsys: pytest.CaptureFixture[str], edit, expected) -> None:
    edit(run_dir)
    code, out = _verify(run_dir, capsys)
    assert code == 1 and "FAILED verification" in out and f"  {expected}" in out


def test_an_edited_verdict_in_gate_json_fails(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from medrcube.plugin.summary import gate_document

    _without_page(run_dir)
    doc = gate_document([], {"run_id": "r", "cube": {}, "provenance": None, "policy": None})
    (run_dir / "gate.json").write_text(json.dumps(doc), encoding="utf-8")
    seal_run_dir(run_dir, verify_run_dir(run_dir).identity)
    assert _verify(run_dir, capsys)[0] == 0
    doc["verdict"] = "QUALIFIED"
    (run_dir / "gate.json").write_text(json.dumps(doc), encoding="utf-8")
    code, out = _verify(run_dir, capsys)
    assert code == 1 and "  gate.json: changed after sealing" in out


def test_an_edited_manifest_fails(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
    manifest["files"]["results.jsonl"] = "0" * 64
    (run_dir / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    code, out = _verify(run_dir, capsys)
    assert code == 1 and "manifest.json: its signature does not verify" in out


def test_with_the_site_key_a_run_resealed_without_it_fails(
    run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_page(run_dir)
    monkeypatch.setenv(signing.KEY_ENV, "the-hospital-key")
    identity = verify_run_dir(run_dir).identity
    seal_run_dir(run_dir, identity)  # signed by the site
    code, out = _verify(run_dir, capsys)
    assert code == 0 and "signed with the site key (HMAC-SHA256)" in out
    # Someone without the key makes a wrong answer right and re-seals: the seal is then unsigned.
    results = run_dir / "results.jsonl"
    results.write_text(results.read_text(encoding="utf-8").replace('"outcome": "wrong"', '"outcome": "correct"', 1),
                       encoding="utf-8")
    monkeypatch.delenv(signing.KEY_ENV)
    seal_run_dir(run_dir, identity)
    assert _verify(run_dir, capsys)[0] == 0  # without the key, nothing tells it apart
    monkeypatch.setenv(signing.KEY_ENV, "the-hospital-key")
    code, out = _verify(run_dir, capsys)
    assert code == 1 and "sealed without the site key" in out
    # And one with another key: its HMAC does not verify under the site's.
    monkeypatch.setenv(signing.KEY_ENV, "a-vendor-key")
    seal_run_dir(run_dir, identity)
    monkeypatch.setenv(signing.KEY_ENV, "the-hospital-key")
    code, out = _verify(run_dir, capsys)
    assert code == 1 and "signature does not verify" in out and "another key" in out


def test_a_signed_run_without_the_key_set_is_not_verified(
    run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(signing.KEY_ENV, "k")
    seal_run_dir(run_dir, verify_run_dir(run_dir).identity)
    monkeypatch.delenv(signing.KEY_ENV)
    code, out = _verify(run_dir, capsys)
    assert code == 1 and "MEDRCUBE_SIGNING_KEY is not set here" in out


def test_an_unsealed_directory_fails_and_report_marks_it(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run_dir / MANIFEST).unlink()
    code, out = _verify(run_dir, capsys)
    assert code == 1 and "manifest.json: missing, the directory is not sealed" in out
    from medrcube.report.readers import read_run

    run = read_run(run_dir)
    assert run.seal == "not sealed" and any("NOT SEALED" in n for n in run.notes)
