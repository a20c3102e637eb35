"""Stop asking when the process that wanted the answers is gone.

An xdist worker runs the gate's inference for its controller. When the controller dies
(SIGKILL, an OOM kill, a CI runner cancelled), the worker is re-parented and nothing
reads its results any more, yet it kept sending requests for 10 to 13 s, billed by the
provider. `until_orphaned` runs a coroutine while polling the parent's pid; once the
parent changes, the coroutine is cancelled (its in-flight requests with it; claims
are released by the runner's own cleanup) and `OrphanedError` is raised. `until_stopped`
does the same when another thread of the process sets an event: at once for a `StopEvent`,
which wakes the loop when it is set, by polling for any other `threading.Event` (an
event loop cannot wait on one; the poll woke the loop 20 times a second for the whole
run, about 3.5 ms of CPU a second: docs/speed.md, "Sixth pass").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["OrphanedError", "StopEvent", "StoppedError", "until_orphaned", "until_stopped"]

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


class StopEvent(threading.Event):
    """A threading.Event that also calls back whoever subscribed when it is set (from any
    thread): `until_stopped` wakes its event loop with it instead of polling."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def set(self) -> None:
        super().set()
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` when the event is set (at once if it is); returns the unsubscribe."""
        with self._lock:
            self._callbacks.append(callback)
        if self.is_set():
            callback()

        def unsubscribe() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._callbacks.remove(callback)

        return unsubscribe


async def until_stopped(work: Awaitable[T], stop: threading.Event, *, poll_s: float = 0.05) -> T:
    """Await `work`; cancel it and raise StoppedError once `stop` is set by another thread
    (the gate's inference started before collection, in a run that ended without its
    answers: plugin/speed/early_inference.py). A `StopEvent` wakes the loop when it is set;
    any other event is polled every `poll_s` (an event loop cannot wait on it)."""

    def stopped() -> BaseException | None:
        return StoppedError("the run was stopped before its answers were needed") if stop.is_set() else None

    if not isinstance(stop, StopEvent):
        return await _cancelled_when(work, stopped, poll_s)
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing left to stop
            loop.call_soon_threadsafe(woken.set)

    unsubscribe = stop.subscribe(wake)
    try:
        return await _cancelled_when(work, stopped, None, woken)
    finally:
        unsubscribe()


async def _cancelled_when(work: Awaitable[T], why: Callable[[], BaseException | None], poll_s: float | None,
                          woken: asyncio.Event | None = None) -> T:
    """Await `work`, asking `why` every `poll_s` (first before any wait), or each time `woken`
    is set (`poll_s` None); once it gives an error, cancel `work`, wait for it to end and
    raise that error."""
    task = asyncio.ensure_future(work)
    waking = None if woken is None else asyncio.ensure_future(woken.wait())
    try:
        while (error := why()) is None:
            done, _ = await asyncio.wait({task} if waking is None else {task, waking}, timeout=poll_s,
                                         return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                return task.result()
            if woken is not None and waking is not None and waking.done():  # woken (the event was set): `why` says so next
                woken.clear()
                waking = asyncio.ensure_future(woken.wait())
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise error
    finally:
        if not task.done():
            task.cancel()
        if waking is not None and not waking.done():
            waking.cancel()
