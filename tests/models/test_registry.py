"""Spec strings and models.yaml -> adapters (medrcube.models.registry, models_file)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from medrcube.models.base import ModelAdapter, Request
from medrcube.models.baselines import RandomAdapter
from medrcube.models.models_file import ModelsFileError, load_models_file, looks_like_secret
from medrcube.models.providers import names as provider_names
from medrcube.models.registry import ModelSpecError, RoundRobinAdapter, load_adapter

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "models.yaml"
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


# ---------------------------------------------------------------- spec grammar


@pytest.mark.parametrize(("spec", "seed"), [("random", 0), ("random:7", 7), (" random:-3 ", -3)])
def test_random_specs(spec: str, seed: int) -> None:
    adapter = load_adapter(spec)
    assert isinstance(adapter, RandomAdapter)
    assert isinstance(adapter, ModelAdapter)
    assert adapter.seed == seed
    assert adapter.fingerprint == f"random:{seed}"
    assert adapter.spec == spec.strip()


def test_random_bad_seed() -> None:
    with pytest.raises(ModelSpecError, match="seed must be an integer"):
        load_adapter("random:abc")


def test_concurrency_override_reaches_the_adapter() -> None:
    assert load_adapter("random", concurrency=3).concurrency == 3
    with pytest.raises(ModelSpecError, match="positive integer"):
        load_adapter("random", concurrency=0)


@pytest.mark.parametrize(("spec", "suggestion"), [("opneai:gpt-5.1", "openai"), ("rnadom:1", "random"), ("replya:x", "replay")])
def test_unknown_provider_did_you_mean(spec: str, suggestion: str) -> None:
    with pytest.raises(ModelSpecError) as err:
        load_adapter(spec)
    msg = str(err.value)
    assert f"did you mean {suggestion!r}" in msg
    for provider in provider_names():
        assert provider in msg


@pytest.mark.parametrize("spec", ["", "   ", "replay", "hf", "openai", "replay:", "hf:", "openai:@http://x", "prior:3"])
def test_malformed_specs(spec: str) -> None:
    with pytest.raises(ModelSpecError):
        load_adapter(spec)


def test_openai_base_url_must_be_a_url() -> None:
    with pytest.raises(ModelSpecError, match="base URL"):
        load_adapter("openai:gpt-5.1@localhost:8000")


@pytest.mark.parametrize("url", ["http://user:pa55-Word@127.0.0.1:9/v1", "https://tok3n-only@api.example.com/v1"])
def test_credentials_in_a_spec_base_url_are_refused_without_echoing_them(url: str, tmp_path: Path) -> None:
    with pytest.raises(ModelSpecError) as err:
        load_adapter(f"openai:m@{url}")
    message = str(err.value)
    assert "pa55-Word" not in message and "tok3n-only" not in message
    assert "holds credentials" in message and "[redacted]@" in message and "OPENAI_API_KEY" in message
    p = tmp_path / "models.yaml"
    p.write_text(f"models:\n  m:\n    provider: openai\n    model: x\n    base_urls: [http://a/v1, '{url}']\n")
    with pytest.raises(ModelsFileError) as err:
        load_models_file(p)
    message = str(err.value)
    assert "pa55-Word" not in message and "tok3n-only" not in message
    assert str(p) in message and "'base_urls' item 1 holds credentials" in message and "api_key_env" in message


def test_prior_needs_the_cube() -> None:
    with pytest.raises(ModelSpecError, match="cube="):
        load_adapter("prior")


def test_replay_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(ModelSpecError, match="nope.jsonl"):
        load_adapter(f"replay:{missing}")


def test_light_specs_do_not_import_torch() -> None:
    """Importing the registry and loading `random` must not pay for torch/transformers."""
    code = textwrap.dedent(
        """
        import asyncio, json, sys
        from medrcube.models.registry import load_adapter
        from medrcube.models.base import Request
        a = load_adapter("random:1")
        asyncio.run(a.generate([Request(key="k", item_id="i", prompt="p", options=("x", "y"))]))
        print(json.dumps(sorted(m for m in ("torch", "transformers", "openai") if m in sys.modules)))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


# ---------------------------------------------------------------- OpenAI-compatible specs

def _openai_cls():
    mod = pytest.importorskip("medrcube.models.openai_adapter")
    return mod.OpenAIAdapter


def test_openai_spec_with_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    cls = _openai_cls()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-real")
    a = load_adapter("openai:my-model@http://127.0.0.1:9/v1", concurrency=5)
    assert isinstance(a, cls)
    assert a.spec == "openai:my-model@http://127.0.0.1:9/v1"
    assert a.concurrency == 5
    assert "test-key-not-real" not in a.fingerprint


def test_bare_unknown_name_is_openai(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cls = _openai_cls()
    monkeypatch.chdir(tmp_path)  # no ./models.yaml here
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-real")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    a = load_adapter("gpt-5.1")
    assert isinstance(a, cls)
    assert a.spec == "gpt-5.1"


def test_missing_key_variable_is_a_spec_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _openai_cls()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelSpecError, match="OPENAI_API_KEY"):
        load_adapter("gpt-5.1")


@pytest.mark.parametrize(("spec", "meant"), [("randm", "random"), ("Random", "random"), ("prio", "prior"),
                                            ("replya", "replay")])
def test_a_typo_of_a_built_in_spec_says_did_you_mean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     spec: str, meant: str) -> None:
    # Not "OPENAI_API_KEY is not set": the name is a typo, not an OpenAI model id.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelSpecError, match=f"did you mean '{meant}'") as raised:
        load_adapter(spec)
    assert "OPENAI_API_KEY" not in str(raised.value) and f"openai:{spec}" in str(raised.value)


def test_near_miss_of_a_defined_name_warns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cls = _openai_cls()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-real")
    models = _write(tmp_path, "models:\n  qwen-vl-7b:\n    provider: openai\n    model: q\n")
    with pytest.warns(UserWarning, match="did you mean 'qwen-vl-7b'"):
        a = load_adapter("qwen-vl-7", models_file=models)
    assert isinstance(a, cls)


def test_models_yaml_entry_and_round_robin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cls = _openai_cls()
    monkeypatch.setenv("LOCAL_KEY", "test-key-not-real")
    _write(
        tmp_path,
        """
        models:
          local-vl:
            provider: openai
            model: org/vl-7b
            base_urls: [http://127.0.0.1:9/v1, http://127.0.0.1:10/v1]
            api_key_env: LOCAL_KEY
            params: {max_tokens: 16, temperature: null}
            concurrency: 6
        """,
    )
    monkeypatch.chdir(tmp_path)  # found as ./models.yaml
    a = load_adapter("local-vl")
    assert isinstance(a, RoundRobinAdapter)
    assert a.spec == "local-vl"
    assert len(a.children) == 2 and all(isinstance(c, cls) for c in a.children)
    assert a.concurrency == 6  # split 3 + 3, the total stays the bound
    b = load_adapter("local-vl", concurrency=5)
    assert sorted(c.concurrency for c in b.children) == [2, 3]


# ---------------------------------------------------------------- round robin over real adapters


def test_base_urls_spread_requests_over_real_servers(
    scripted_server_factory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """models.yaml with two base_urls, the real openai client, two local servers."""
    _openai_cls()
    one = scripted_server_factory({"default": "B"})
    two = scripted_server_factory({"default": "B"})
    monkeypatch.setenv("LOCAL_KEY", "test-key-not-real")
    models = _write(
        tmp_path,
        f"""
        models:
          pair:
            provider: openai
            model: tiny-vl
            base_urls: [{one.base_url}, {two.base_url}]
            api_key_env: LOCAL_KEY
            params: {{max_tokens: 5, temperature: null}}
            concurrency: 4
        """,
    )
    adapter = load_adapter("pair", models_file=models)
    reqs = [
        Request(key=str(i), item_id=f"i{i}", prompt=f"Question: q{i}?\nOptions:\nA. x\nB. y", options=("x", "y"))
        for i in range(10)
    ]

    async def go():
        try:
            return await adapter.generate(reqs)
        finally:
            await adapter.aclose()

    out = asyncio.run(go())
    assert [r.text for r in out] == ["B"] * 10
    s1, s2 = one.stats(), two.stats()
    assert (s1["total"], s2["total"]) == (5, 5)
    questions = {e["question"] for e in s1["requests"]} | {e["question"] for e in s2["requests"]}
    assert len(questions) == 10  # every request once, none twice
    for entry in s1["requests"] + s2["requests"]:
        assert entry["params"]["max_tokens"] == 5
        assert "temperature" not in entry["params"]  # null removed it
        assert entry["model"] == "tiny-vl"


def test_round_robin_deals_requests_in_turn() -> None:
    children = [RandomAdapter(1), RandomAdapter(1)]
    calls: list[list[int]] = [[], []]
    for k, c in enumerate(children):
        orig = c.generate

        async def spy(reqs, _orig=orig, _k=k):
            calls[_k].append(len(reqs))
            return await _orig(reqs)

        c.generate = spy  # type: ignore[method-assign]
    rr = RoundRobinAdapter(children, spec="x")
    assert rr.fingerprint == "random:1"
    reqs = [Request(key=str(i), item_id=str(i), prompt="p", options=("a", "b", "c")) for i in range(5)]
    out = asyncio.run(rr.generate(reqs))
    assert [r.text for r in out] == [r.text for r in asyncio.run(RandomAdapter(1).generate(reqs))]
    assert calls == [[3], [2]]
    asyncio.run(rr.generate(reqs[:1]))  # the turn continues where it stopped
    assert calls == [[3], [2, 1]]


# ---------------------------------------------------------------- models.yaml schema


def test_models_file_given_but_missing(tmp_path: Path) -> None:
    with pytest.raises(ModelsFileError, match="not found"):
        load_adapter("anything", models_file=tmp_path / "missing.yaml")


def test_valid_file_parses_every_key(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        """
        version: 1
        models:
          gpt:
            provider: openai
            model: gpt-5.1
            base_url: https://api.example.com/v1/
            api_key_env: MY_PROVIDER_API_KEY
            params: {max_completion_tokens: 2048, temperature: null}
            concurrency: 8
            rpm: 600
            timeout: 120
            max_retries: 3
            image_max_side: 768
          tiny:
            provider: hf
            model: ./models/tiny
            batch_size: 4
            dtype: float32
            device: cpu
        """,
    )
    entries = load_models_file(p)
    gpt, tiny = entries["gpt"], entries["tiny"]
    assert gpt.base_urls == ("https://api.example.com/v1",)
    assert gpt.params == {"max_completion_tokens": 2048, "temperature": None}
    assert (gpt.concurrency, gpt.rpm, gpt.timeout, gpt.max_retries, gpt.image_max_side) == (8, 600.0, 120.0, 3, 768)
    assert gpt.api_key_env == "MY_PROVIDER_API_KEY"
    assert (tiny.provider, tiny.batch_size, tiny.dtype, tiny.device) == ("hf", 4, "float32", "cpu")


@pytest.mark.parametrize(
    ("body", "needles"),
    [
        ("models:\n  m:\n    provider: openai\n    model: x\n    concurency: 4\n", ["'m'", "concurency", "did you mean 'concurrency'"]),
        ("models:\n  m:\n    provider: opnai\n    model: x\n", ["'m'", "provider", "did you mean 'openai'", "hf"]),
        ("models:\n  m:\n    provider: openai\n", ["'m'", "'model' is required"]),
        ("models:\n  m:\n    provider: hf\n    model: x\n    dtype: fp16\n", ["'dtype'", "float16", "bfloat16"]),
        ("models:\n  m:\n    provider: hf\n    model: x\n    rpm: 10\n", ["'rpm'", "applies to provider 'openai' or 'anthropic' or 'gemini' only"]),
        ("models:\n  m:\n    provider: openai\n    model: x\n    dtype: float32\n", ["'dtype'", "provider 'hf' or 'vllm' only"]),
        ("models:\n  m:\n    provider: openai\n    model: x\n    concurrency: 0\n", ["'concurrency'", ">= 1"]),
        ("models:\n  m:\n    provider: openai\n    model: x\n    concurrency: true\n", ["'concurrency'", "integer"]),
        ("models:\n  m:\n    provider: openai\n    model: x\n    base_url: localhost:8000\n", ["'base_url'", "http://"]),
        ("models:\n  m:\n    provider: openai\n    model: x\n    base_urls: []\n", ["'base_urls'", "non-empty"]),
        ("models:\n  m:\n    provider: openai\n    model: x\n    base_url: http://a\n    base_urls: [http://b]\n", ["not both"]),
        ("models:\n  m:\n    provider: openai\n    model: x\n    params: [1]\n", ["'params'", "mapping"]),
        ("models:\n  random:\n    provider: openai\n    model: x\n", ["'random'", "reserved"]),
        ("models:\n  a:b:\n    provider: openai\n    model: x\n", ["invalid name", "':'"]),
        ("modles:\n  m: {}\n", ["modles", "did you mean 'models'"]),
        ("- a\n- b\n", ["top level"]),
        ("models:\n  m: [1, 2]\n", ["'m'", "mapping"]),
        ("models: {m: {provider: openai, model: x\n", ["not valid YAML"]),
        ("models:\n  m: !!python/object/apply:os.system [echo hi]\n", ["not valid YAML"]),
    ],
)
def test_schema_errors_name_file_entry_and_key(tmp_path: Path, body: str, needles: list[str]) -> None:
    p = tmp_path / "models.yaml"
    p.write_text(body, encoding="utf-8")
    with pytest.raises(ModelsFileError) as err:
        load_models_file(p)
    msg = str(err.value)
    assert str(p) in msg
    for needle in needles:
        assert needle in msg, msg


SECRET = "sk-proj-" + "Ab3" * 12


@pytest.mark.parametrize(
    "entry",
    [
        f"provider: openai\n    model: x\n    api_key: {SECRET}\n",
        "provider: openai\n    model: x\n    api_key: ${OPENAI_API_KEY}\n",  # even a placeholder: the key is api_key_env
        f"provider: openai\n    model: x\n    params: {{extra_headers: {{Authorization: Bearer {SECRET}}}}}\n",
        "provider: openai\n    model: x\n    params: {token: abcdEFGH12345678abcd}\n",
        f"provider: openai\n    model: x\n    params: {{user: {SECRET}}}\n",
        f"provider: openai\n    model: x\n    api_key_env: {SECRET}\n",
    ],
)
def test_literal_secrets_are_refused_without_echoing_them(tmp_path: Path, entry: str) -> None:
    p = _write(tmp_path, "")
    p.write_text(f"models:\n  m:\n    {entry}", encoding="utf-8")
    with pytest.raises(ModelsFileError) as err:
        load_models_file(p)
    msg = str(err.value)
    assert "api_key_env" in msg
    assert "environment variable" in msg
    assert SECRET not in msg and "abcdEFGH12345678abcd" not in msg


@pytest.mark.parametrize(
    ("key", "value", "secret"),
    [
        ("max_tokens", 512, False),
        ("max_completion_tokens", 2048, False),
        ("stop_token", "<|endoftext|>", False),
        ("model", "hf_local_model", False),
        ("model", "meta-llama/Llama-3.2-11B-Vision-Instruct", False),
        ("token", "abcdEFGH12345678abcd", True),
        ("anything", SECRET, True),
        ("anything", "hf_" + "aB3" * 12, True),
    ],
)
def test_looks_like_secret(key: str, value: object, secret: bool) -> None:
    assert looks_like_secret(key, value) is secret


def test_example_file_is_valid() -> None:
    entries = load_models_file(REPO / "models.example.yaml")
    assert {e.provider for e in entries.values()} == {"openai", "anthropic", "gemini", "hf"}
    assert any(len(e.base_urls) == 2 for e in entries.values())
    assert any(e.params.get("temperature", 0) is None for e in entries.values())
