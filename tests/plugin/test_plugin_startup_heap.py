"""The collector paused while the gate's session is built (plugin/speed/startup_heap.py):
no collection inside, the young garbage collected and the heap frozen at the end (only
when the run will give it back), the collector resumed as it was found, nothing frozen
after a failed build; in a real run, collection sees the collector running and the heap
frozen, and an in-process run leaves the heap as it found it. Also the pause of the verdicts
and the run directory (plugin/speed/frozen_heap.collection_paused): no automatic collection
inside, the collector resumed after as it was found."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from medrcube.plugin.speed.frozen_heap import collection_paused
from medrcube.plugin.speed.startup_heap import collector_paused


@pytest.fixture
def heap() -> Iterator[None]:
    """Whatever a test freezes is given back; the collector's state restored."""
    running = gc.isenabled()
    assert gc.get_freeze_count() == 0
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable() if running else gc.disable()


class _Node:
    def __init__(self, done: list[str]) -> None:
        self.other: _Node | None = None
        self.done = done

    def __del__(self) -> None:
        self.done.append("finalized")


def test_paused_inside_then_the_young_garbage_collected_and_the_heap_frozen(heap: None) -> None:
    done: list[str] = []
    with collector_paused():
        assert not gc.isenabled()
        a, b = _Node(done), _Node(done)
        a.other, b.other = b, a  # a cycle with finalizers: only the collector frees it
        del a, b
        kept = _Node([])
        alive = weakref.ref(kept)
        assert done == []
    assert done == ["finalized", "finalized"]  # collected before the freeze, not frozen with it
    assert gc.isenabled() and gc.get_freeze_count() > 0 and alive() is kept


def test_nothing_more_is_frozen_when_something_was_frozen_before(heap: None) -> None:
    gc.freeze()
    before = gc.get_freeze_count()
    with collector_paused():
        made = [[i] for i in range(1000)]  # lists: tracked by the collector, so freezable
    # Frozen objects can still die by reference count (the count then falls, as it did on
    # CI), so "nothing more frozen" is "not above"; freezing would add the thousand lists.
    assert gc.get_freeze_count() <= before and gc.isenabled() and made


def test_a_failed_build_resumes_the_collector_and_freezes_nothing(heap: None) -> None:
    with pytest.raises(pytest.UsageError), collector_paused():
        raise pytest.UsageError("--cube=nowhere: no such file")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_collector_off_before_stays_off(heap: None) -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


CONFTEST = '''
import gc


def pytest_collection_finish(session):
    session.config.heap_at_collection = (gc.isenabled(), gc.get_freeze_count())
'''

SITE_TEST = '''
def test_the_heap_at_collection(request):
    running, frozen = request.config.heap_at_collection
    assert running and frozen > 0
'''


def test_a_run_collects_with_the_collector_running_and_the_session_frozen(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    conftest = gate_ws.path / "tests_benchmark" / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + CONFTEST, encoding="utf-8")
    (gate_ws.path / "tests_benchmark" / "test_heap_at_collection.py").write_text(SITE_TEST, encoding="utf-8")
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    result = gate_ws.run("-rA", model=gate_ws.openai(gate_server))
    assert "PASSED tests_benchmark/test_heap_at_collection.py::test_the_heap_at_collection" in result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.stdout.str()[-3000:]
    assert gc.get_freeze_count() == 0 and gc.isenabled()  # given back after the in-process run


def test_an_in_process_run_refused_while_its_session_is_built_leaves_the_collector_running(gate_ws, gate_server):
    refused = gate_ws.run("--cube=does/not/exist", model=gate_ws.openai(gate_server))
    assert refused.ret == 4 and "does/not/exist" in refused.stderr.str()
    assert gc.get_freeze_count() == 0 and gc.isenabled()


@pytest.mark.parametrize("where", ["gc callback", "finalizer"])
def test_ctrl_c_during_a_collection_is_not_lost(heap: None, where: str) -> None:
    """Ctrl-C that comes while the gate collects (the heap settled as the answers come in,
    or before the first request) stops the run: without the guard, Python handles the
    signal inside a gc callback or a finalizer, whose KeyboardInterrupt is only "ignored",
    and the run would go on to its requests' timeouts and a verdict."""
    import os
    import signal

    from medrcube.plugin.speed.frozen_heap import collect_keeping_interrupts, settle_heap

    def interrupt(phase: str, info: dict) -> None:
        if phase == "start":
            os.kill(os.getpid(), signal.SIGINT)

    class Finalized:
        def __init__(self) -> None:
            self.cycle = self

        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)

    def arm() -> None:
        if where == "gc callback":
            gc.callbacks.append(interrupt)
        else:
            Finalized()  # garbage only a collection frees, with a finalizer

    # Only the collections under test: an automatic one while armed would send SIGINT into another
    # gc callback (hypothesis keeps one), where it is "ignored" and reported as a warning.
    gc.disable()  # the heap fixture restores the collector
    try:
        for collect in (lambda: collect_keeping_interrupts(gc.collect), settle_heap,
                        lambda: collect_keeping_interrupts(lambda: gc.collect(0))):
            arm()
            try:
                with pytest.raises(KeyboardInterrupt):
                    collect()
            finally:
                if interrupt in gc.callbacks:
                    gc.callbacks.remove(interrupt)
                gc.unfreeze()
    finally:
        if interrupt in gc.callbacks:
            gc.callbacks.remove(interrupt)


# -- the collector paused for the verdicts and the run directory (frozen_heap.collection_paused)


def test_no_automatic_collection_inside_and_the_collector_resumed_after(heap: None) -> None:
    young: list[int] = []

    def noted(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] < 2:
            young.append(info["generation"])

    gc.callbacks.append(noted)
    try:
        with collection_paused():
            assert not gc.isenabled()
            made = [[i] for i in range(50_000)]  # many tracked objects: collections would start
            during = len(young)
        assert gc.isenabled() and during == 0 and made
        more = [[i] for i in range(5_000)]
        assert young and more  # the collector runs again after the block
    finally:
        gc.callbacks.remove(noted)
    assert gc.get_freeze_count() == 0  # nothing frozen: the block only pauses


def test_a_collector_off_before_the_pause_stays_off_and_an_error_resumes_it(heap: None) -> None:
    gc.disable()
    with collection_paused():
        pass
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(ValueError), collection_paused():
        raise ValueError("a failed verdict")
    assert gc.isenabled()
