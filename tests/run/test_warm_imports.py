"""The verdict's imports are warmed on a thread once the first answer is in (run/metering.py):
never before a request was answered, once per process, and a module that fails to import
there raises nothing (the main thread's own import reports it)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from medrcube.models.base import Request
from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.run import metering
from medrcube.run.prompts import render_prompt


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """Threads started during the test (the metering's and the in-process server's), recorded;
    the once-per-process flag reset for the test."""
    seen: list[threading.Thread] = []
    real = threading.Thread

    def recording(*args: Any, **kwargs: Any) -> threading.Thread:
        t = real(*args, **kwargs)
        seen.append(t)
        return t

    monkeypatch.setattr(metering.threading, "Thread", recording)
    monkeypatch.setattr(metering, "_warm_started", set())
    return seen


def _ask(server: Any, n: int, monkeypatch: pytest.MonkeyPatch, params: dict[str, Any] | None = None) -> list[Any]:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    metered = metering.Metered(OpenAIAdapter("scripted", base_url=server.base_url, concurrency=4, timeout=10.0))
    requests = [Request(key=f"k{i}", item_id=f"i{i}", prompt=render_prompt(f"question {i}", ["yes", "no"]),
                        options=("yes", "no"), params=params or {}) for i in range(n)]

    async def go() -> list[Any]:
        try:
            out: list[Any] = []
            for r in requests:  # one batch per request, as the pump calls it
                out += await metered.generate([r])
            return out
        finally:
            await metered.aclose()

    return asyncio.run(go())


def test_warmed_once_after_the_first_answer_and_a_failed_import_raises_nothing(
    scripted_server: Any, monkeypatch: pytest.MonkeyPatch, started: list[threading.Thread]
) -> None:
    monkeypatch.setattr(metering, "AFTER_ANSWERS", ("medrcube._no_such_module_", "json"))
    hooked: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", hooked.append)
    scripted_server.set_script({"default": "A"})
    scripted_server.reset_stats()
    metered_before = metering.Metered(OpenAIAdapter("scripted", base_url=scripted_server.base_url))
    assert metered_before is not None and started == []  # building the adapter starts nothing
    out = _ask(scripted_server, 5, monkeypatch)
    assert [r.ok for r in out] == [True] * 5
    assert scripted_server.stats(log=False)["total"] == 5  # every request reached the server
    warm = [t for t in started if t.name == "medrcube-warm-imports"]
    assert len(warm) == 1 and warm[0].daemon
    warm[0].join(timeout=60)
    assert not warm[0].is_alive() and hooked == []
    _ask(scripted_server, 2, monkeypatch)  # a second run in the same process: no second thread
    assert len([t for t in started if t.name == "medrcube-warm-imports"]) == 1


def test_failed_requests_warm_too_and_are_still_counted_as_errors(
    scripted_server: Any, monkeypatch: pytest.MonkeyPatch, started: list[threading.Thread]
) -> None:
    monkeypatch.setattr(metering, "AFTER_ANSWERS", ("json",))
    scripted_server.set_script({"default": "A", "faults": [{"fault": "status", "status": 400, "message": "bad"}]})
    scripted_server.reset_stats()
    out = _ask(scripted_server, 2, monkeypatch)
    assert [r.ok for r in out] == [False, False]
    warm = [t for t in started if t.name == "medrcube-warm-imports"]  # (the server's threads are recorded too)
    assert len(warm) == 1
    warm[0].join(timeout=60)


def test_numpy_is_warmed_only_once_an_answer_carries_a_confidence(
    scripted_server: Any, monkeypatch: pytest.MonkeyPatch, started: list[threading.Thread]
) -> None:
    # numpy is needed only by the calibration and selective metrics (metering.WITH_CONFIDENCE)
    monkeypatch.setattr(metering, "AFTER_ANSWERS", ("json",))
    monkeypatch.setattr(metering, "WITH_CONFIDENCE", ("decimal",))
    scripted_server.set_script({"default": "A", "logprobs": {"question 0": {"A": 0.7, "B": 0.3},
                                                             "question 1": {"A": 0.6, "B": 0.4}}})
    out = _ask(scripted_server, 2, monkeypatch)
    assert all(r.ok and r.confidence is None for r in out)  # logprobs not asked for: none came back
    assert len([t for t in started if t.name == "medrcube-warm-imports"]) == 1
    out = _ask(scripted_server, 2, monkeypatch, params={"logprobs": True, "top_logprobs": 2})
    assert all(r.ok and r.confidence is not None for r in out)
    warm = [t for t in started if t.name == "medrcube-warm-imports"]
    assert len(warm) == 2  # the confidence's own thread, once
    for t in warm:
        t.join(timeout=60)
