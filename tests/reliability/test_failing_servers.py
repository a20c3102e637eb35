"""Servers that fail for good, through the real `openai` client and the scripted server:
one that dies mid-run, one that stalls, one that throttles past any budget, one pinned to
another model, one whose model never stops generating on one inference thread.

Each ends the run with a message naming the URL (never by grading an unanswered item),
leaves the unasked items unasked, and a rerun on the same store asks only those. No test
here asserts a duration (benchmarks/failing_servers.py measures them).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from reliability_kit import MODEL, make_cube, openai_adapter, replies, wait_for

from medrcube.cube.item import Cube
from medrcube.models.base import ErrorKind
from medrcube.records import GRADED, Outcome
from medrcube.run.metering import error_cause
from medrcube.run.runner import run_cube
from medrcube.run.store import ResponseStore
from medrcube.service import EndpointError, preflight


@pytest.fixture(scope="module")
def cube40(tmp_path_factory: pytest.TempPathFactory) -> Cube:
    return make_cube(tmp_path_factory.mktemp("cube40"), n_items=40, seed=24)


def _not_asked(records: list[Any]) -> list[Any]:
    return [r for r in records if r.outcome is Outcome.ERROR and "not asked" in (r.error or "")]


def test_a_server_killed_mid_run_opens_the_breaker_and_a_rerun_asks_only_the_rest(
        cube40: Cube, tmp_path: Path, scripted_server_process) -> None:
    answers = replies(cube40)
    srv = scripted_server_process({"answers": answers, "latency": 0.05})
    url = srv.base_url
    adapter = openai_adapter(url, concurrency=4, max_retries=6, backoff_base=0.05, backoff_max=0.3,
                             breaker_failures=5, breaker_seconds=1.0)
    store = ResponseStore(tmp_path / "store")
    box: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: box.update(result=run_cube(cube40, adapter, store=store)), daemon=True)
    runner.start()
    wait_for(lambda: sum(srv.stats(log=False)["answered"].values()) >= 10, "ten answers before the kill")
    srv.kill()
    runner.join(timeout=600)  # a bound on a hang: the breaker ends the run within seconds
    assert not runner.is_alive(), "the run did not end after the server died"
    result = box["result"]

    assert result.aborted is not None and "circuit open" in result.aborted
    assert url in result.aborted and "failed attempts in a row" in result.aborted
    answered = [r for r in result.records if r.outcome in GRADED]
    unanswered = [r for r in result.records if r.outcome is Outcome.ERROR]
    assert answered and unanswered and len(answered) + len(unanswered) + result.unavailable == len(result.records)
    assert _not_asked(result.records), "items after the stop must say they were not asked"

    srv.start()  # the same port, a fresh server: it counts only what the rerun asks
    srv.reset_stats()
    again = run_cube(cube40, openai_adapter(url, concurrency=4), store=store)
    store.close()
    assert again.aborted is None and again.errors == 0
    assert srv.stats(log=False)["total"] == len(unanswered)  # exactly the unanswered items, once each
    assert {r.item_id for r in again.records if r.outcome in GRADED and not r.cached} == {r.item_id for r in unanswered}


def test_a_stalled_server_ends_in_circuit_open_not_in_an_answer(cube40: Cube, scripted_server) -> None:
    scripted_server.set_script({"answers": replies(cube40), "faults": [{"fault": "hang", "after": 6}]})
    # timeout 2 s: a good answer on a loaded machine is never cut (the stall hangs for an hour)
    adapter = openai_adapter(scripted_server.base_url, concurrency=3, timeout=2.0, max_retries=8,
                             backoff_base=0.02, backoff_max=0.1, breaker_failures=4, breaker_seconds=1.0)
    result = run_cube(cube40, adapter)

    assert result.aborted is not None and "circuit open" in result.aborted and "timeout" in result.aborted
    assert sum(r.outcome in GRADED for r in result.records) == 6  # the answers before the stall, no more
    assert sum(r.outcome is Outcome.ERROR for r in result.records) + 6 + result.unavailable == len(result.records)


def test_retry_after_beyond_its_cap_is_not_waited_for(cube40: Cube, scripted_server) -> None:
    scripted_server.set_script({"faults": [{"fault": "status", "status": 429, "retry_after": 100000}]})
    adapter = openai_adapter(scripted_server.base_url, concurrency=2, retry_after_max=30)
    result = run_cube(cube40, adapter)

    assert result.aborted is not None and "100000s" in result.aborted and "retry_after_max 30s" in result.aborted
    assert result.errors + result.unavailable == len(result.records)
    assert scripted_server.stats()["total"] <= 2  # the requests in flight when it said so; none after


def test_a_throttled_request_stops_at_its_total_wait_budget(scripted_server, tmp_path: Path) -> None:
    cube = make_cube(tmp_path / "c", n_items=1, n_datasets=1)
    scripted_server.set_script({"faults": [{"fault": "status", "status": 429, "retry_after": 0.2}]})
    adapter = openai_adapter(scripted_server.base_url, concurrency=1, max_retries=50, retry_wait_max=0.5)
    result = run_cube(cube, adapter)

    (record,) = result.records
    assert record.outcome is Outcome.ERROR and "retry_wait_max 0.5s" in (record.error or "")
    assert scripted_server.stats()["total"] == 3  # waits of 0.2 s: two fit in the budget, a third does not


def test_a_wrong_model_name_is_refused_by_the_preflight_naming_the_served_ones(scripted_server) -> None:
    scripted_server.set_script({"models": ["/models/tiny-vlm"]})
    with pytest.raises(EndpointError) as info:
        preflight([openai_adapter(scripted_server.base_url)])
    message = str(info.value)
    assert scripted_server.base_url in message and repr(MODEL) in message and "'/models/tiny-vlm'" in message
    assert scripted_server.stats()["total"] == 0  # not one chat request


def test_a_pinned_servers_detail_is_quoted_verbatim_with_no_foreign_hint(cube40: Cube, scripted_server) -> None:
    said = f"Server is pinned to '/models/tiny-vlm'; requested '{MODEL}'."
    scripted_server.set_script({"faults": [{"fault": "status", "status": 400, "style": "fastapi", "message": said}]})
    result = run_cube(cube40, openai_adapter(scripted_server.base_url, concurrency=2))

    record = result.records[0]
    assert record.outcome is Outcome.ERROR and said in (record.error or "")
    assert "temperature" not in (record.error or "")  # the parameter hint does not match these words
    from medrcube.models.base import Response

    cause = error_cause(Response(text=None, error=record.error, error_kind=ErrorKind.BAD_REQUEST))
    assert said in cause  # the summary's cause keeps the provider's words


def test_plain_text_error_bodies_are_quoted(scripted_server, tmp_path: Path) -> None:
    cube = make_cube(tmp_path / "c", n_items=1, n_datasets=1)
    scripted_server.set_script({"faults": [{"fault": "status", "status": 400, "style": "text",
                                            "message": "model weights still loading"}]})
    (record,) = run_cube(cube, openai_adapter(scripted_server.base_url)).records
    assert "Provider said: model weights still loading" in (record.error or "")


def test_a_never_stopping_model_on_one_thread_is_recorded_truncated(cube40: Cube, scripted_server) -> None:
    """The default token limit reaches the server, the answers are truncated (never graded),
    and none is lost to a timeout although the server answers one request at a time."""
    scripted_server.set_script({"answers": replies(cube40), "faults": [{"fault": "endless", "token_s": 0.001}]})
    adapter = openai_adapter(scripted_server.base_url, concurrency=16, timeout=60)
    result = run_cube(cube40, adapter)

    assert result.aborted is None and result.errors == 0
    assert {r.outcome for r in result.records} - {Outcome.UNAVAILABLE} == {Outcome.TRUNCATED}
    sent = {e["params"].get("max_tokens") for e in scripted_server.stats()["requests"]}
    assert sent == {32}
