"""The no-progress watchdog of a run: say so in the log when nothing has come back for a while.

A stalled server (accepts, never answers) holds every request until its timeout and its
retries; the circuit breaker (models/breaker.py) ends that in the end, but a reader of a
CI log deserves to know before then why the log went quiet. The watchdog warns once per
`stall_s` of silence, naming the model, how long, and how many asks are still open.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

__all__ = ["STALL_WARN_S", "Watchdog"]

log = logging.getLogger("medrcube.run")

STALL_WARN_S = 30.0


class Watchdog:
    """`progressed()` on every completed ask; `watch()` runs as a task and warns on silence."""

    def __init__(self, spec: str, open_asks: Callable[[], int], *, stall_s: float = STALL_WARN_S,
                 clock: Callable[[], float] = time.monotonic, say: Callable[[str], None] | None = None) -> None:
        self.spec = spec
        self.say = say  # also shown on the run's progress line (the gate's live line in a CI log)
        self.open_asks = open_asks
        self.stall_s = stall_s
        self._clock = clock
        self._last = clock()
        self.warnings = 0

    def progressed(self) -> None:
        self._last = self._clock()

    def check(self) -> str | None:
        """The warning due now, if any (one per `stall_s` of silence)."""
        silent = self._clock() - self._last
        if silent < self.stall_s * (self.warnings + 1):
            if silent < self.stall_s:
                self.warnings = 0
            return None
        self.warnings += 1
        return (f"no progress for {silent:.0f}s: no answer from {self.spec} while {self.open_asks()} asks are open; "
                f"the run goes on (a timeout, then the endpoint's circuit breaker, ends it if the server is gone)")

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(min(5.0, self.stall_s / 2))
            message = self.check()
            if message:
                log.warning("%s", message)
                if self.say is not None:
                    self.say(message)
