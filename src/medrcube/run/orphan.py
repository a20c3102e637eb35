"""Stop asking when the process that wanted the answers is gone.

An xdist worker runs the gate's inference for its controller. When the controller dies
(SIGKILL, an OOM kill, a CI runner cancelled), the worker is re-parented and nothing
reads its results any more, yet it kept sending requests for 10 to 13 s, billed by the
provider. `until_orphaned` runs a coroutine while polling the parent's pid; once the
parent changes, the coroutine is cancelled (its in-flight requests with it; claims
are released by the runner's own cleanup) and `OrphanedError` is raised. `until_stopped`
does the same when another thread of the process sets an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["OrphanedError", "StoppedError", "until_orphaned", "until_stopped"]

T = TypeVar("T")


class OrphanedError(RuntimeError):
    """The parent process died: the work was stopped because nobody waits for it."""


async def until_orphaned(work: Awaitable[T], *, parent: int | None = None, poll_s: float = 0.2) -> T:
    """Await `work`; cancel it and raise OrphanedError as soon as the parent process
    (`parent`, by default the current one) is no longer this process's parent."""
    expected = os.getppid() if parent is None else parent

    def orphaned() -> BaseException | None:
        if os.getppid() == expected:
            return None
        return OrphanedError(f"the controlling process {expected} is gone; stopped asking the model")

    return await _cancelled_when(work, orphaned, poll_s)


class StoppedError(RuntimeError):
    """The caller set the stop event: nobody will read the answers."""


async def until_stopped(work: Awaitable[T], stop: threading.Event, *, poll_s: float = 0.05) -> T:
    """Await `work`; cancel it and raise StoppedError once `stop` is set by another thread
    (the gate's inference started before collection, in a run that ended without its
    answers: plugin/speed/early_inference.py). Polled, since a threading.Event cannot be awaited."""

    def stopped() -> BaseException | None:
        return StoppedError("the run was stopped before its answers were needed") if stop.is_set() else None

    return await _cancelled_when(work, stopped, poll_s)


async def _cancelled_when(work: Awaitable[T], why: Callable[[], BaseException | None], poll_s: float) -> T:
    """Await `work`, asking `why` every `poll_s` (first before any wait); once it gives an
    error, cancel `work`, wait for it to end and raise that error."""
    task = asyncio.ensure_future(work)
    try:
        while (error := why()) is None:
            done, _ = await asyncio.wait({task}, timeout=poll_s)
            if done:
                return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise error
    finally:
        if not task.done():
            task.cancel()
