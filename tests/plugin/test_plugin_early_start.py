"""The gate's inference started at session start, before collection (plugin/speed/early_inference.py).

The packaged suite run whole (`--pyargs medrcube.suite`) asks the model before pytest
collects; an invocation that may deselect the gate's cases, or only collects, asks
nothing until a case needs an answer (and nothing at all when none does); every usage
error still comes before the first request. Runs in process against the scripted server,
whose request count each test reads while pytest collects (a plugin object of the run).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from tests.plugin.conftest import THRESHOLDS

from medrcube.testing.server import ScriptedServer


class CountAtCollection:
    """Reads the server's request count when collection is done."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.at_collection: int | None = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.at_collection = self.server.stats(log=False)["total"]


def packaged(gate_ws: Any, server: ScriptedServer, *extra: str, store: str = ".medrcube",
             thresholds: str = "thresholds.yaml", cube: str = "cube/cube.jsonl") -> list[str]:
    return ["--pyargs", "medrcube.suite", f"--cube={cube}", f"--thresholds={thresholds}", "-p", "no:cacheprovider",
            "-p", "no:hypothesispytest", f"--response-store={store}", f"--model={gate_ws.openai(server)}", *extra]


def run(gate_ws: Any, server: ScriptedServer, *extra: str, **kw: str) -> tuple[pytest.RunResult, CountAtCollection]:
    seen = CountAtCollection(server)
    server.set_script({"answer_key": gate_ws.answer_key()})
    server.reset_stats()
    result = gate_ws.pytester.runpytest(*packaged(gate_ws, server, *extra, **kw), plugins=[seen])
    return result, seen


def test_the_packaged_suite_asks_before_collection_and_decides_as_a_late_start(gate_ws, gate_server) -> None:
    result, seen = run(gate_ws, gate_server, store="early")
    assert seen.at_collection is not None and seen.at_collection >= 1  # the first answer is in before collection
    stats = gate_server.stats(log=False)
    assert stats["total"] == len(gate_ws.items) and not stats["duplicates"]  # each item asked once
    early = gate_ws.verdicts()
    assert result.ret in (pytest.ExitCode.OK, 10, 11)
    # -k that selects every case: the inference waits for the first case, as before.
    result, seen = run(gate_ws, gate_server, "-k", "test_", store="late")
    assert seen.at_collection == 0
    assert gate_server.stats(log=False)["total"] == len(gate_ws.items)
    assert gate_ws.verdicts() == early


@pytest.mark.parametrize("extra", [("--co",), ("-k", "no_such_case"), ("-m", "slow"),
                                   ("--deselect", "medrcube/suite/test_gate.py::test_overall")])
def test_an_invocation_that_may_deselect_asks_nothing_before_a_case_needs_it(gate_ws, gate_server, extra) -> None:
    result, seen = run(gate_ws, gate_server, *extra)
    assert seen.at_collection == 0
    if extra[0] != "--deselect":  # collect-only, or every gate case deselected: never asked
        assert gate_server.stats(log=False)["total"] == 0, result.stdout.str()


def test_a_bad_cube_is_the_same_usage_error_and_asks_nothing(gate_ws, gate_server) -> None:
    result, _ = run(gate_ws, gate_server, cube="cube/missing.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot load the cube" in result.stderr.str()
    assert gate_server.stats(log=False)["total"] == 0


def test_a_policy_refused_at_chance_asks_nothing(gate_ws, gate_server) -> None:
    (gate_ws.path / "t.yaml").write_text("version: 1\noverall: {bound: 0.01, above_chance: 0}\n", encoding="utf-8")
    result, _ = run(gate_ws, gate_server, thresholds="t.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "is at or below chance" in result.stderr.str()
    assert gate_server.stats(log=False)["total"] == 0


async def _forever(cancelled: list[bool]) -> None:
    """A work that never ends by itself; notes its cancellation."""
    import asyncio

    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        cancelled.append(True)
        raise


def test_a_stopped_inference_ends_at_once_and_raises() -> None:
    """`until_stopped`: the event set from another thread cancels the work (run/orphan.py)."""
    import asyncio
    import threading

    from medrcube.run.orphan import StoppedError, until_stopped

    stop = threading.Event()
    cancelled: list[bool] = []
    threading.Timer(0.1, stop.set).start()
    with pytest.raises(StoppedError):
        asyncio.run(until_stopped(_forever(cancelled), stop))
    assert cancelled == [True]


@pytest.mark.timeout(60)  # a loop that polled at the hour asked would hang: a failure, not a wait
def test_a_stop_event_wakes_the_loop_without_polling() -> None:
    """`until_stopped` with a `StopEvent` (what the gate's early inference uses) is woken
    by the event itself: with a poll of an hour, setting it from another thread still
    cancels the work at once (a poll would hang here until the test's timeout); set
    before the work starts, nothing of the work runs past its first step; and a work that
    ends by itself returns its value, its subscription gone."""
    import asyncio
    import threading

    from medrcube.run.orphan import StopEvent, StoppedError, until_stopped

    stop = StopEvent()
    cancelled: list[bool] = []
    threading.Timer(0.1, stop.set).start()
    with pytest.raises(StoppedError):
        asyncio.run(until_stopped(_forever(cancelled), stop, poll_s=3600))
    assert cancelled == [True]
    with pytest.raises(StoppedError):  # already set
        asyncio.run(until_stopped(_forever(cancelled), stop, poll_s=3600))

    other = StopEvent()

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert asyncio.run(until_stopped(answer(), other, poll_s=3600)) == 42
    assert other._callbacks == []
    other.set()  # after the loop closed: no callback left to call into it


def test_a_policy_that_refuses_undecidable_checks_asks_nothing(gate_ws, gate_server) -> None:
    """`when_undecidable: refuse`: the feasibility pass runs before the first request."""
    text = THRESHOLDS + "feasibility: {when_undecidable: refuse, min_images: 1000}\n"
    (gate_ws.path / "t.yaml").write_text(text, encoding="utf-8")
    result, _ = run(gate_ws, gate_server, thresholds="t.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "required checks cannot be decided on this cube" in result.stderr.str()
    assert gate_server.stats(log=False)["total"] == 0


def test_the_leakage_audit_read_while_the_answers_come_in_is_the_one_computed_after(gate_ws, gate_server,
                                                                                     tmp_path, monkeypatch) -> None:
    """plugin/speed/tail_ahead.py: with the inference on its thread, the main thread reads the cached
    leakage audit while it waits; gate.json's leak flags are those of a run that computed
    the audit after its last answer (the first, cache empty) and of a late start."""
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path / "cache"))
    flags = []
    for store, extra in (("first", ()), ("second", ()), ("late", ("-k", "test_"))):
        result, _ = run(gate_ws, gate_server, *extra, store=store)
        assert result.ret in (pytest.ExitCode.OK, 10, 11), result.stdout.str()[-2000:]
        flags.append(gate_ws.gate_json()["leak_flags"])
    assert flags[0] and flags[0] == flags[1] == flags[2]
    assert list((tmp_path / "cache" / "leak-audit").glob("*.json"))  # stored by the first run, read by the next


def test_the_first_answer_wait_is_not_ended_by_asks_counted_unavailable() -> None:
    # The main thread leaves the interpreter to the first requests until an answer is in; an
    # ask whose image is restricted is counted when it is planned, before any request is out.
    import threading

    from medrcube.plugin.speed.early_inference import _Counting, _HeldSink

    answered = threading.Event()
    progress = _Counting(_HeldSink(None), answered)
    progress.begin(10)
    progress.advance(3, unavailable=True)
    assert not answered.is_set() and progress.done == 3
    progress.advance(1, error=True)  # a failed request is an outcome: the wait ends
    assert answered.is_set()


class _RunWithAnEnd:
    """What EarlyInference asks of the session (`_infer(stop=, taken=)`): a run whose outcome is taken, then
    whose end (the adapters, the loop and the store closed, here held until `end` is set) comes later."""

    def __init__(self, fail_before: bool = False, fail_after: bool = False) -> None:
        self.progress = None
        self.end = threading.Event()
        self.fail_before, self.fail_after = fail_before, fail_after

    def _infer(self, stop: Any = None, taken: Any = None) -> None:
        if self.fail_before:
            raise RuntimeError("the endpoint refused the key")
        taken()
        self.end.wait(10)
        if self.fail_after:
            raise RuntimeError("closing the store failed")


def test_the_verdicts_wait_for_the_run_s_outcome_not_its_end() -> None:
    """The main thread goes on once the run's outcome is the session's while the run's end goes on; the
    session's end waits for it and warns of an error there (the verdicts stand); an error before the outcome
    is raised as before."""
    from medrcube.plugin.speed.early_inference import EarlyInference

    session = _RunWithAnEnd(fail_after=True)
    early = EarlyInference(session, None)
    early.start()
    early.wait()  # returns with the run's end still to come
    assert early.taken and early.thread.is_alive()
    session.end.set()
    with pytest.warns(RuntimeWarning, match="closing the store failed"):
        early.stop()
    assert not early.thread.is_alive() and not early.stopped.is_set()  # waited for, not cancelled

    failing = EarlyInference(_RunWithAnEnd(fail_before=True), None)
    failing.start()
    with pytest.raises(RuntimeError, match="refused the key"):
        failing.wait()
    failing.stop()
