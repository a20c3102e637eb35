"""The gate's start-up cache end to end (issue 29): a second run on the same cube reads the
leakage audit and the feasibility pass from the cache and gives the same verdicts and leak
flags; an entry planted to hide the cube's leak is ignored."""

from __future__ import annotations

import json


def _verdicts(doc):  # type: ignore[no-untyped-def]
    return {c["id"]: (c["verdict"], c.get("required")) for c in doc["checks"]}


def test_a_cache_hit_gives_the_same_verdict_and_a_planted_entry_is_ignored(gate_ws, gate_server, monkeypatch):
    cache = gate_ws.path / "user-cache"
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(cache))
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    model = gate_ws.openai(gate_server)
    gate_ws.run("--variants=standard,blind", model=model, store="store-1")
    first = gate_ws.gate_json()
    [audit_entry] = list((cache / "leak-audit").glob("*.json"))
    assert list((cache / "feasibility").glob("*.json"))
    written = audit_entry.read_bytes()

    gate_ws.run("--variants=standard,blind", model=model, store="store-2")
    second = gate_ws.gate_json()
    assert audit_entry.read_bytes() == written  # read, not recomputed and rewritten
    assert _verdicts(second) == _verdicts(first) and second["leak_flags"] == first["leak_flags"]
    assert first["leak_flags"]  # the workspace cube leaks (tests/plugin/test_plugin_leaks.py)

    doc = json.loads(written)
    doc["value"]["findings"] = []  # a clean audit for this leaky cube, without the cache's secret
    audit_entry.write_text(json.dumps(doc), encoding="utf-8")
    gate_ws.run("--variants=standard,blind", model=model, store="store-3")
    assert gate_ws.gate_json()["leak_flags"] == first["leak_flags"]
