"""Retries and pace for API adapters: the server's Retry-After read exactly, backoff with
full jitter, and a requests-per-minute token bucket. Pure, no HTTP: the OpenAI adapter
(openai_adapter.py) drives them.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["RetryPolicy", "TokenBucket", "parse_retry_after"]


# ---------------------------------------------------------------------------- retry policy


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `Retry-After` as
    seconds or as an HTTP date. None when absent or unreadable; never negative."""
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if value >= 0 and value == value:  # not NaN
                return value
        except ValueError:
            pass
    ra = lower.get("retry-after")
    if ra is None:
        return None
    ra = ra.strip()
    try:
        value = float(ra)
        return value if value >= 0 and value == value else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry and how long to wait in between.

    Backoff is "full jitter": a uniform draw in [0, min(cap, base * 2**(n-1))] before the
    n-th retry, so that many clients hit by the same outage do not return in lockstep. A
    server's Retry-After is obeyed as given, up to `retry_after_cap` seconds.
    """

    max_retries: int = 6
    base: float = 1.0
    cap: float = 60.0
    retry_after_cap: float = 120.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.base < 0 or self.cap < 0 or self.retry_after_cap < 0:
            raise ValueError(f"retry policy values must be >= 0: {self}")

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1

    def delay(self, retry: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap)
        ceiling = min(self.cap, self.base * (2 ** (retry - 1)))
        return (rng or random).uniform(0.0, ceiling)


# ---------------------------------------------------------------------------- rate limit


class TokenBucket:
    """Requests-per-minute limiter: a token bucket whose tokens may be reserved ahead.

    Each `reserve()` takes a token and returns how long the caller must wait for it
    (0 while the bucket holds tokens), so waiters queue in arrival order with no lock
    held across an await. `burst` tokens may go at once; by default one second's worth.
    `acquire` also paces the sends themselves (`conform`): a waiter woken late by a busy
    loop waits for a token of a second bucket over actual send times, so late waiters do
    not go out together. Thread-safe and independent of any event loop.
    """

    def __init__(self, rpm: float, *, burst: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < rpm < math.inf or (burst is not None and not 1 <= burst < math.inf):  # NaN fails both
            raise ValueError(f"rpm must be a finite positive number of requests per minute and burst >= 1, "
                             f"not rpm={rpm!r}, burst={burst!r}")
        self.rate = rpm / 60.0
        self.burst = float(burst) if burst is not None else max(1.0, self.rate)
        self._clock = clock
        self._tokens = self.burst
        self._stamp = clock()
        self._lock = threading.Lock()
        # The bucket's own schedule, on its clock: how many sends it granted and when the
        # first and the last of them were due. Tests check the rate on these (a loaded
        # machine can only make sends later than due, never earlier), not on wall gaps.
        self.granted = 0
        self.first_due: float | None = None
        self.last_due: float | None = None
        # A second bucket of the same size over the times sends actually go: a waiter the
        # loaded event loop wakes late must not go out together with the ones due after
        # it, whose slots have passed too (measured in benchmarks/rate_limiter.py).
        self._sent_tokens = self.burst
        self._sent_stamp = self._stamp

    def reserve(self) -> float:
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            self._tokens -= 1.0
            wait = 0.0 if self._tokens >= 0 else -self._tokens / self.rate
            self.granted += 1
            self.last_due = now + wait
            if self.first_due is None:
                self.first_due = self.last_due
            return wait

    def conform(self) -> float:
        """Take a token of the sends' own bucket now (0.0), or say how long until one."""
        with self._lock:
            now = self._clock()
            self._sent_tokens = min(self.burst, self._sent_tokens + (now - self._sent_stamp) * self.rate)
            self._sent_stamp = now
            if self._sent_tokens >= 1.0 - 1e-9:  # a send at its due time always conforms
                self._sent_tokens -= 1.0
                return 0.0
            return (1.0 - self._sent_tokens) / self.rate

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)
        while (late := self.conform()) > 0:
            await asyncio.sleep(late)
