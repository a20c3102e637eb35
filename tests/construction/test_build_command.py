"""`medrcube build RECIPE`: the mini cube rebuilt through its recipe is the committed one; the
command says what leaves the machine before it starts, and fails with the fix on a bad recipe."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from medrcube.cli import main

REPO = Path(__file__).resolve().parents[2]


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_the_mini_recipe_rebuilds_the_committed_mini_cube(tmp_path: Path, mini_root: Path, capsys) -> None:
    out = tmp_path / "mini"
    assert main(["build", str(REPO / "recipes" / "mini.yaml"), "--out", str(out), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith("Nothing leaves this machine: the mini cube is rebuilt from installed packages")
    assert "mini cube written to" in captured.out and f"release layout: {out}" in captured.out
    built, committed = _files(out), _files(mini_root)
    assert sorted(built) == sorted(committed)
    changed = [n for n in built if built[n] != committed[n]]
    assert changed == [], f"the rebuild through recipes/mini.yaml differs from fixtures/mini in {changed}"


def test_a_site_build_prints_its_notice_summary_and_outputs(demo_root: Path, site_recipe, tmp_path: Path, capsys) -> None:
    recipe = site_recipe(demo_root, "site-cli", {"tasks": ["MR", "OR", "DD"], "export": {"hf": None}})
    assert main(["build", str(recipe), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("Nothing leaves this machine: no reviewer model in the recipe")
    # File-level problems go to the local console only, the file by its coded name (issue 27: no source path on the console).
    assert "demo-dicom file 1: not a usable DICOM file" in err and "README.txt" not in err and "demo-site" not in err
    assert out.startswith("cube 'site-cli':") and "build report:" in out and "Hugging Face" not in out
    report = json.loads((tmp_path / "o" / "report" / "build_report.json").read_text(encoding="utf-8"))
    assert {c["task"] for c in report["cells"]} == {"Modality Recognition", "Organ Recognition", "Disease Diagnosis"}
    assert "README.txt" not in json.dumps(report)


def test_errors_exit_non_zero_with_the_fix_and_write_nothing(demo_root: Path, site_recipe, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\nsources:\n  - kind: dicom-folder\n    path: .\n    slice: 2\n", encoding="utf-8")
    assert main(["build", str(bad), "--out", str(tmp_path / "o1")]) == 1
    assert "unknown key 'sources[0].slice' (did you mean 'slices'" in capsys.readouterr().err
    remote = site_recipe(demo_root, "site-remote-cli", {"review": {"model": "openai:m@https://api.example.com/v1"}})
    assert main(["build", str(remote), "--out", str(tmp_path / "o2")]) == 1
    err = capsys.readouterr().err
    assert "is remote (https://api.example.com/v1)" in err and "--allow-remote" in err
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()
    assert main(["build", str(REPO / "recipes" / "mini.yaml"), "--reviewer", "nonsense:x"]) == 1
    assert "--reviewer: unknown model provider 'nonsense'" in capsys.readouterr().err


def test_the_mini_builder_refuses_a_foreign_directory(tmp_path: Path, capsys) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "data.csv").write_text("keep me", encoding="utf-8")
    assert main(["build", str(REPO / "recipes" / "mini.yaml"), "--out", str(out), "--no-progress"]) == 1
    assert "not empty and not a previous mini-cube build" in capsys.readouterr().err
    assert (out / "data.csv").read_text(encoding="utf-8") == "keep me"
    shutil.rmtree(out)


def test_reviewer_errors_exit_2_and_a_dead_reviewer_stops_the_build(demo_root: Path, site_recipe, scripted_server_factory,
                                                                   tmp_path: Path, capsys) -> None:  # fmt: skip
    from medrcube.construction.stages.review import CODES

    ok = json.dumps({c: {"verdict": "pass", "reason": ""} for c in CODES})
    # Every diagnosis question is refused with a 400 (not retried by the adapter): those items are held out.
    server = scripted_server_factory({"default": ok, "faults": [{"fault": "status", "status": 400, "match": "most likely diagnosis"}]})
    recipe = site_recipe(demo_root, "site-errors", {"tasks": ["MR", "DD"], "export": {"hf": None},
                                                    "review": {"model": f"openai:r@{server.base_url}", "retries": 0}})  # fmt: skip
    assert main(["build", str(recipe), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "item(s) could not be reviewed (reviewer errors) and were held out" in err
    report = json.loads((tmp_path / "o" / "report" / "build_report.json").read_text(encoding="utf-8"))
    assert report["review"]["by_status"]["error"] > 0 and not any(c["task"] == "Disease Diagnosis" and c["selected"] for c in report["cells"])
    dead = scripted_server_factory({"faults": [{"fault": "status", "status": 400}]})
    recipe = site_recipe(demo_root, "site-dead", {"tasks": ["MR"], "review": {"model": f"openai:r@{dead.base_url}", "retries": 0}})
    assert main(["build", str(recipe), "--out", str(tmp_path / "d"), "--no-progress"]) == 1
    stopped = re.search(r"answered none of (\d+) item", capsys.readouterr().err)
    assert stopped is not None and dead.stats()["total"] == int(stopped.group(1))  # one round, each item asked once, no refill


def test_a_leak_fails_a_site_build_whose_recipe_says_so(demo_root: Path, site_recipe, tmp_path: Path, capsys) -> None:
    """The demo site's modality items (one answer per source) are a text shortcut: the
    audit stage lists it, writes audit.json into the build report and, under
    `audit: {on_leak: fail}`, exits 4 with the cube written."""
    recipe = site_recipe(demo_root, "site-leaky", {"tasks": ["MR"], "export": {"hf": None}, "audit": {"on_leak": "fail"}})
    assert main(["build", str(recipe), "--out", str(tmp_path / "o"), "--no-progress"]) == 4
    captured = capsys.readouterr()
    assert "LEAK task Modality Recognition: options_prior" in captured.out and "text shortcut" in captured.err
    doc = json.loads((tmp_path / "o" / "report" / "audit.json").read_text(encoding="utf-8"))
    assert doc["on_leak"] == "fail" and doc["ok"] is False and (tmp_path / "o" / "release").is_dir()
