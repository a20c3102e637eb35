"""The garbage collector paused while the gate's session is built (docs/speed.md).

Building the session before the first request (the imports of the session's modules, the
cube of up to thousands of items, the policy and its checks) makes several hundred
thousand objects that live the whole run, and the collector's thresholds, counting those
allocations, ran full collections of the whole heap in the middle of it: at paper scale
(7,626 items) two of them and a dozen younger ones, about 50 ms of CPU before the first
request, to find next to no garbage. So the collector is paused while the session is
built; then the objects made meanwhile are collected once (the young generation only,
where all of them are: garbage with a finalizer is still collected while pytest's
unraisable hook is installed) and the heap is frozen (`gc.freeze`), so that later
collections skip the session's objects, as `frozen_heap.settle_heap` does once inference
is done. The heap is given back to the collector at the run's end by
`frozen_heap.thaw_heap_after`'s cleanup, which a run registers only when nothing was
frozen before it: when something was, nothing is frozen here either (a process's own
freeze is its own) and the collector simply resumes. A session that fails to build (a
usage error) resumes the collector as it found it and freezes nothing.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from medrcube.plugin.speed.frozen_heap import collect_keeping_interrupts, collection_paused


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection inside (`frozen_heap.collection_paused`); on a normal exit,
    the young garbage collected and the heap frozen (module docstring) before the collector
    resumes as it was found."""
    with collection_paused():
        yield
        if gc.get_freeze_count() == 0:  # this run thaws the heap at its end (frozen_heap.thaw_heap_after)
            collect_keeping_interrupts(lambda: gc.collect(0))
            gc.freeze()
