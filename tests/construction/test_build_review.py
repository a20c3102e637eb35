"""Quality review by a model: strict verdicts, retries, the response store, the pipeline's
hold-outs, agreement with a clinician, and the remote-reviewer guard, against the local
scripted OpenAI-compatible server."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from medrcube.construction.stages.production import Draft, OutImage
from medrcube.construction.stages.questions import Fact
from medrcube.construction.stages.review import (
    CODES,
    Reviewer,
    VerdictError,
    parse_verdict,
    pass_rates,
    review_prompt,
)
from medrcube.models.registry import load_adapter
from medrcube.testing.server import question_of


def verdict(fail: dict[str, str] | None = None) -> str:
    fail = fail or {}
    return json.dumps({c: {"verdict": "fail" if c in fail else "pass", "reason": fail.get(c, "")} for c in CODES})


def _draft(i: int, answer: str, distractors: tuple[str, ...]) -> Draft:
    fact = Fact("Disease Diagnosis", f"Case {i}: based on this radiograph of the chest, what is the most likely diagnosis?",
                answer, distractors, "labels CSV column 'dx'", "labels CSV")  # fmt: skip
    return Draft(f"d-{i:03d}-DD", "d", f"images/{i:03d}.png", f"d/{i:03d}", "Chest", "X-Ray", fact, "similar")


def _image(i: int) -> OutImage:
    import numpy as np

    from medrcube.construction.imageio import encode_png

    png = encode_png(np.full((8, 8), 10 * i, dtype=np.uint8))
    return OutImage("d", f"images/{i:03d}.png", png, hashlib.sha256(png).hexdigest(), f"d/{i:03d}")


def reply_for(prompt: str, body) -> str | None:
    """The scripted reviewer: its verdict depends on the intended answer shown in the prompt."""
    retry = "previous reply could not be used" in prompt
    if "Intended answer: A. Glioma" in prompt:
        return verdict({"2.3": "the distractors are implausible for this image", "1.4": "the lesion is not visible"})
    if "Intended answer: A. Meningioma" in prompt:
        return verdict() if retry else "Looks fine to me."
    if "Intended answer: A. Hepatocellular carcinoma" in prompt:
        return json.dumps({"1.1": {"verdict": "pass", "reason": ""}})  # always incomplete
    if "Intended answer: A. Multiple sclerosis" in prompt:
        return "```json\n" + verdict() + "\n```"  # a fenced object is tolerated
    return verdict()


# -- verdicts --------------------------------------------------------------------------------


def test_a_well_formed_verdict_parses_and_a_fail_keeps_its_reason() -> None:
    v = parse_verdict(verdict({"2.2": "options B and C overlap"}))
    assert not v.passed and v.failed == ("2.2",) and v.reasons["2.2"] == "options B and C overlap"
    assert parse_verdict("```json\n" + verdict() + "\n```").passed


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "empty reply"),
        ("The item is fine.", "not JSON"),
        ("[1, 2]", "not an object"),
        (json.dumps({c: {"verdict": "pass"} for c in CODES[:-1]}), "missing ['2.3']"),
        (json.dumps({**{c: {"verdict": "pass"} for c in CODES}, "3.1": {"verdict": "pass"}}), "unexpected ['3.1']"),
        (json.dumps({c: {"verdict": "ok"} for c in CODES}), "verdict is 'ok'"),
        (json.dumps({c: {"verdict": "fail", "reason": ""} for c in CODES}), "fails without a reason"),
        (json.dumps({c: "pass" for c in CODES}), "expected {\"verdict\""),
        ("Sure! " + verdict(), "not JSON"),
    ],
)
def test_malformed_verdicts_are_rejected_with_the_reason(text: str, problem: str) -> None:
    with pytest.raises(VerdictError, match=problem.replace("[", r"\[").replace("]", r"\]").replace("{", r"\{")):
        parse_verdict(text)


def test_the_prompt_states_every_principle_and_the_item() -> None:
    d = _draft(1, "Pneumonia", ("Pulmonary tuberculosis", "Lung abscess"))
    prompt = review_prompt(d)
    for name in ("Clinical and anatomical accuracy", "Logical coherence", "Unambiguous phrasing", "VQA suitability",
                 "Homogeneity", "Mutual exclusivity", "Plausibility of distractors"):  # fmt: skip
        assert name in prompt
    assert question_of(prompt) == d.fact.question
    assert "A. Pneumonia\nB. Pulmonary tuberculosis\nC. Lung abscess\nIntended answer: A. Pneumonia" in prompt
    assert "previous reply" not in prompt and "previous reply could not be used (not JSON" in review_prompt(d, 1, "not JSON")


# -- the reviewer against the scripted server ---------------------------------------------------


def test_review_passes_fails_retries_and_records(scripted_server_factory, tmp_path: Path) -> None:
    from medrcube.run.store import ResponseStore

    server = scripted_server_factory({"faults": [{"fault": "status", "status": 400, "match": "Case 6:"}]}, reply=reply_for)
    answers = ["Pneumonia", "Glioma", "Meningioma", "Hepatocellular carcinoma", "Multiple sclerosis", "Pneumonia"]
    drafts = [_draft(i + 1, a, ("Sarcoidosis", "Lung abscess")) for i, a in enumerate(answers)]
    images = {(im.dataset, im.key): im for im in (_image(i + 1) for i in range(len(drafts)))}
    adapter = load_adapter(f"openai:reviewer@{server.base_url}")
    with ResponseStore(tmp_path / "store") as store:
        out = Reviewer(adapter, retries=2, store=store).review(drafts, images)
    status = {i: o.status for i, o in out.items()}
    assert status == {"d-001-DD": "pass", "d-002-DD": "fail", "d-003-DD": "pass", "d-004-DD": "malformed",
                      "d-005-DD": "pass", "d-006-DD": "error"}  # fmt: skip
    assert out["d-003-DD"].attempts == 2 and out["d-003-DD"].raw == ["Looks fine to me."]
    assert out["d-004-DD"].attempts == 3 and len(out["d-004-DD"].raw) == 3
    assert out["d-002-DD"].reasons() == ["1.4 VQA suitability: the lesion is not visible",
                                         "2.3 Plausibility of distractors: the distractors are implausible for this image"]  # fmt: skip
    assert out["d-004-DD"].reasons()[0].startswith("review: malformed verdict after 3 attempt(s) (keys: missing")
    assert out["d-006-DD"].reasons()[0].startswith("review: reviewer error after 3 attempt(s)")
    # 1 + 1 + 2 + 3 + 1 answered requests, and the failing one asked three times: nothing more.
    stats = server.stats()
    assert stats["total"] == 11 and stats["images"]["with"] == 11
    rates = pass_rates(list(out.values()))
    assert rates["by_status"] == {"error": 1, "fail": 1, "malformed": 1, "pass": 3}
    assert rates["per_principle"]["2.3"] == {"name": "Plausibility of distractors", "passed": 3, "judged": 4, "rate": 0.75}

    # A second review through the same store asks only what was never answered (the errors).
    with ResponseStore(tmp_path / "store") as store:
        again = Reviewer(load_adapter(f"openai:reviewer@{server.base_url}"), retries=2, store=store)
        out2 = again.review(drafts, images)
    assert {i: o.status for i, o in out2.items()} == status
    assert again.requests_sent == 3 and again.cache_hits == 8 and server.stats()["total"] == 14


# -- the pipeline with a reviewer -----------------------------------------------------------------


def test_the_pipeline_holds_out_failing_items_with_reasons_and_refills(demo_root: Path, site_recipe, scripted_server_factory,
                                                                       tmp_path: Path) -> None:  # fmt: skip
    from medrcube.construction.pipeline import build, prepare

    server = scripted_server_factory(reply=reply_for)
    review = {"model": f"openai:reviewer@{server.base_url}", "retries": 1, "store": str(tmp_path / "store")}
    tasks = ["Modality Recognition", "Disease Diagnosis", "Organ Recognition"]
    recipe = site_recipe(demo_root, "site-reviewed", {"review": review, "tasks": tasks})
    plan = prepare(recipe, tmp_path / "out")
    assert plan.notice().startswith("Nothing leaves this machine: the reviewer openai:reviewer@http://127.0.0.1")
    result = build(recipe, tmp_path / "out")
    report = json.loads((result.report_dir / "build_report.json").read_text(encoding="utf-8"))
    held = report["held_out_by_reason"]
    assert held["1.4 VQA suitability"] == held["2.3 Plausibility of distractors"] > 0  # the glioma items
    assert held["review: malformed verdict after 2 attempt(s)"] > 0  # hepatocellular carcinoma
    exported = [r for p in sorted(result.release.glob("*/test.json")) for r in json.loads(p.read_text(encoding="utf-8"))]
    answers = {r["gt_answer"] for r in exported}
    assert "Glioma" not in answers and "Hepatocellular carcinoma" not in answers and "Meningioma" in answers
    assert all(r["meta"]["review"] == "pass" for r in exported)
    # Brain/MRI/DD lost its glioma items: the cell was refilled from the pool (meningioma, MS).
    cell = next(c for c in report["cells"] if (c["part"], c["modality"], c["task"]) == ("Brain", "MRI", "Disease Diagnosis"))
    assert cell["held_out"] >= 3 and cell["selected"] == min(cell["target"], cell["drafted"] - cell["held_out"])
    held_rows = [json.loads(line) for line in (result.report_dir / "held_out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["status"] for r in held_rows} == {"fail", "malformed"} and all(r["reasons"] for r in held_rows)
    reviews = [json.loads(line) for line in (result.report_dir / "review.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(reviews) == report["review"]["reviewed"] and report["review"]["per_principle"]["2.3"]["rate"] < 1
    assert {r["status"] for r in reviews} == {"pass", "fail", "malformed"}

    # A clinician judged three reviewed items: agrees on a glioma (fails 1.4 and 2.3) and a
    # meningioma (passes), disagrees on 2.3 for a pneumonia. The rebuild asks the reviewer nothing.
    verdicts = {r["id"]: r for r in reviews if r["verdicts"]}
    dd = {a: next(i for i in verdicts if i.endswith("-DD") and _answer(result, held_rows, i) == a) for a in ("Glioma", "Meningioma", "Pneumonia")}
    experts = tmp_path / "experts.csv"
    experts.write_text(
        "item_id,1.1,1.2,1.3,1.4,2.1,2.2,2.3\n"
        f"{dd['Glioma']},pass,pass,pass,fail,pass,pass,fail\n"
        f"{dd['Meningioma']},pass,pass,pass,pass,pass,pass,pass\n"
        f"{dd['Pneumonia']},pass,pass,pass,pass,pass,pass,fail\n",
        encoding="utf-8",
    )
    before = server.stats()["total"]
    recipe = site_recipe(demo_root, "site-reviewed", {"review": {**review, "expert_judgments": str(experts)}, "tasks": tasks})
    again = build(recipe, tmp_path / "out")
    assert server.stats()["total"] == before
    report = json.loads((again.report_dir / "build_report.json").read_text(encoding="utf-8"))
    agreement = report["agreement"]
    rows = {r["key"]: r for r in agreement["principles"]}
    assert rows["2.3"] == {"key": "2.3", "name": "Plausibility of distractors", "n": 3, "agree": 2, "agreement": 0.6667, "kappa": 0.4}
    assert rows["1.1"]["agree"] == 3 and rows["1.1"]["kappa"] is None  # everyone passes: kappa undefined
    assert agreement["sample_level"] == {"key": "sample", "name": "Sample level (all judgments equal)", "n": 3, "agree": 2,
                                         "agreement": 0.6667, "kappa": 0.4}  # fmt: skip
    assert "## Agreement with the clinician (Table 5 layout)" in (again.report_dir / "build_report.md").read_text(encoding="utf-8")


def _answer(result, held_rows: list[dict], item_id: str) -> str | None:
    """The intended answer of a reviewed item: from the export, else from the held-out list."""
    for r in held_rows:
        if r["id"] == item_id:
            return r["answer"]
    for p in result.release.glob("*/test.json"):
        for r in json.loads(p.read_text(encoding="utf-8")):
            if r["id"] == item_id:
                return r["gt_answer"]
    return None


def test_a_remote_reviewer_must_be_allowed_and_is_announced(demo_root: Path, site_recipe) -> None:
    from medrcube.construction.pipeline import BuildError, prepare

    recipe = site_recipe(demo_root, "site-remote", {"review": {"model": "openai:big-model@https://reviewer.example.org/v1"}})
    with pytest.raises(BuildError, match=r"remote \(https://reviewer.example.org/v1\).*allow_remote: true"):
        prepare(recipe)
    plan = prepare(recipe, allow_remote=True)
    assert plan.notice().startswith("REMOTE REVIEWER: openai:big-model@https://reviewer.example.org/v1 sends requests to "
                                    "https://reviewer.example.org/v1")  # fmt: skip
    assert "WILL leave this machine" in plan.notice()
    assert prepare(site_recipe(demo_root, "site-none", drop=("review",))).notice().startswith("Nothing leaves this machine")
