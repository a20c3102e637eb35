"""The build's own questions never give away another item's answer on the same image, and the
leakage audit inside `medrcube build` fails a build whose texts still give answers away."""

from __future__ import annotations

import json
from pathlib import Path

from medrcube.cli import main
from medrcube.construction.stages import templates


def test_neutral_phrasing_leaves_out_what_a_sibling_answers() -> None:
    t = templates.check_templates({}, "test")
    assert templates.render(t, "diagnosis", modality="MRI", part="Brain") == "Based on this MR image of the brain, what is the most likely diagnosis?"
    assert templates.render(t, "diagnosis", modality="MRI", part="Brain", neutral=frozenset({"image", "region"})) == (
        "Based on this image, what is the most likely diagnosis?")  # fmt: skip
    severity = templates.render(t, "severity", modality="CT", part="Chest", finding="Pneumonia", neutral=frozenset({"finding"}))
    assert "pneumonia" not in severity.casefold() and "abnormality" in severity
    locate = templates.render(t, "roi_locate", modality="CT", part="Chest", finding="Nodule", neutral=frozenset(templates.NEUTRAL_FIELDS))
    assert locate.startswith("This image shows an abnormality.") and "chest" not in locate.casefold()


def test_a_default_build_rewrites_its_sibling_leaks_and_fails_on_the_rest(demo_root: Path, site_recipe, tmp_path: Path, capsys) -> None:
    """The demo archive with the default templates and the default `audit.on_leak` (text): no
    question names another item's answer (the build report lists the questions it phrased
    neutrally), and the text shortcuts the small archive still has (options-only priors) fail
    the build with exit 4, saying which kinds."""
    recipe = site_recipe(demo_root, "site-default-audit", {"export": {"hf": None, "report": "report", "release": "release"}}, drop=("audit", "templates"))
    assert main(["build", str(recipe), "--out", str(tmp_path / "o"), "--no-progress"]) == 4
    captured = capsys.readouterr()
    assert "text shortcut(s) that fail the build under `audit: {on_leak: text}`" in captured.err and "options_prior" in captured.err
    audit = json.loads((tmp_path / "o" / "report" / "audit.json").read_text(encoding="utf-8"))
    kinds = {f["kind"] for f in audit["findings"]}
    assert audit["on_leak"] == "text" and "sibling_named" not in kinds and "options_prior" in kinds
    report = json.loads((tmp_path / "o" / "report" / "build_report.json").read_text(encoding="utf-8"))
    rewritten = report["questions_phrased_neutrally"]
    assert rewritten and {"image", "region"} <= {f for r in rewritten for f in r["left_out"]}
    assert "phrased neutrally" in (tmp_path / "o" / "report" / "build_report.md").read_text(encoding="utf-8")
