"""The garbage collector around a gate run (docs/speed.md): the heap frozen once
inference is done, so pytest's end-of-run collections skip the cube and the records, and
given back to the collector after pytest's own end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest


def settle_heap() -> None:
    """Once inference is done (and, with the inference on its thread, once before, while the
    answers come in: plugin/speed/tail_ahead.py, so that this one looks at what was made since):
    collect the garbage (finalizers run, pytest's unraisable hook sees them as always),
    then freeze what is alive (gc.freeze), so that later collections skip the cube, the
    records and the modules. pytest collects the whole heap twice at its end
    (unraisableexception's unconfigure and cleanup): ~0.045 s of CPU each on the bundled
    cube, after the last answer (docs/speed.md); frozen, they look at what was
    made since. `thaw_heap_after`'s cleanup, run after pytest's own, gives the heap back to
    the collector: a process running pytest in-process (pytester) keeps collecting all of
    it."""
    import gc

    global _settled
    collect_keeping_interrupts(gc.collect)
    gc.freeze()
    _settled = True


def collect_keeping_interrupts(collect: Callable[[], object]) -> None:
    """`collect()` (a garbage collection) with Ctrl-C kept for after it. A signal that comes
    while the collector runs is handled at the next line of Python, which can be a gc
    callback (a library's) or a finalizer of the garbage: a KeyboardInterrupt raised there
    is only reported as "ignored", and the run would go on as if never interrupted (until
    its requests timed out, then give a verdict). So, on the main thread, SIGINT only notes
    itself during the collection and is raised again after it, to the handler it was meant
    for, where its KeyboardInterrupt stops the run as Ctrl-C does anywhere else."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        collect()  # signal handlers run on the main thread only
        return
    noted: list[int] = []
    try:
        before = signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    except ValueError:  # not the main interpreter's main thread
        collect()
        return
    try:
        collect()
    finally:
        signal.signal(signal.SIGINT, before)
    if noted:
        signal.raise_signal(signal.SIGINT)  # to the handler it was meant for: Python's raises KeyboardInterrupt here


@contextmanager
def collection_paused() -> Iterator[None]:
    """No automatic collection inside: for the verdicts and the run directory after the
    last answer. They read the frozen heap and make many short-lived objects, which their
    reference counts free; the collections their allocations set off found next to
    nothing to free and cost 30-50 ms of the verdicts' 250-275 at paper scale (144 young,
    13 middle and one full collection: docs/speed.md, "Seventh pass"). What survives is
    looked at by the next collection after the block; the collector is left as found."""
    import gc

    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()


_settled = False  # settle_heap ran in this process


def settle_heap_before_exit(config: pytest.Config) -> None:
    """Once more at the run's end (pytest_unconfigure, before pytest's own end-of-run
    collections), if the heap was settled after inference in this run and this run gives
    the heap back at its end (`thaw_heap_after`): the verdicts, the cases and the run
    directory made since are collected once here and frozen, so that pytest's two
    collections (unraisableexception's unconfigure and cleanup) find nothing new to trace:
    one full collection of what the tail made instead of two (docs/speed.md). Garbage is
    still collected while pytest's unraisable hook is installed, so a finalizer's error is
    reported as before. A run that never reached `thaw_heap_after` (a usage error in its
    configure) freezes nothing here: a process running pytest in-process again and again
    (pytester) would otherwise keep a heap frozen by an earlier run's flag."""
    global _settled
    if _settled and config.stash.get(_THAWS_AFTER, False):
        settle_heap()
    _settled = False


_THAWS_AFTER = pytest.StashKey[bool]()  # this run registered gc.unfreeze as its cleanup


def thaw_heap_after(config: pytest.Config) -> None:
    """Register `gc.unfreeze` as a cleanup of this pytest run (from pytest_configure, so it
    runs after pytest's own end-of-run collections), unless something was frozen before
    the run began: unfreezing is all or nothing, and a process's own freeze is its own."""
    import gc

    global _settled
    _settled = False  # nothing settled in this run yet (a process may run pytest more than once)
    if gc.get_freeze_count() == 0:
        config.add_cleanup(gc.unfreeze)
        config.stash[_THAWS_AFTER] = True
