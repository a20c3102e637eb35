"""N one-question requests sent at once through the real OpenAIAdapter (the `openai`
client), the probe of the wire-level benchmarks (drip_deadline.py, rate_limiter.py).

`ask` builds the adapter with the options under test (as models.yaml would set them),
sends the requests, closes the adapter and returns it with the answers and the client's
CPU and wall time around the asking (not the imports or the adapter's construction).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any


def ask(base_url: str, n: int, **options: Any) -> tuple[Any, list[Any], float, float]:
    """(adapter, answers, client CPU s, wall s) for n requests to `base_url` (ends in /v1)."""
    from medrcube.models.base import Request
    from medrcube.models.openai_adapter import OpenAIAdapter

    os.environ.setdefault("MEDRCUBE_BENCH_KEY", "sk-bench-not-a-key")
    adapter = OpenAIAdapter("bench", base_url=base_url, api_key_env="MEDRCUBE_BENCH_KEY", **options)
    requests = [Request(key=f"k{i}", item_id=f"i{i}", prompt=f"Question: q{i}\nOptions:\nA. a\nB. b") for i in range(n)]

    async def go() -> list[Any]:
        try:
            return await adapter.generate(requests)
        finally:
            await adapter.aclose()

    t0, w0 = time.process_time(), time.monotonic()
    out = asyncio.run(go())
    return adapter, out, time.process_time() - t0, time.monotonic() - w0
