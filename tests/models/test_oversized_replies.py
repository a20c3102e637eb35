"""A reply far longer than the request's token limit could produce (10 MiB with
finish_reason "stop" to a request capped at 32 tokens) is an oversized error: read no
further than the limit allows, never stored in full nor graded, and counted by the
endpoint's circuit breaker. Through the real openai client and the light client against
the scripted server."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from medrcube.cube import load_cube, write_jsonl
from medrcube.cube.item import Item
from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.models.openai_wire import REPLY_OVERHEAD_BYTES, reply_cap
from medrcube.records import Outcome
from medrcube.run.runner import run_cube
from medrcube.run.store import ResponseStore

HUGE = "A" * (10 * 1024 * 1024)


def _cube(tmp_path: Path, n: int) -> object:
    Image.new("L", (16, 16), 80).save(tmp_path / "x.png")
    items = [Item(id=f"o{i:02d}", dataset="o", image="x.png", question=f"Oversized {i}?", options=("a", "b", "c", "d"),
                  answer=0, task="Disease Diagnosis", modality="X-Ray", part="Chest") for i in range(n)]
    write_jsonl(items, tmp_path / "cube.jsonl")
    return load_cube(tmp_path / "cube.jsonl")


def test_the_cap_follows_the_token_limit() -> None:
    ceiling = 16 * 1024 * 1024
    assert reply_cap({"max_tokens": 32}, ceiling) < REPLY_OVERHEAD_BYTES + 64 * 1024
    assert reply_cap({"max_tokens": 32, "logprobs": True, "top_logprobs": 5}, ceiling) > reply_cap({"max_tokens": 32}, ceiling)
    assert reply_cap({}, ceiling) == ceiling  # no limit sent: the body cap alone
    assert reply_cap({"max_completion_tokens": 10**7}, ceiling) == ceiling


@pytest.mark.parametrize("transport", ["light", "sdk"])
def test_an_oversized_reply_is_an_error_not_stored_and_trips_the_breaker(tmp_path, scripted_server, monkeypatch,
                                                                          transport) -> None:
    monkeypatch.setenv("MEDRCUBE_TEST_KEY", "sk-test-not-a-real-key")
    cube = _cube(tmp_path, 12)
    scripted_server.set_script({"default": HUGE})
    adapter = OpenAIAdapter("big", base_url=scripted_server.base_url, api_key_env="MEDRCUBE_TEST_KEY",
                            params={"max_tokens": 32}, transport=transport, concurrency=1, max_retries=0,
                            breaker_failures=3, breaker_seconds=0.0)
    result = run_cube(cube, adapter, store=ResponseStore(tmp_path / "store"))
    records = [r for r in result.records if r.variant == "standard"]
    assert records and all(r.outcome is Outcome.ERROR for r in records)
    assert all(r.response is None or len(r.response) < 1024 for r in records)  # never the reply itself
    oversized = [r for r in records if r.error and "oversized reply" in r.error]
    assert len(oversized) >= 3
    # the breaker counted them: the run stopped with the rest unasked
    assert any("not asked" in (r.error or "") for r in records)  # the breaker opened: the rest not asked
    assert scripted_server.stats()["total"] < 12
    stored = sum(p.stat().st_size for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert stored < 2 * 1024 * 1024  # 12 replies of 10 MiB were never written
