"""Every kind of gate check, passing and failing for the right reason, through the real
suite (tests_benchmark/) run by pytester against the scripted server or replay files.

Expectations updated for issue 12 (deliberately): a check without decisive evidence is
undecided (skipped "UNDECIDED", exit status 11), a decided failure exits 10, credibility
gates on grounding, regression is non-inferiority on the clustered paired drop."""

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
    # Every perception right: no pair with a wrong perception, grounding cannot be estimated.
    assert verdicts["credibility/overall"] == "undecided"
    # 3 items right: not decisive, and below min_n for the point rule: undecided.
    assert verdicts["Brain/MRI/Organ Recognition"] == "undecided"
    assert verdicts["slice/part/Brain"] == "undecided"
    result.stdout.fnmatch_lines(["SKIPPED *test_gate.py:*: UNDECIDED: Brain/MRI/Organ Recognition: undecided: *"])
    counts = outcomes(result)
    assert counts.get("failed", 0) == 0 and counts.get("errors", 0) == 0
    assert counts["passed"] == sum(v == "pass" for v in verdicts.values())
    # 27 items, one standard request each (the pre-flight is a GET /models, not counted here).
    assert gate_server.stats()["total"] == 27
    # Required checks undecided: the gate is UNDECIDED, never green.
    assert result.ret == 11
    assert gate_ws.gate_json()["gate"]["verdict"] == "UNDECIDED"


def test_wrong_answers_fail_with_numbers_and_worst_items(gate_ws, gate_server):
    wrong = gate_ws.ids("Disease Diagnosis")
    gate_server.set_script({"answer_key": gate_ws.answer_key(wrong=wrong)})
    result = gate_ws.run(model=gate_ws.openai(gate_server))

    verdicts = gate_ws.verdicts()
    assert verdicts["Chest/X-Ray/Disease Diagnosis"] == "fail"
    assert verdicts["Chest/X-Ray/Modality Recognition"] == "pass"
    assert verdicts["overall"] == "fail"  # 15 of 27 = 0.556 < 0.6 (point rule, n >= min_n)
    assert result.ret == 10  # NOT QUALIFIED
    text = result.stdout.str()
    # The failure names observed value, bound, n and the worst items with their question.
    assert "accuracy 0.000 (95% CI [0.000, 0.242]) against >= 0.600: missed" in text
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
    # Every perception wrong: no pair with a right one, so grounding (P(H|L) - P(H|not L))
    # cannot be estimated; the paper's numbers are still reported, and D equals what
    # independence predicts (12 * 12/12 * 12/12).
    assert entry["verdict"] == "undecided"
    assert entry["details"]["D"] == 12 and entry["details"]["A"] == 0
    assert entry["details"]["expected_D_independent"] == 12.0
    assert entry["details"]["rationality"] == 0.0  # rationality = 1 - D/(A+D)
    result.stdout.fnmatch_lines(["*rationality 0.000, luck rate 1.000, shortcut probability 1.000*"])
    # The diagnosis cell itself passes: the failure is the reasoning chain, not accuracy.
    assert gate_ws.verdicts()["Chest/X-Ray/Disease Diagnosis"] == "pass"


def test_image_dependence_fails_when_blind_equals_standard(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run("--variants=standard,blind", model=gate_ws.openai(gate_server))

    entry = next(c for c in gate_ws.gate_json()["checks"] if c["kind"] == "image_dependence")
    assert entry["verdict"] == "fail"
    assert entry["observed"] == 0.0  # the same answers with and without the image
    result.stdout.fnmatch_lines(["*standard - blind accuracy 0.000 (95% CI*) against >= 0.200: missed*"])
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
    result.stdout.fnmatch_lines(["*circular accuracy 0.000 (95% CI*) against >= 0.500: missed*"])


def test_regression_against_a_worse_candidate(gate_ws):
    good = gate_ws.replay("good.jsonl")
    bad = gate_ws.replay("bad.jsonl", wrong=gate_ws.ids("Disease Diagnosis"))

    # Baseline as a previous run directory.
    gate_ws.run(model=good)
    baseline_dir = gate_ws.run_dirs()[-1]
    assert (baseline_dir / "results.jsonl").is_file()
    result = gate_ws.run(f"--baseline={baseline_dir}", model=bad)
    verdicts = gate_ws.verdicts()
    # Per-cell regression checks are optional (cells_required: false): a decided failure
    # there still fails (the case and the gate), marked reported-only. 12 unchanged items cannot show non-inferiority
    # within 0.05 by the confidence bound; this policy's point rule passes them on the
    # estimate (no statistical guarantee, and the verdict says so).
    assert verdicts["regression/Chest/X-Ray/Disease Diagnosis"] == "fail"
    assert verdicts["regression/Chest/X-Ray/Modality Recognition"] == "pass"
    mr = next(c for c in gate_ws.gate_json()["checks"] if c["id"] == "regression/Chest/X-Ray/Modality Recognition")
    assert mr["decided_by"] == "point estimate" and "no statistical guarantee" in mr["guarantee"]
    assert verdicts["regression/Brain/MRI/Organ Recognition"] == "undecided"  # 3 shared items
    assert verdicts["regression/overall"] == "fail"  # 12 of 27 lost: decisively beyond the margin
    result.stdout.fnmatch_lines(["*drop against the baseline 0.444 (*) against <= 0.050: missed*"])
    assert outcomes(result).get("xfailed", 0) == 0 and result.ret == 10
    result.stdout.fnmatch_lines(["*reported-only: its failure fails the gate*",  # the case's failure, then the account
                                 "*regression/Chest/X-Ray/Disease Diagnosis [[]reported-only[]]: fail*"])

    # Baseline as a model spec; a candidate equal to its baseline never fails.
    gate_ws.run(f"--baseline={good}", model=good)
    verdicts = gate_ws.verdicts()
    assert verdicts["regression/Chest/X-Ray/Disease Diagnosis"] == "pass"
    assert verdicts["regression/overall"] == "pass"


def test_no_baseline_means_no_regression_case(gate_ws):
    # No placeholder test: the kind is deselected, and the summary says how to turn it on.
    result = gate_ws.run(model=gate_ws.replay("good.jsonl"))
    assert "test_regression" not in result.stdout.str()
    result.stdout.fnmatch_lines(["not requested: *regression (regression checks need --baseline*"])
    # regression, image dependence, position, the five kinds of issues 16 and 17
    # (robustness, agreement, finding, calibration, selective) and the two subgroup kinds
    # (subgroup, subgroup_gap) this policy and run do not ask
    assert result.parseoutcomes()["deselected"] == 10
    assert not any(c["kind"] == "regression" for c in gate_ws.gate_json()["checks"])


def test_gate_json_schema(gate_ws):
    gate_ws.run(model=gate_ws.replay("good.jsonl"))
    doc = gate_ws.gate_json()
    assert doc["schema_version"] == 2
    assert doc["cube"]["items"] == 27
    for c in doc["checks"]:
        for key in ("id", "kind", "bound", "rule", "observed", "interval", "n", "verdict", "message"):
            assert key in c, (c["id"], key)
    json.dumps(doc)  # plain JSON throughout
