"""Every kind of gate check, passing and failing for the right reason, through the real
suite (tests_benchmark/) run by pytester against the scripted server or replay files."""

from __future__ import annotations

import json
import re


def outcomes(result) -> dict[str, int]:
    return result.parseoutcomes()


def test_correct_answers_pass_and_small_cells_skip(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run(model=gate_ws.openai(gate_server))

    verdicts = gate_ws.verdicts()
    assert verdicts["Chest/X-Ray/Disease Diagnosis"] == "pass"
    assert verdicts["Chest/X-Ray/Modality Recognition"] == "pass"
    assert verdicts["overall"] == "pass"
    assert verdicts["slice/part/Chest"] == "pass"
    assert verdicts["credibility/overall"] == "pass"
    # 3 items < min_n 10: insufficient evidence, never a pass or a fail.
    assert verdicts["Brain/MRI/Organ Recognition"] == "undecided"
    assert verdicts["slice/part/Brain"] == "undecided"
    result.stdout.fnmatch_lines(
        ["SKIPPED *test_gate.py:*: Brain/MRI/Organ Recognition: n=3 < min_n=10 graded items: insufficient evidence*"]
    )
    counts = outcomes(result)
    assert counts.get("failed", 0) == 0 and counts.get("errors", 0) == 0
    assert counts["passed"] == sum(v == "pass" for v in verdicts.values())
    # 27 items, one standard request each (the pre-flight is a GET /models, not counted here).
    assert gate_server.stats()["total"] == 27
    assert result.ret == 0


def test_wrong_answers_fail_with_numbers_and_worst_items(gate_ws, gate_server):
    wrong = gate_ws.ids("Disease Diagnosis")
    gate_server.set_script({"answer_key": gate_ws.answer_key(wrong=wrong)})
    result = gate_ws.run(model=gate_ws.openai(gate_server))

    verdicts = gate_ws.verdicts()
    assert verdicts["Chest/X-Ray/Disease Diagnosis"] == "fail"
    assert verdicts["Chest/X-Ray/Modality Recognition"] == "pass"
    assert verdicts["overall"] == "fail"  # 15 of 27 = 0.556 < 0.6
    assert result.ret == 1
    text = result.stdout.str()
    # The failure names observed value, bound, n and the worst items with their question.
    assert "accuracy 0.000 < bound 0.600" in text
    assert "0/12" in text
    assert re.search(r"- cx-dd-00 \(Chest/X-Ray/Disease Diagnosis\): expected A, answered B", text)
    assert "question of cx-dd-00: Case 0: what is the most likely diagnosis on this chest radiograph?" in text
    entry = next(c for c in gate_ws.gate_json()["checks"] if c["id"] == "Chest/X-Ray/Disease Diagnosis")
    assert entry["observed"] == 0.0 and entry["n"] == 12 and entry["bound"] == 0.6 and entry["rule"] == "point"
    assert len(entry["worst"]) == 5 and entry["worst"][0]["question"].startswith("Case 0:")


def test_credibility_fails_on_d_pairs(gate_ws):
    # High-level items right, their low-level partners on the same image wrong: group D.
    model = gate_ws.replay("d_pairs.jsonl", wrong=gate_ws.ids("Modality Recognition"))
    result = gate_ws.run(model=model)

    entry = next(c for c in gate_ws.gate_json()["checks"] if c["id"] == "credibility/overall")
    assert entry["verdict"] == "fail"
    assert entry["details"]["D"] == 12 and entry["details"]["A"] == 0
    assert entry["observed"] == 0.0  # rationality = 1 - D/(A+D)
    result.stdout.fnmatch_lines(["*rationality 0.000 < 0.700; shortcut probability 1.000 > 0.600*"])
    # The diagnosis cell itself passes: the failure is the reasoning chain, not accuracy.
    assert gate_ws.verdicts()["Chest/X-Ray/Disease Diagnosis"] == "pass"


def test_image_dependence_fails_when_blind_equals_standard(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run("--variants=standard,blind", model=gate_ws.openai(gate_server))

    entry = next(c for c in gate_ws.gate_json()["checks"] if c["kind"] == "image_dependence")
    assert entry["verdict"] == "fail"
    assert entry["observed"] == 0.0  # the same answers with and without the image
    result.stdout.fnmatch_lines(["*standard - blind accuracy: drop 0.000 < 0.200*"])
    assert gate_server.stats()["images"]["without"] == 27


def test_image_dependence_passes_when_the_image_matters(gate_ws, gate_server):
    by_question = {it["question"]: it for it in gate_ws.items}

    def blind_guess(prompt: str, body: dict) -> str | None:
        if "Question:" not in prompt:
            return None
        item = next((it for q, it in by_question.items() if q in prompt), None)
        if item is None or gate_ws.has_image(body):
            return None  # with the image: the answer key decides (right)
        wrong = item["options"][(item["answer"] + 1) % len(item["options"])]
        return gate_ws.option_letter(prompt, wrong)

    gate_server.set_script({"answer_key": gate_ws.answer_key()}, reply=blind_guess)
    gate_ws.run("--variants=standard,blind", model=gate_ws.openai(gate_server))

    entry = next(c for c in gate_ws.gate_json()["checks"] if c["kind"] == "image_dependence")
    assert entry["verdict"] == "pass"
    assert entry["observed"] == 1.0 and entry["n"] == 27


def test_position_robustness_pass_and_fail(gate_ws, gate_server):
    # Right in every rotation: the answer key follows the option, not the letter.
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    gate_ws.run("--variants=standard,shuffled:3", model=gate_ws.openai(gate_server), store="store-a")
    assert gate_ws.verdicts()["position/overall"] == "pass"

    # Always "A": right only where the answer happens to be first, never in all rotations.
    gate_server.set_script({"default": "A"})
    result = gate_ws.run("--variants=standard,shuffled:3", model=gate_ws.openai(gate_server), store="store-b")
    entry = next(c for c in gate_ws.gate_json()["checks"] if c["id"] == "position/overall")
    assert entry["verdict"] == "fail"
    assert entry["observed"] == 0.0
    result.stdout.fnmatch_lines(["*circular accuracy 0.000 < 0.500*"])


def test_regression_against_a_worse_candidate(gate_ws):
    good = gate_ws.replay("good.jsonl")
    bad = gate_ws.replay("bad.jsonl", wrong=gate_ws.ids("Disease Diagnosis"))

    # Baseline as a previous run directory.
    gate_ws.run(model=good)
    baseline_dir = gate_ws.run_dirs()[-1]
    assert (baseline_dir / "results.jsonl").is_file()
    result = gate_ws.run(f"--baseline={baseline_dir}", model=bad)
    verdicts = gate_ws.verdicts()
    assert verdicts["regression/Chest/X-Ray/Disease Diagnosis"] == "fail"
    assert verdicts["regression/Chest/X-Ray/Modality Recognition"] == "pass"  # unchanged answers
    assert verdicts["regression/Brain/MRI/Organ Recognition"] == "undecided"  # 3 shared items
    result.stdout.fnmatch_lines(["*regression: significantly worse (p=0.0002441 < alpha 0.05)*"])

    # Baseline as a model spec; a candidate equal to its baseline passes.
    gate_ws.run(f"--baseline={good}", model=good)
    verdicts = gate_ws.verdicts()
    assert verdicts["regression/Chest/X-Ray/Disease Diagnosis"] == "pass"
    assert verdicts["regression/overall"] == "pass"


def test_no_baseline_means_no_regression_case(gate_ws):
    # No placeholder test: the kind is deselected, and the summary says how to turn it on.
    result = gate_ws.run(model=gate_ws.replay("good.jsonl"))
    assert "test_regression" not in result.stdout.str()
    result.stdout.fnmatch_lines(["not requested: *regression (regression checks need --baseline*"])
    assert result.parseoutcomes()["deselected"] == 3  # regression, image dependence, position
    assert not any(c["kind"] == "regression" for c in gate_ws.gate_json()["checks"])


def test_gate_json_schema(gate_ws):
    gate_ws.run(model=gate_ws.replay("good.jsonl"))
    doc = gate_ws.gate_json()
    assert doc["schema_version"] == 1
    assert doc["cube"]["items"] == 27
    for c in doc["checks"]:
        for key in ("id", "kind", "bound", "rule", "observed", "interval", "n", "verdict", "message"):
            assert key in c, (c["id"], key)
    json.dumps(doc)  # plain JSON throughout
