"""Bounded everything, through the real gate: replies far past the token limit end the
run UNDECIDED through the breaker with nothing stored in full, and a setting past its
ceiling is a usage error before anything is sent."""

from __future__ import annotations

import json

BOUNDED_YAML = """\
version: 1
models:
  huge:
    provider: openai
    model: test-model
    base_url: {url}
    api_key_env: MEDRCUBE_TEST_KEY
    concurrency: {concurrency}
    max_retries: 0
    breaker_failures: 3
    breaker_seconds: 0.5
    params: {{max_tokens: 32}}
"""


def test_replies_far_past_the_token_limit_end_the_gate_undecided(gate_ws, gate_server):
    gate_server.set_script({"default": "A" * (10 * 1024 * 1024)})  # 10 MiB, finish_reason "stop"
    (gate_ws.path / "models.yaml").write_text(BOUNDED_YAML.format(url=gate_server.base_url, concurrency=2),
                                              encoding="utf-8")
    result = gate_ws.run("--models-file=models.yaml", model="huge")
    assert result.ret == 11
    doc = gate_ws.gate_json()
    assert doc["verdict"] == "UNDECIDED" and "circuit open" in doc["aborted"]
    records = [json.loads(line) for line in (gate_ws.run_dirs()[-1] / "results.jsonl").read_text().splitlines()]
    assert not [r for r in records if r["outcome"] in ("correct", "wrong", "unparsed")]
    assert any("oversized reply" in (r.get("error") or "") for r in records)
    assert all(len(r.get("response") or "") < 1024 for r in records)
    stored = sum(p.stat().st_size for p in (gate_ws.path / ".medrcube").rglob("*") if p.is_file())
    assert stored < 4 * 1024 * 1024
    result.stdout.fnmatch_lines(["*oversized reply*"])


def test_a_concurrency_past_its_ceiling_is_refused_before_any_request(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    (gate_ws.path / "models.yaml").write_text(BOUNDED_YAML.format(url=gate_server.base_url, concurrency=1_000_000_000),
                                              encoding="utf-8")
    result = gate_ws.run("--models-file=models.yaml", model="huge")
    assert result.ret == 4  # a usage error
    result.stderr.fnmatch_lines(["*models.yaml*huge*'concurrency'*1e+09 is beyond the ceiling of 1024*"])
    assert gate_server.stats()["total"] == 0
