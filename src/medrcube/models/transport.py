"""What an API adapter keeps: its client and limits per event loop, its counters over its life.

Shared by the OpenAI adapter and the native adapters built on its transport
(openai_adapter.py, anthropic_adapter.py, gemini_adapter.py).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from medrcube.models.concurrency import AdaptiveLimit

__all__ = ["AdapterStats", "LoopState"]


@dataclass
class LoopState:
    """What belongs to one event loop: the HTTP client and the two semaphores.

    `semaphore` bounds HTTP requests in flight (`concurrency`, adapted to the server's latency). `admission` bounds the
    requests that hold a prepared payload (images encoded, waiting or in flight or backing
    off) to twice that: image preparation runs ahead of the wire so that it overlaps the
    model's latency, but a batch of thousands never holds thousands of encoded images.
    """

    loop: asyncio.AbstractEventLoop
    client: Any
    semaphore: AdaptiveLimit
    admission: asyncio.Semaphore


@dataclass
class AdapterStats:
    """Counters over the adapter's life (for logs and benchmarks)."""

    requests: int = 0
    attempts: int = 0
    retries: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    errors: Counter[str] = field(default_factory=Counter)
