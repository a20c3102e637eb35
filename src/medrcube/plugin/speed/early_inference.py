"""The gate's inference started at session start, before collection (docs/speed.md).

Without it the first request waits for pytest's collection, the policy's comparison with
the shipped default and the first test's setup. With it, once the session is built (the
cube loaded, the policy read, validated and its refusals checked, the adapters made) and
the pre-flight has passed, the inference runs on a thread of this process; the main
thread waits for the first answer (so that the first requests are not slowed by the
interpreter's lock), then completes the session and goes on with collection; the first
verdict waits for the thread's outcome. Every usage error is raised before the thread
starts, so a bad cube, policy or endpoint still stops the run before any request.

It starts only when nothing in the invocation can leave the gate's cases out of the run
(`blocker` says what would), decided from the options and the loaded plugins before
collection, conservatively: the packaged suite named by the arguments (`--pyargs
medrcube.suite`, or its directory), no selection (-k, -m, --deselect, --ignore, a node id,
--lf, --sw, Allure's label filters), no collect-only or setup-only mode, no xdist (the
controller asks nothing; a worker's share comes from the controller), no --sequential
(its looks decide what is asked), and no plugin or conftest this module does not know
that could deselect items at collection. A run whose gate cases are all deselected, or
that only collects, never asks the model.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from medrcube.plugin.options import SUITE_MODULE
from medrcube.plugin.progress import GateProgress
from medrcube.plugin.speed.frozen_heap import settle_heap
from medrcube.run.orphan import StopEvent

# Options that select or deselect test cases, or run none of them (pytest's and Allure's dests).
SELECTING = ("keyword", "markexpr", "deselect", "ignore", "ignore_glob", "lf", "stepwise", "stepwise_skip",
             "allure_severities", "allure_epics", "allure_features", "allure_stories", "allure_ids",
             "allure_labels")
NOT_RUNNING = ("collectonly", "setuponly", "setupplan", "showfixtures", "show_fixtures_per_test", "looponfail")
# Hooks by which a plugin or conftest can take items out of a run, or run none of them.
DESELECTING_HOOKS = ("pytest_collection_modifyitems", "pytest_deselected", "pytest_ignore_collect",
                     "pytest_collection", "pytest_runtestloop", "pytest_collect_directory")
# Their implementations known not to deselect when the options above are unset: pytest's
# own (selection by -k/-m/--deselect/--ignore/--lf), this plugin's (it drops only its own
# "not-requested" placeholders), Allure's (its label filters), hypothesis' (markers only),
# and the cache provider's last-failed/new-first plugins (reorder unless --lf).
KNOWN = ("_pytest.", "medrcube.plugin.hooks", "allure_pytest.plugin", "_hypothesis_pytestplugin")
# How long the main thread leaves the interpreter to the first requests before it goes on.
FIRST_ANSWER_WAIT_S = 1.0
# How often the main thread, waiting for the last answer, settles the heap (wait_settling): each
# settle collects what is alive and not yet frozen (at paper scale about 18,000 objects, a few
# ms of CPU, every 2 s); a bundled run's requests take about a second, so it settles once, after.
SETTLE_EVERY_S = 2.0
# How long the end of a run whose outcome was taken (its adapters, loop and store closed) is waited for
# before it is cancelled: it takes milliseconds; a hung connection's close must not hold the session's end.
END_WAIT_S = 30.0


def blocker(config: pytest.Config, session: Any) -> str | None:
    """Why this run's inference must wait for collection, or None if it may start now."""
    option = config.option
    for name in (*SELECTING, *NOT_RUNNING):
        if getattr(option, name, None):
            return f"--{name}"
    if getattr(option, "numprocesses", None) or getattr(option, "dist", "no") != "no":
        return "xdist"
    if session.options.sequential:
        return "--sequential"
    if not _packaged_suite_only(config):
        return "arguments other than the packaged suite"
    for hook in DESELECTING_HOOKS:
        for impl in getattr(config.pluginmanager.hook, hook).get_hookimpls():
            who = _identity(impl.plugin)
            if not who.startswith(KNOWN):
                return f"{hook} of {who}"
    return None


def _identity(plugin: Any) -> str:
    name = getattr(plugin, "__name__", None)  # a module: a plugin or a conftest
    if isinstance(name, str):
        return name
    return f"{type(plugin).__module__}.{type(plugin).__qualname__}"


def _packaged_suite_only(config: pytest.Config) -> bool:
    """The arguments are the packaged suite, whole: by package name with --pyargs, or by its directory."""
    args = [str(a) for a in config.args]
    if not args or any("::" in a for a in args):
        return False
    if config.option.pyargs and all(a == SUITE_MODULE for a in args):
        return True
    spec = importlib.util.find_spec(SUITE_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return False
    suite = Path(next(iter(spec.submodule_search_locations))).resolve()
    here = Path(config.invocation_params.dir)
    return all((here / a).resolve() == suite for a in args)


class _HeldSink:
    """The live line's sink, held while pytest writes its own output (collection): the
    latest counts are kept and written once the main thread waits for the answers."""

    def __init__(self, sink: Callable[[dict[str, Any], bool], None] | None) -> None:
        self.sink = sink
        self.open = False
        self.pending: tuple[dict[str, Any], bool] | None = None
        self._lock = threading.Lock()

    def __call__(self, counts: dict[str, Any], final: bool) -> None:
        with self._lock:
            if not self.open:
                self.pending = (counts, final)
                return
            self.pending = None
        if self.sink is not None:
            self.sink(counts, final)

    def release(self) -> None:
        with self._lock:
            self.open = True

    def flush(self) -> None:
        """What was held and not written since (called once the thread has ended)."""
        pending, self.pending = self.pending, None
        if pending is not None and self.sink is not None:
            self.sink(*pending)


class _Counting(GateProgress):
    """The run's progress, telling the main thread that an answer is in."""

    def __init__(self, sink: _HeldSink, answered: threading.Event) -> None:
        super().__init__(sink)
        self.answered = answered

    def advance(self, n: int = 1, *, error: bool = False, cached: bool = False, stopped: bool = False,
                unavailable: bool = False) -> None:
        super().advance(n, error=error, cached=cached, stopped=stopped, unavailable=unavailable)
        if self.done and not unavailable:  # an ask without its image is counted when planned: not an answer
            self.answered.set()


class EarlyInference:
    """The session's inference on a thread of its own, started at session start.

    The main thread waits for the run's outcome, not for the thread's end: once the run's records are
    the session's (`taken`), the verdicts begin while the thread closes the adapters, ends its event loop
    and closes the response store (its WAL checkpointed): about 20 ms of the time after the last answer
    under load at the paper's scale (docs/speed.md, "Nineteenth pass"). An error of that end, after the
    outcome was taken, no longer concerns the verdicts: `stop` waits for the end and warns of it."""

    def __init__(self, session: Any, progress: GateProgress | None) -> None:
        self.session = session
        self.ready = threading.Event()  # the outcome taken, or the thread ended
        self.taken = False
        self.answered = threading.Event()
        self.stopped = StopEvent()  # wakes the inference's loop when set (run/orphan.py): no polling
        self.sink = _HeldSink(progress.sink if progress is not None else None)
        session.progress = _Counting(self.sink, self.answered)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="medrcube-inference", daemon=True)

    def _run(self) -> None:
        try:
            self.session._infer(stop=self.stopped, taken=self._taken)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread, which raises it (wait)
            self.error = e
        finally:
            self.answered.set()
            self.ready.set()

    def _taken(self) -> None:
        self.taken = True
        self.ready.set()

    def start(self) -> None:
        self.thread.start()

    def wait_first_answer(self) -> None:
        self.answered.wait(FIRST_ANSWER_WAIT_S)

    def wait(self) -> None:
        """Wait for the inference's outcome (its records the session's) or its end; raise what it
        raised before its outcome was taken. While waiting, the heap is settled every
        SETTLE_EVERY_S (`wait_settling`)."""
        self.sink.release()
        wait_settling(self.ready, SETTLE_EVERY_S, settle_heap)
        self.sink.flush()
        if self.error is not None and not self.taken:
            raise self.error

    def stop(self) -> None:
        """End the inference: once its outcome was taken, wait for the end of its run (the adapters,
        the loop and the store closed; an error there is warned of, the verdicts stand); before
        that, cancel it: nobody will read its answers (the run ended without waiting for them,
        or completing the session failed)."""
        if self.taken:
            self.thread.join(END_WAIT_S)
        if self.thread.is_alive():
            self.stopped.set()
            self.thread.join()
        if self.taken and self.error is not None:
            import warnings

            warnings.warn(f"medrcube: the inference's end, after its answers were taken, failed: "
                          f"{type(self.error).__name__}: {self.error}", RuntimeWarning, stacklevel=1)
            self.error = None


def wait_settling(done: threading.Event, every: float, settle: Callable[[], None]) -> None:
    """Wait for `done`, calling `settle` every `every` seconds until then. The records and
    sums the answers make are garbage-collected and frozen a few seconds' worth at a time,
    on the waiting thread, instead of all at once after the last answer (plugin/speed/
    frozen_heap.py: at paper scale 0.15 s of the tail), so the settle after the run looks
    only at what the last seconds made."""
    while not done.wait(every):
        settle()


def start_if_allowed(config: pytest.Config, session: Any, progress: GateProgress | None) -> bool:
    """Start the session's inference now if nothing can deselect the gate's cases."""
    if blocker(config, session) is not None:
        return False
    session.early = EarlyInference(session, progress)
    session.early.start()
    return True
