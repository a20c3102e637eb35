"""Replies that commit to several options, through the real gate: a model that answers
every item with the right option and another one ("Answer: B, C") is read as committing
to none; its answers are unparsed, never graded as their first letter, and the gate does
not say QUALIFIED."""

from __future__ import annotations

import json

LETTERS = "ABCD"


def test_a_model_answering_with_two_options_is_never_qualified(gate_ws, gate_server):
    answers = {}
    for it in gate_ws.items:
        right, other = it["answer"], (it["answer"] + 1) % len(it["options"])
        first, second = sorted((right, other))  # the right letter first half of the time
        answers[it["question"]] = f"Answer: {LETTERS[first]}, {LETTERS[second]}"
    gate_server.set_script({"answers": answers})
    result = gate_ws.run(model=gate_ws.openai(gate_server))
    doc = gate_ws.gate_json()
    assert doc["verdict"] != "QUALIFIED" and result.ret in (10, 11)
    records = [json.loads(line) for line in (gate_ws.run_dirs()[-1] / "results.jsonl").read_text().splitlines()]
    assert records and all(r["outcome"] == "unparsed" and r["how"] == "ambiguous" for r in records)
