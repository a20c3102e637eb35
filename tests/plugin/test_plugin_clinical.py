"""The kinds of issues 16 and 17 as pytest cases of the suite, through the real openai
client against the scripted server: robustness to image perturbations (failed under
noise, passed under JPEG), per-finding sensitivity, calibration without a confidence
(an optional undecided case), the abstain variant's utility; their summary lines and
Allure's "Robustness" and "Clinical depth" epics."""

from __future__ import annotations

import base64
import json
import re

from medrcube.gate.checks import Check, CheckKind
from medrcube.plugin.allure import behaviors, title
from medrcube.plugin.summary_kinds import kind_lines
from medrcube.testing.pixel_model import noise_sigma


def _policy(gate_ws) -> str:
    """The workspace's thresholds with the four new sections (rule point, as the rest of it)."""
    return (gate_ws.path / "thresholds.yaml").read_text(encoding="utf-8") + EXTRA


EXTRA = """\
robustness: {margin: 0.05, min_agreement: 0.9, rule: point, min_n: 10}
findings:
  min_sensitivity: {Pneumonia: 0.8}
  prevalence: {pneumonia: 0.1}
calibration: {max_ce: 0.1, required: false}
selective: {deferral_cost: 0.2, min_utility: 0.6, min_n: 10}
"""


def _image(body: dict) -> bytes | None:
    for message in body.get("messages", []):
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                url = part["image_url"]["url"]
                return base64.b64decode(re.sub(r"^data:[^,]*,", "", url))
    return None


def test_the_new_kinds_run_as_cases_of_the_suite(gate_ws, gate_server):
    (gate_ws.path / "thresholds.yaml").write_text(_policy(gate_ws), encoding="utf-8")
    by_question = {it["question"]: it for it in gate_ws.items}
    pneumonia = [it["id"] for it in gate_ws.items if it["task"] == "Disease Diagnosis" and it["answer"] == 0]

    def blinded_by_noise(prompt: str, body: dict) -> str | None:
        item = next((it for q, it in by_question.items() if q in prompt), None)
        data = _image(body)
        if item is None or data is None or noise_sigma(data) < 5.0:
            return None  # a clean image: the answer key decides
        return gate_ws.option_letter(prompt, item["options"][(item["answer"] + 1) % len(item["options"])])

    gate_server.set_script({"answer_key": gate_ws.answer_key(wrong=pneumonia)}, reply=blinded_by_noise)
    result = gate_ws.run("--variants=standard,noise:0.1,jpeg:70,abstain", model=gate_ws.openai(gate_server))
    v = gate_ws.verdicts()
    assert v["robustness/noise:0.1/overall"] == "fail"
    assert v["agreement/noise:0.1/overall"] == "fail"
    assert v["robustness/jpeg:70/overall"] == "pass"
    assert v["agreement/jpeg:70/overall"] == "pass"
    assert v["finding/pneumonia/Chest/X-Ray/Disease Diagnosis"] == "fail"  # 0 of 3 named
    assert v["calibration/overall"] == "undecided"  # the scripted server sends no logprobs here
    assert v["selective/utility/overall"] == "pass"
    doc = gate_ws.gate_json()
    cal = next(c for c in doc["checks"] if c["id"] == "calibration/overall")
    assert cal["required"] is False and "no graded record carries a confidence" in cal["message"]
    utility = next(c for c in doc["checks"] if c["id"] == "selective/utility/overall")
    assert utility["observed"] == 24 / 27 and utility["details"]["deferred"] == 0
    assert result.ret == 10
    # the site's prevalence and deferral cost reach metrics_summary.json too
    summary = json.loads((gate_ws.run_dirs()[-1] / "metrics_summary.json").read_text(encoding="utf-8"))
    cell = summary["findings"]["task=Disease Diagnosis|modality=X-Ray|parts=Chest"]
    assert cell["findings"]["pneumonia"]["site"]["prevalence"] == 0.1
    assert summary["abstention"]["costs"]["deferral"] == 0.2
    out = result.stdout.str()
    for line in ("robustness to image perturbations (drop; 1 fail, 1 pass): noise:0.1/overall 0.889",
                 "answer agreement under perturbations (agreement; 1 fail, 1 pass)",
                 "per-finding sensitivity (sensitivity; 1 fail): pneumonia/Chest/X-Ray/Disease Diagnosis 0.000",
                 "calibration (error; 1 undecided): calibration/overall n/a",
                 "selective prediction (value; 1 pass): utility/overall 0.889"):
        assert line in out, line
    assert "UNDECIDED (reported-only): calibration/overall" in out


def test_without_the_variants_the_new_kinds_say_how_to_turn_them_on(gate_ws):
    result = gate_ws.run(model=gate_ws.replay("good.jsonl"))
    result.stdout.fnmatch_lines(["not requested: *robustness (robustness checks need an image perturbation: "
                                 "--variants=standard,jpeg:30*selective (selective checks need "
                                 "--variants=standard,abstain*"])


def _check(kind: CheckKind, metric: str, **params) -> Check:
    return Check(id=f"{kind}/x", kind=kind, metric=metric, part="Chest", modality="X-Ray", task="Disease Diagnosis",
                 bound=0.8, rule="lower_bound", confidence=0.95, min_n=10, max_error_rate=0.05, params=params)


def test_allure_puts_the_clinical_kinds_under_a_clinical_depth_epic():
    finding = _check(CheckKind.FINDING, "sensitivity", finding="pneumothorax")
    assert behaviors(finding) == ("Clinical depth", "Per-finding sensitivity",
                                  "pneumothorax: Chest / X-Ray / Disease Diagnosis")
    assert title(finding) == "Per-finding sensitivity: pneumothorax: Chest / X-Ray / Disease Diagnosis"
    cal = _check(CheckKind.CALIBRATION, "calibration_ce")
    assert behaviors(cal) == ("Clinical depth", "Calibration", "Calibration error")
    sel = _check(CheckKind.SELECTIVE, "utility")
    assert behaviors(sel)[:2] == ("Clinical depth", "Selective prediction")
    rob = _check(CheckKind.ROBUSTNESS, "perturbation_drop", variant="jpeg:30")
    assert behaviors(rob) == ("Robustness", "jpeg:30", "Chest / X-Ray / Disease Diagnosis: accuracy")


def test_one_summary_line_per_kind():
    entries = [
        {"id": "robustness/jpeg:30/overall", "kind": "robustness", "verdict": "pass", "observed": 0.0,
         "interval": [-0.01, 0.02], "n": 300},
        {"id": "robustness/noise:0.1/overall", "kind": "robustness", "verdict": "fail", "observed": 0.5,
         "interval": [0.4, 0.6], "n": 300},
        {"id": "calibration/overall", "kind": "calibration", "verdict": "undecided", "observed": None,
         "interval": None, "n": 0},
    ]
    assert kind_lines(entries) == [
        "robustness to image perturbations (drop; 1 fail, 1 pass): jpeg:30/overall 0.000 [-0.010, 0.020] n=300 "
        "pass; noise:0.1/overall 0.500 [0.400, 0.600] n=300 fail",
        "calibration (error; 1 undecided): calibration/overall n/a n=0 undecided",
    ]
