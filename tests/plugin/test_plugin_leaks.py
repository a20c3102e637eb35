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
