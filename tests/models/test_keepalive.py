"""Connections are kept alive at the configured concurrency (issue 29): the adapter opens
no more TCP connections than it has requests in flight, however many requests it sends."""

from __future__ import annotations

import asyncio

import pytest

from medrcube.models.base import Request
from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.run.prompts import render_prompt


@pytest.mark.parametrize("concurrency", [4, 40])
def test_connections_are_reused_at_the_configured_concurrency(scripted_server, monkeypatch, concurrency):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    scripted_server.set_script({"default": "A", "latency": 0.02})
    scripted_server.reset_stats()
    adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, concurrency=concurrency, timeout=10.0)
    requests = [Request(key=f"k{i}", item_id=f"i{i}", prompt=render_prompt(f"question {i}", ["yes", "no"]))
                for i in range(6 * concurrency)]

    async def go() -> None:
        try:
            out = await adapter.generate(requests)
        finally:
            await adapter.aclose()
        assert all(r.ok for r in out)

    asyncio.run(go())
    stats = scripted_server.stats(log=False)
    assert stats["total"] == len(requests)
    assert stats["max_in_flight"] > 1  # they did overlap
    # httpx's default pool keeps 20 alive: at 40 in flight it reconnected for many requests.
    assert stats["connections"] <= concurrency
