"""The leakage audit in the gate's outputs (issue 28): gate.json names the cells the audit
flags, and each image-dependence check carries the options-only prior of its items."""

from __future__ import annotations


def test_gate_json_carries_leak_flags_and_the_prior_beside_the_blind_drop(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run("--variants=standard,blind", model=gate_ws.openai(gate_server))
    doc = gate_ws.gate_json()
    # The workspace cube's 12 modality items are all "X-Ray" with the same options: a
    # text-only prior names it every time, which the audit flags for the task.
    assert "Chest/X-Ray/Modality Recognition" in doc["leak_flags"]
    assert "options_prior" in doc["leak_flags"]["Chest/X-Ray/Modality Recognition"]
    entry = next(c for c in doc["checks"] if c["kind"] == "image_dependence")
    prior = entry["details"]["options_only_prior"]
    assert 0.0 <= prior <= 1.0
    result.stdout.fnmatch_lines([f"*image dependence: standard*options-only prior {prior:.3f}*"])


def test_checks_whose_items_leak_are_not_counted_toward_qualified(gate_ws, gate_server):
    """The workspace cube's modality items are answered by their options alone: the checks
    over them are reported, not required, and gate.json and the verdict block say why."""
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run(model=gate_ws.openai(gate_server))
    doc = gate_ws.gate_json()
    leaking = doc["leaking"]
    assert "cell/Chest/X-Ray/Modality Recognition" in leaking or any("Modality Recognition" in k for k in leaking)
    for cid, why in leaking.items():
        entry = next(c for c in doc["checks"] if c["id"] == cid)
        assert entry["required"] is False and entry["details"]["not_required"] == why
        assert doc["gate"]["not_required"][cid] == why and "leak" in why
    # a check over the diagnosis items alone does not leak and stays required
    dd = next(c for c in doc["checks"] if c["kind"] == "cell" and c["task"] == "Disease Diagnosis")
    assert dd["required"] is True and dd["id"] not in leaking
    result.stdout.fnmatch_lines(["*leaking: * required checks not counted toward QUALIFIED*"])


def _leaky_cube(ws) -> None:
    """Every item's answer is the one option no other item offers as a distractor: a
    text-only model answers all of them (the audit's options-only model at 1.000)."""
    import json

    items = []
    for i in range(60):
        items.append({"id": f"lk-{i:02d}", "dataset": "leaky", "image": f"img/cx{i % 12}.png",
                      "question": f"Case {i}: what is the most likely diagnosis on this chest radiograph?",
                      "options": ["pneumonia", "not applicable", "none of these", "unknown"][::1] if i % 2 else
                                 ["not applicable", "pneumonia", "none of these", "unknown"],
                      "answer": 0 if i % 2 else 1, "task": "Disease Diagnosis", "modality": "X-Ray", "part": "Chest"})
    ws.items = items
    with (ws.path / "cube" / "cube.jsonl").open("w", encoding="utf-8") as fh:
        for it in items:
            fh.write(json.dumps(it) + "\n")


def test_a_cube_whose_options_give_the_answer_is_never_qualified(gate_ws, gate_server, capsys):
    from medrcube.cli import main

    _leaky_cube(gate_ws)
    assert main(["validate", str(gate_ws.path / "cube" / "cube.jsonl"), "--audit"]) == 4  # a leak
    out = capsys.readouterr().out
    assert "options_prior" in out
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run(model=gate_ws.openai(gate_server))
    doc = gate_ws.gate_json()
    assert doc["verdict"] != "QUALIFIED" and result.ret == 11
    assert doc["leaking"] and all("leak" in why for why in doc["leaking"].values())
    result.stdout.fnmatch_lines(["*leaking: 3 required checks not counted toward QUALIFIED*",
                                 "*verdict: UNDECIDED*of 0 required checks*", "*gate: UNDECIDED*"])
