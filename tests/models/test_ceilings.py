"""Every numeric setting that sizes work or memory has a ceiling, and a value beyond it
is one usage error naming the file, the key, the value, the ceiling and the fix; the work
a setting sizes is created lazily (`concurrency: 1000000000` starts no task per slot)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PIL import Image

from medrcube.models.ceilings import CEILINGS, PARAM_CEILINGS
from medrcube.models.models_file import ModelsFileError, load_models_file

FILE_KEYS = ("concurrency", "rpm", "timeout", "max_retries", "image_max_side", "max_response_mib", "breaker_failures",
             "breaker_seconds", "retry_after_max", "retry_wait_max")


def _entry(tmp: Path, line: str) -> Path:
    path = tmp / "models.yaml"
    path.write_text("models:\n  site-model:\n    provider: openai\n    model: m\n    base_url: http://127.0.0.1:9/v1\n"
                    f"    {line}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("key", FILE_KEYS)
def test_models_yaml_refuses_a_value_past_its_ceiling(tmp_path: Path, key: str) -> None:
    ceiling = CEILINGS[key][0]
    value = int(ceiling * 10 + 1)
    path = _entry(tmp_path, f"{key}: {value}")
    with pytest.raises(ModelsFileError) as exc:
        load_models_file(path)
    message = str(exc.value)
    assert "\n" not in message
    for part in (str(path), "site-model", repr(key), f"{value:g}", f"ceiling of {ceiling:g}", "e.g."):
        assert part in message, (part, message)
    assert getattr(load_models_file(_entry(tmp_path, f"{key}: {int(ceiling)}"))["site-model"], key) == ceiling


@pytest.mark.parametrize("key", sorted(PARAM_CEILINGS))
def test_generation_parameters_that_size_a_reply_have_ceilings(tmp_path: Path, key: str) -> None:
    ceiling = PARAM_CEILINGS[key][0]
    path = _entry(tmp_path, f"params: {{{key}: {int(ceiling) + 1}}}")
    with pytest.raises(ModelsFileError) as exc:
        load_models_file(path)
    assert str(path) in str(exc.value) and f"params.{key}" in str(exc.value) and "ceiling" in str(exc.value)


@pytest.mark.parametrize(("option", "value", "ceiling"), [("--concurrency", "1000000000", "1024"),
                                                      ("--max-requests", "10000000000", "1e+09"),
                                                      ("--max-cost", "1e12", "1e+09")])
def test_the_gate_options_past_their_ceiling_are_a_usage_error(pytester: pytest.Pytester, option: str, value: str,
                                                              ceiling: str) -> None:
    from medrcube.plugin.options import read_options

    extra = () if option == "--concurrency" else ("--sequential",)
    config = pytester.parseconfig(*extra, f"{option}={value}")
    with pytest.raises(pytest.UsageError) as exc:
        read_options(config)
    message = str(exc.value)
    assert "\n" not in message and f"{option}={value}" in message and f"ceiling of {ceiling}" in message, message


def test_medrcube_run_refuses_a_concurrency_past_its_ceiling(capsys) -> None:
    from medrcube.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["run", "--model", "random:1", "--cube", "nowhere", "--concurrency", "5000"])
    assert exc.value.code == 2
    assert "--concurrency is 5000, beyond the ceiling of 1024" in capsys.readouterr().err


def test_a_huge_concurrency_starts_no_task_per_slot(tmp_path: Path, scripted_server, monkeypatch) -> None:
    """Asked with a concurrency of a billion, 8 items are answered with at most a few
    tasks alive: the workers are as many as the batches to ask, not the slots."""
    from medrcube.cube import load_cube, write_jsonl
    from medrcube.cube.item import Item
    from medrcube.models.openai_adapter import OpenAIAdapter
    from medrcube.run.runner import run_cube_async

    monkeypatch.setenv("MEDRCUBE_TEST_KEY", "sk-test-not-a-real-key")
    Image.new("L", (16, 16), 80).save(tmp_path / "x.png")
    items = [Item(id=f"c{i}", dataset="c", image="x.png", question=f"Lazy {i}?", options=("a", "b"), answer=0,
                  task="Disease Diagnosis", modality="X-Ray", part="Chest") for i in range(8)]
    write_jsonl(items, tmp_path / "cube.jsonl")
    cube = load_cube(tmp_path / "cube.jsonl")
    scripted_server.set_script({"default": "A", "latency": 0.2})
    adapter = OpenAIAdapter("lazy", base_url=scripted_server.base_url, api_key_env="MEDRCUBE_TEST_KEY",
                            concurrency=1_000_000_000)

    async def main() -> tuple[object, int]:
        peak = 0

        async def watch() -> None:
            nonlocal peak
            while True:
                peak = max(peak, len(asyncio.all_tasks()))
                await asyncio.sleep(0.01)

        watcher = asyncio.create_task(watch())
        try:
            result = await run_cube_async(cube, adapter)
        finally:
            watcher.cancel()
        return result, peak

    result, peak = asyncio.run(main())
    assert all(r.outcome.value == "correct" for r in result.records)  # type: ignore[attr-defined]
    assert peak < 100, peak
