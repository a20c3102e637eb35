"""The gate with a native adapter: a models.yaml entry of provider anthropic or gemini runs
the whole qualification through the adapter contract (pre-flight, inference, usage and
cost), against the scripted server speaking that provider's wire format.

Run in a subprocess: the SDKs import parts of their HTTP stack at the first request, and
an in-process pytester run would drop them from sys.modules afterwards (see conftest.py).
"""

from __future__ import annotations

import json

import pytest

KEY_ENV = "MEDRCUBE_TEST_NATIVE_KEY"


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_a_native_adapter_runs_the_gate_end_to_end(gate_ws, gate_server, provider, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-native-test-0123456789abcdef")
    gate_server.set_script({"answer_key": gate_ws.answer_key(), "models": ["test-model"]})
    (gate_ws.path / "models.yaml").write_text(
        f"version: 1\nmodels:\n  native:\n    provider: {provider}\n    model: test-model\n"
        f"    base_url: '{gate_server.base_url.removesuffix('/v1')}'\n    api_key_env: {KEY_ENV}\n"
        "    price: {prompt: 3.0, completion: 15.0, currency: USD}\n",
        encoding="utf-8",
    )
    result = gate_ws.run_subprocess("--models-file=models.yaml", model="native")
    doc = gate_ws.gate_json()
    stats = gate_server.stats()
    # Every item asked once over the provider's own route, with its key header, none graded as an error.
    assert stats["total"] == 27 and stats["auth"] == {"present": 27, "absent": 0}
    assert stats["other"].get("GET /v1beta/models" if provider == "gemini" else "GET /v1/models") == 1  # pre-flight
    usage = doc["usage"]["candidate"]
    assert usage["requests"] == 27 and usage["errors"] == 0 and usage["completion_tokens"] == 27
    assert usage["cost"] == pytest.approx((usage["prompt_tokens"] * 3.0 + usage["completion_tokens"] * 15.0) / 1e6)
    run_doc = json.loads((gate_ws.run_dirs()[-1] / "run.json").read_text(encoding="utf-8"))
    assert run_doc["usage"]["candidate"]["requests"] == 27
    result.stdout.fnmatch_lines(["*model native (served as test-model)*"])
    assert all(c["verdict"] != "error" for c in doc["checks"])
