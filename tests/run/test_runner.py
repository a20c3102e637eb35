"""The runner on real cubes and real stores: plan order, unavailable images, caching,
errors never graded, no barrier between batches, the judge, the early stop on auth.

Model adapters here are the project's baselines or small scripted models defined in this
file (models are the one thing a test may script; the runner, store and grading are real).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.cube.item import Cube
from medrcube.models.base import AdapterBase, ErrorKind, Request, Response
from medrcube.models.baselines import RandomAdapter
from medrcube.records import GRADED, GradedRecord, Outcome
from medrcube.run.plan import plan_asks
from medrcube.run.runner import owner_is_dead, record_counts, run_cube
from medrcube.run.store import ResponseStore
from medrcube.rundir.files import read_results
from medrcube.testing.gencube import distinct_questions, generate_release_cube

LETTERS = "ABCDEFGH"


@pytest.fixture(scope="module")
def small_cube(tmp_path_factory: pytest.TempPathFactory) -> Cube:
    root = generate_release_cube(
        tmp_path_factory.mktemp("cube"), n_items=60, n_datasets=4, n_images=30, image_size=32, n_base_images=8, seed=3
    )
    cube = load_cube(root)
    assert any(it.image is None for it in cube.items), "the fixture needs restricted items"
    return cube


@pytest.fixture(scope="module")
def unique_cube(tmp_path_factory: pytest.TempPathFactory) -> Cube:
    """Like small_cube, but every question is distinct, so that every ask is one request."""
    root = generate_release_cube(
        tmp_path_factory.mktemp("ucube"), n_items=60, n_datasets=4, n_images=30, image_size=32, n_base_images=8, seed=4
    )
    distinct_questions(root)
    return load_cube(root)


class Scripted(AdapterBase):
    """A model that answers by a function of the request, counting every request."""

    def __init__(self, answer, *, fingerprint: str = "scripted:1", batch_size: int = 1, concurrency: int = 4):
        self.answer = answer
        self.spec = fingerprint
        self.fingerprint = fingerprint
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.seen: Counter[str] = Counter()
        self.batches: list[int] = []

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        self.batches.append(len(requests))
        out = []
        for r in requests:
            self.seen[r.key] += 1
            out.append(await self.answer(r) if asyncio.iscoroutinefunction(self.answer) else self.answer(r))
        return out

    async def aclose(self) -> None:
        return None


def test_random_run_grades_every_ask_in_plan_order(small_cube: Cube, tmp_path: Path) -> None:
    adapter = RandomAdapter(7)
    store = ResponseStore(tmp_path / "store")
    result = run_cube(small_cube, adapter, variants=("standard", "blind", "shuffled:2"), store=store)
    plan = plan_asks(
        small_cube, ("standard", "blind", "shuffled:2"), fingerprint=adapter.fingerprint, keyed_by_item=True
    )
    assert [(r.item_id, r.variant, r.rotation) for r in result.records] == [
        (a.item.id, a.variant, a.rotation) for a in plan
    ]
    n = len(small_cube)
    restricted = sum(1 for it in small_cube.items if it.image is None)
    assert len(result.records) == 4 * n  # every item has >= 2 options: 2 rotations each
    # Unavailable images: not asked in image variants, asked in blind.
    assert result.unavailable == 3 * restricted
    for rec in result.records:
        item_has_image = rec.image_digest is not None
        if rec.variant != "blind" and not item_has_image:
            assert rec.outcome is Outcome.UNAVAILABLE and rec.response is None
        else:
            assert rec.outcome in GRADED
    assert result.asked == 4 * n - 3 * restricted
    # The random baseline answers per item (keyed_by_item), so even identical blind
    # prompts of different items are separate requests; a prompt-only model would share
    # them (tests/run/test_keyed_by_item.py).
    first_of_key: dict[str, object] = {}
    for ask in plan:
        if ask.available:
            first_of_key.setdefault(ask.key, ask)
    assert len(first_of_key) == result.asked
    shared = plan_asks(small_cube, ("standard", "blind", "shuffled:2"), fingerprint=adapter.fingerprint)
    assert len({a.key for a in shared if a.available}) < result.asked  # the fixture has such repeats
    assert result.requests_sent == len(first_of_key)
    assert result.cache_hits == 0 and result.errors == 0
    # The grade is exactly the baseline's choice compared with the answer as shown.
    for ask, rec in zip(plan, result.records, strict=True):
        if not ask.available:
            continue
        choice = adapter.choose(first_of_key[ask.key].request())
        assert rec.extracted == choice
        assert rec.outcome is (Outcome.CORRECT if choice == ask.answer else Outcome.WRONG)
        assert rec.response == LETTERS[choice]
    # Rotation keeps the answer text: the shown answer index points to the same option.
    items = {it.id: it for it in small_cube.items}
    for ask in plan:
        assert ask.options[ask.answer] == items[ask.item.id].answer_text

    again = run_cube(small_cube, RandomAdapter(7), variants="standard,blind,shuffled:2", store=store)
    assert again.requests_sent == 0
    assert again.cache_hits == result.asked
    assert [(r.outcome, r.extracted) for r in again.records] == [(r.outcome, r.extracted) for r in result.records]
    assert all(r.cached for r in again.records if r.outcome is not Outcome.UNAVAILABLE)

    fresh = run_cube(small_cube, RandomAdapter(7), variants=("standard",), store=store, refresh=True)
    assert fresh.requests_sent == len({a.key for a in plan if a.variant == "standard" and a.available})
    assert fresh.cache_hits == 0
    store.close()


def test_without_a_store_everything_is_asked_every_time(unique_cube: Cube) -> None:
    model = Scripted(lambda r: Response(text="A"))
    first = run_cube(unique_cube, model, variants=("blind",))
    second = run_cube(unique_cube, model, variants=("blind",))
    assert first.requests_sent == second.requests_sent == len(unique_cube)
    assert max(model.seen.values()) == 2


def test_errors_are_recorded_never_graded_and_retried_on_rerun(unique_cube: Cube, tmp_path: Path) -> None:
    bad = {it.id for it in unique_cube.items[::5]}

    def answer(r: Request) -> Response:
        if r.item_id in bad:
            return Response(text=None, error="HTTP 503 after 6 attempts", error_kind=ErrorKind.SERVER, attempts=6)
        return Response(text="B")

    store = ResponseStore(tmp_path)
    result = run_cube(unique_cube, Scripted(answer), variants=("blind",), store=store)
    errs = [r for r in result.records if r.outcome is Outcome.ERROR]
    assert {r.item_id for r in errs} == bad and result.errors == len(bad)
    assert all(r.extracted is None and "server: HTTP 503" in (r.error or "") for r in errs)
    assert all(r.outcome in (Outcome.CORRECT, Outcome.WRONG) for r in result.records if r.item_id not in bad)
    assert len(store.errors()) == len(bad)

    healed = Scripted(lambda r: Response(text="B"))
    again = run_cube(unique_cube, healed, variants=("blind",), store=store)
    assert again.requests_sent == len(bad)
    expected = {a.key for a in plan_asks(unique_cube, "blind", fingerprint="scripted:1") if a.item.id in bad}
    assert set(healed.seen) == expected
    assert again.errors == 0
    store.close()


def test_the_provenance_counts_each_graded_ask_by_the_run_that_asked_its_answer(small_cube: Cube,
                                                                              tmp_path: Path) -> None:
    """Asks that share one request count once each; a failed answer comes from no run; a
    rerun's stored answers count as stored, from the first run, and its new ones as live."""
    variants = ("standard", "blind")
    plan = [a for a in plan_asks(small_cube, variants, fingerprint="scripted:1") if a.available]
    per_key = Counter(a.key for a in plan)
    assert max(per_key.values()) > 1, "the fixture needs asks that share a request"
    failing = {k for k in per_key if zlib.crc32(k.encode()) % 3 == 0}
    failed_asks = sum(per_key[k] for k in failing)
    assert 0 < failed_asks < len(plan)

    def first_answer(r: Request) -> Response:
        if r.key in failing:
            return Response(text=None, error="HTTP 503 after 6 attempts", error_kind=ErrorKind.SERVER, attempts=6)
        return Response(text="A")

    store = ResponseStore(tmp_path / "store")
    first = run_cube(small_cube, Scripted(first_answer), variants=variants, store=store).info["provenance"]
    assert (first["live"], first["stored"]) == (len(plan) - failed_asks, 0)
    assert sum(first["signers"].values()) == first["live"]
    again = run_cube(small_cube, Scripted(lambda r: Response(text="A")), variants=variants, store=store)
    second = again.info["provenance"]
    assert (second["live"], second["stored"]) == (failed_asks, len(plan) - failed_asks)
    assert second["from_runs"] == {first["run"]: len(plan) - failed_asks}
    assert sum(second["signers"].values()) == len(plan)
    store.close()


def test_an_adapter_that_raises_or_miscounts_yields_errors(unique_cube: Cube) -> None:
    class Broken(Scripted):
        async def generate(self, requests: Sequence[Request]) -> list[Response]:
            if requests[0].item_id == unique_cube.items[0].id:
                raise RuntimeError("boom")
            return [Response(text="A")] * (len(requests) + 1)

    result = run_cube(unique_cube, Broken(None), variants=("blind",))
    assert result.errors == len(unique_cube)
    first = result.records[0]
    assert first.outcome is Outcome.ERROR and "raised RuntimeError: boom" in first.error
    assert "returned 2 responses for 1 requests" in result.records[1].error


def test_an_authentication_error_stops_the_run(unique_cube: Cube, tmp_path: Path) -> None:
    model = Scripted(
        lambda r: Response(text=None, error="401: check OPENAI_API_KEY", error_kind=ErrorKind.AUTH),
        concurrency=1,
    )
    result = run_cube(unique_cube, model, variants=("blind",), store=ResponseStore(tmp_path))
    assert result.aborted and "OPENAI_API_KEY" in result.aborted
    assert result.requests_sent == 1 == sum(model.seen.values())
    assert result.errors == len(unique_cube)
    assert sum("not asked" in (r.error or "") for r in result.records) == len(unique_cube) - 1


def test_a_slow_request_holds_up_no_other(unique_cube: Cube) -> None:
    """No barrier between batches: the first request waits until every other request has
    been answered. With a barrier (batches awaited together) this could never finish and
    the slow request times out into an error, which the assertions catch."""
    slow_key = None
    others_done = asyncio.Event()
    answered: set[str] = set()
    total = len(unique_cube)

    async def answer(r: Request) -> Response:
        nonlocal slow_key
        if slow_key is None:
            slow_key = r.key
        if r.key == slow_key:
            try:
                await asyncio.wait_for(others_done.wait(), timeout=120)  # only a barrier waits this long
            except TimeoutError:
                return Response(text=None, error="held up by a barrier", error_kind=ErrorKind.TIMEOUT)
            return Response(text="A")
        answered.add(r.key)
        if len(answered) == total - 1:
            others_done.set()
        return Response(text="A")

    result = run_cube(unique_cube, Scripted(answer, concurrency=4), variants=("blind",))
    assert result.errors == 0
    assert len(answered) == total - 1


def test_batches_respect_batch_size_and_ask_each_key_once(unique_cube: Cube, tmp_path: Path) -> None:
    model = Scripted(lambda r: Response(text="C"), batch_size=8, concurrency=3)
    result = run_cube(unique_cube, model, variants=("blind", "shuffled:3"), store=ResponseStore(tmp_path))
    assert max(model.batches) <= 8 and max(model.batches) > 1
    assert max(model.seen.values()) == 1
    assert sum(model.seen.values()) == result.requests_sent == result.asked


def test_a_workers_next_claim_goes_in_the_transaction_that_commits_its_answer(unique_cube: Cube, tmp_path: Path) -> None:
    store = ResponseStore(tmp_path)
    statements: list[str] = []
    store._conn().set_trace_callback(statements.append)  # this thread's connection: the run's
    result = run_cube(unique_cube, Scripted(lambda r: Response(text="A"), concurrency=1), variants=("blind",),
                      store=store, concurrency=1)
    commits = sum(1 for s in statements if s.strip().upper() == "COMMIT")
    assert result.requests_sent == result.asked > 3
    # One worker: the first claim, then one transaction per answer (its commit with the next
    # claim); two per answer before. The stored answers are all there, no claim is left.
    assert commits <= result.requests_sent + 2
    again = run_cube(unique_cube, Scripted(lambda r: Response(text="B")), variants=("blind",), store=store)
    assert again.requests_sent == 0 and again.cache_hits == result.asked
    assert store._conn().execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0


def test_the_judge_resolves_unparsed_answers_through_the_store(unique_cube: Cube, tmp_path: Path) -> None:
    vague = {it.id for it in unique_cube.items[::3]}

    def answer(r: Request) -> Response:
        if r.item_id in vague:
            return Response(text="It is hard to say; several findings could fit here.")
        return Response(text="A")

    judge = Scripted(lambda r: Response(text="B"), fingerprint="judge:1")
    store = ResponseStore(tmp_path)
    result = run_cube(unique_cube, Scripted(answer), variants=("blind",), store=store, judge=judge)
    judged = [r for r in result.records if r.item_id in vague]
    assert judged and all(r.how == "judge" and r.extracted == 1 for r in judged)
    assert all(r.outcome is (Outcome.CORRECT if r.answer == 1 else Outcome.WRONG) for r in judged)
    assert result.judge_requests == len(vague) == sum(judge.seen.values())
    # The judge's prompt names the question and the response.
    assert all(r.how != "judge" for r in result.records if r.item_id not in vague)

    judge2 = Scripted(lambda r: Response(text="B"), fingerprint="judge:1")
    again = run_cube(unique_cube, Scripted(answer), variants=("blind",), store=store, judge=judge2)
    assert again.judge_requests == 0 and sum(judge2.seen.values()) == 0
    assert [r.outcome for r in again.records] == [r.outcome for r in result.records]

    # A judge that cannot decide leaves the record unparsed, and says so.
    undecided = Scripted(lambda r: Response(text="no idea"), fingerprint="judge:2")
    third = run_cube(unique_cube, Scripted(answer), variants=("blind",), store=store, judge=undecided)
    assert all(r.outcome is Outcome.UNPARSED and r.how == "judge_undecided" for r in third.records if r.item_id in vague)
    store.close()


def test_refusals_are_their_own_outcome(unique_cube: Cube) -> None:
    result = run_cube(
        unique_cube,
        Scripted(lambda r: Response(text="I can't help with that.", refused=True)),
        variants=("blind",),
    )
    assert all(r.outcome is Outcome.REFUSED and r.how == "provider_refusal" for r in result.records)


def test_a_dead_owner_is_recognised_and_a_live_one_is_not() -> None:
    import os
    import socket
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    host = socket.gethostname()
    assert owner_is_dead(f"{host}:{proc.pid}:abcd")
    assert not owner_is_dead(f"{host}:{os.getpid()}:abcd")
    assert not owner_is_dead(f"{host}:{os.getppid()}:abcd")
    assert not owner_is_dead(f"other-host-{host}:{proc.pid}:abcd")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process states are read through /proc")
def test_a_zombie_owner_is_dead_even_when_its_name_mimics_a_state(tmp_path: Path) -> None:
    """A SIGKILLed process stays a zombie until its parent reaps it; os.kill(pid, 0) still
    succeeds on it, so owner_is_dead reads its state from /proc. The state is parsed after
    the *last* ")" of the command name, so a name holding ") Z (" cannot fake or hide it."""
    import shutil
    import socket

    sleep = shutil.which("sleep")
    if sleep is None:
        pytest.skip("no sleep executable")
    tricky = tmp_path / "x) Z (y"  # the kernel takes the command name from the executed path
    tricky.symlink_to(sleep)
    proc = subprocess.Popen([str(tricky), "60"])
    owner = f"{socket.gethostname()}:{proc.pid}:abcd"
    try:
        assert ") Z (" in Path(f"/proc/{proc.pid}/stat").read_text()  # the trap is really set
        assert not owner_is_dead(owner)  # alive (sleeping), whatever its name says
        os.kill(proc.pid, signal.SIGKILL)
        _wait_for(lambda: Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z",
                  "the killed process to become a zombie", timeout=60)
        assert owner_is_dead(owner)  # a zombie, not yet reaped
    finally:
        proc.kill()
        proc.wait()
    assert owner_is_dead(owner)  # reaped: gone


# ------------------------------------------------------------------ against the local server
#
# The real OpenAI adapter and the real `openai` client against the scripted server
# (medrcube.testing.server); counts are taken at the server.

MARKER_KEY = "sk-medrcube-MARKER-0123456789abcdef"


def _openai(server, **kw):
    from medrcube.models.openai_adapter import OpenAIAdapter

    kw.setdefault("concurrency", 8)
    return OpenAIAdapter("scripted-model", base_url=server.base_url, **kw)


def _cli(*args: str, env_key: str = MARKER_KEY) -> list[str]:
    return [sys.executable, "-m", "medrcube.cli", "run", "--no-progress", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["OPENAI_API_KEY"] = MARKER_KEY
    return env


def _no_marker_under(*roots: Path) -> None:
    for root in roots:
        for f in root.rglob("*"):
            if f.is_file():
                assert MARKER_KEY.encode() not in f.read_bytes(), f"the API key leaked into {f}"


def test_faults_end_as_responses_or_recorded_errors_and_reruns_ask_only_the_failed(
    unique_cube: Cube, tmp_path: Path, scripted_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", MARKER_KEY)
    scripted_server.set_script({
        "default": "B",
        "seed": 1,
        "faults": [
            {"fault": "status", "status": 429, "retry_after": 0, "first": 4},
            {"fault": "status", "status": 500, "fraction": 0.25},
            {"fault": "malformed", "fraction": 0.05},
            {"fault": "drop", "fraction": 0.05},
            {"fault": "empty_choices", "fraction": 0.05},
            {"fault": "refusal", "fraction": 0.05},
        ],
    })
    store = ResponseStore(tmp_path / "store")
    adapter = _openai(scripted_server, max_retries=1, backoff_base=0.01, timeout=5)
    result = run_cube(unique_cube, adapter, variants=("standard", "blind"), store=store)
    asked = [r for r in result.records if r.outcome is not Outcome.UNAVAILABLE]
    assert all(r.graded or r.outcome is Outcome.ERROR for r in asked)
    errors = [r for r in asked if r.outcome is Outcome.ERROR]
    assert errors and len(errors) < len(asked)  # the faults hit some, not all
    assert all(r.error and r.extracted is None for r in errors)
    assert any(r.outcome is Outcome.REFUSED for r in asked)
    plan = {(a.item.id, a.variant): a.key for a in plan_asks(unique_cube, ("standard", "blind"),
                                                             fingerprint=adapter.fingerprint)}
    stored = store.get_many(plan.values())
    error_keys = {plan[(r.item_id, r.variant)] for r in errors}
    assert error_keys.isdisjoint(stored) and set(stored) | error_keys == {plan[(r.item_id, r.variant)] for r in asked}
    assert {e.key for e in store.errors()} >= error_keys
    stats = scripted_server.stats(log=False)
    assert stats["auth"].get("present", 0) == stats["total"]  # the key was sent, as a header

    scripted_server.set_script({"default": "B"})
    scripted_server.reset_stats()
    again = run_cube(unique_cube, adapter, variants=("standard", "blind"), store=store)
    assert scripted_server.stats(log=False)["total"] == len(error_keys) == again.requests_sent
    assert again.errors == 0

    scripted_server.reset_stats()
    third = run_cube(unique_cube, adapter, variants=("standard", "blind"), store=store)
    assert scripted_server.stats(log=False)["total"] == 0 and third.requests_sent == 0
    store.close()
    _no_marker_under(tmp_path)


def _wait_for(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _stored(store_dir: Path) -> int:
    if not (store_dir / "responses.sqlite3").exists():
        return 0
    with ResponseStore(store_dir) as s:
        return s.stats()["responses"]


def test_a_sigkilled_run_resumes_without_a_duplicated_request(
    unique_cube: Cube, tmp_path: Path, scripted_server
) -> None:
    """Kill the run (SIGKILL) once K responses are committed and the next requests hang at
    the server, then resume: the server answered every request exactly once, the K stored
    responses were never asked again, and only the requests in flight at the kill (never
    answered, never stored) were sent twice."""
    asked_items = [it for it in unique_cube.items if it.image is not None]
    k, concurrency = 10, 4
    # Held until the server stops (the fixture's teardown wakes them), never answered: with a
    # finite delay they could answer the killed client while a loaded machine is still running
    # the resumed run, and count as duplicates that no client ever saw.
    slow = {it.question: 3600.0 for it in asked_items[k:]}
    scripted_server.set_script({"default": "A", "latency_by_question": slow})
    store_dir, out = tmp_path / "store", tmp_path / "reports"
    args = _cli("--model", f"openai:scripted-model@{scripted_server.base_url}", "--cube", str(unique_cube.root),
                "--response-store", str(store_dir), "--out", str(out), "--concurrency", str(concurrency))
    proc = subprocess.Popen([*args, "--run-id", "killed"], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: _stored(store_dir) == k and scripted_server.stats(log=False)["in_flight"] == concurrency,
                  "K stored responses and every worker waiting on a slow request")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert _stored(store_dir) == k
    before = scripted_server.stats()
    in_flight_at_kill = {e["request_hash"] for e in before["requests"] if e["outcome"] is None}
    assert len(in_flight_at_kill) == concurrency
    assert sum(before["answered"].values()) == k

    scripted_server.set_script({"default": "A"})  # the slow ones now answer at once
    done = subprocess.run([*args, "--run-id", "resumed"], env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    after = scripted_server.stats()
    # Exactly one answer per request, and one per asked item: nothing stored was asked again.
    assert after["duplicates"] == 0
    assert sorted(after["answered"].values()) == [1] * len(asked_items)
    twice = {h for h, n in after["by_request"].items() if n > 1}
    assert twice == in_flight_at_kill  # re-sent: in flight at the kill, never answered or stored
    assert after["total"] == len(asked_items) + concurrency
    meta = json.loads((out / "resumed" / "run.json").read_text())
    assert meta["counts"]["cache_hits"] == k
    assert meta["counts"]["requests_sent"] == len(asked_items) - k
    assert meta["counts"]["errors"] == 0
    _no_marker_under(store_dir, out)


def test_a_run_killed_at_a_random_point_asks_no_stored_response_again(
    unique_cube: Cube, tmp_path: Path, scripted_server
) -> None:
    asked_items = [it for it in unique_cube.items if it.image is not None]
    scripted_server.set_script({"default": "A", "latency": {"uniform": [0.01, 0.06]}, "seed": 3})
    store_dir, out = tmp_path / "store", tmp_path / "reports"
    args = _cli("--model", f"openai:scripted-model@{scripted_server.base_url}", "--cube", str(unique_cube.root),
                "--response-store", str(store_dir), "--out", str(out), "--concurrency", "4")
    target = random.Random().randint(3, len(asked_items) // 2)
    proc = subprocess.Popen([*args, "--run-id", "killed"], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: _stored(store_dir) >= target, f"{target} stored responses")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with ResponseStore(store_dir) as s:
        plan = plan_asks(unique_cube, "standard", fingerprint=_openai(scripted_server).fingerprint)
        stored_questions = {a.item.question for a in plan if a.available and s.get(a.key) is not None}
    assert len(stored_questions) >= target
    done = subprocess.run([*args, "--run-id", "resumed"], env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    after = scripted_server.stats(log=False)
    by_question = after["by_question"]
    assert all(by_question[q] == 1 for q in stored_questions)
    assert set(by_question) == {it.question for it in asked_items}
    # Only requests in flight at the kill (at most the concurrency) can have gone twice.
    assert sum(n - 1 for n in by_question.values()) <= 4


def test_two_processes_sharing_a_store_send_each_request_once(
    unique_cube: Cube, tmp_path: Path, scripted_server
) -> None:
    """Both processes are made to overlap: the server holds every answer until requests
    from both are in flight at once (more than one process's concurrency)."""
    asked_items = [it for it in unique_cube.items if it.image is not None]
    concurrency = 2
    both_running = threading.Event()

    def hold(prompt: str, body: dict) -> None:
        if not both_running.is_set():
            if scripted_server.stats(log=False)["in_flight"] > concurrency:
                both_running.set()
            else:
                both_running.wait(timeout=30)
        return None  # fall through to the script's answer

    scripted_server.set_script({"default": "C", "latency": 0.02}, reply=hold)
    store_dir = tmp_path / "store"
    procs = [
        subprocess.Popen(
            _cli("--model", f"openai:scripted-model@{scripted_server.base_url}", "--cube", str(unique_cube.root),
                 "--response-store", str(store_dir), "--out", str(tmp_path / "reports"), "--run-id", f"p{i}",
                 "--concurrency", str(concurrency)),
            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=600)  # a bound on a hang, far beyond a loaded machine's run
        assert p.returncode == 0, err
    assert both_running.is_set()
    stats = scripted_server.stats(log=False)
    assert stats["total"] == len(asked_items)
    assert sorted(stats["by_request"].values()) == [1] * len(asked_items)
    sent = [json.loads((tmp_path / "reports" / f"p{i}" / "run.json").read_text())["counts"] for i in range(2)]
    assert all(c["requests_sent"] >= 1 for c in sent)
    assert sum(c["requests_sent"] for c in sent) == len(asked_items)
    assert all(c["requests_sent"] + c["cache_hits"] == len(asked_items) and c["errors"] == 0 for c in sent)
    a, b = (read_results(tmp_path / "reports" / f"p{i}" / "results.jsonl") for i in range(2))
    assert [(r.item_id, r.outcome, r.extracted) for r in a] == [(r.item_id, r.outcome, r.extracted) for r in b]
    _no_marker_under(store_dir, tmp_path / "reports")


def test_the_progress_bar_shows_counts_on_a_terminal_only() -> None:
    import io

    from medrcube.run.progress import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    bar = Progress(10, stream=tty, desc="m")
    bar.advance(3, cached=True)
    bar.advance(1, error=True)
    bar.close()
    shown = tty.getvalue()
    assert bar.done == 4 and bar.errors == 1 and bar.cached == 3
    assert "4/10" in shown and "errors=1" in shown and "cached=3" in shown

    pipe = io.StringIO()
    quiet = Progress(10, stream=pipe)
    quiet.advance(10)
    quiet.close()
    assert pipe.getvalue() == "" and not quiet.shown and quiet.done == 10
    off = Progress(10, stream=Tty(), enabled=False)
    assert not off.shown


def test_a_store_failing_mid_run_stops_the_run_with_its_error(unique_cube: Cube, tmp_path: Path) -> None:
    from medrcube.run.store import StoreError

    store = ResponseStore(tmp_path)
    calls = 0

    def answer(r: Request) -> Response:
        nonlocal calls
        calls += 1
        if calls == 5:
            store.close()  # as if the disk had gone: every later store call fails
        return Response(text="A")

    with pytest.raises(StoreError, match="closed"):
        run_cube(unique_cube, Scripted(answer, concurrency=2), variants=("blind",), store=store)
    assert calls < len(unique_cube)  # it stopped instead of asking on without storing
    with ResponseStore(tmp_path) as again:
        assert again.stats()["responses"] == 4  # what was stored before the failure is kept


def test_records_of_asks_without_their_image_come_after_the_first_request(small_cube: Cube, tmp_path: Path) -> None:
    # Nothing is graded before the first request (grading's import and the results' lines
    # would hold it back), not even the asks that are never sent; every record is still
    # handed to on_graded exactly once.
    graded: list[object] = []
    at_first_request: list[int] = []

    def answer(r: Request) -> Response:
        if not at_first_request:
            at_first_request.append(len(graded))
        return Response(text="A")

    variants = ("standard", "shuffled:2")
    result = run_cube(small_cube, Scripted(answer), variants=variants, store=ResponseStore(tmp_path / "store"),
                      on_graded=graded.extend)
    assert result.unavailable > 0 and at_first_request == [0]
    assert sorted(map(id, graded)) == sorted(map(id, result.records))
    assert [r.outcome for r in result.records].count(Outcome.UNAVAILABLE) == result.unavailable


def _pairs_of(records: list[GradedRecord]) -> dict[tuple[Outcome, bool], int]:
    from collections import Counter

    return dict(Counter((r.outcome, r.cached) for r in records))


def test_the_outcomes_counted_while_grading_are_the_records_and_a_judge_s_reading_is_counted_again(
        small_cube: Cube, unique_cube: Cube, tmp_path: Path) -> None:
    """RunResult.outcome_pairs (each record's outcome and whether from the store, counted batch by batch as
    graded) is what a pass over the run's records counts, so the counts and the tally read from it are theirs;
    with a judge, whose reading replaces records after they were counted, there are none and the records are
    counted."""
    import dataclasses

    from medrcube.rundir.files import run_document
    from medrcube.tally import tally

    store = ResponseStore(tmp_path / "s")
    flaky = {it.id for it in small_cube.items[::4]}
    first = run_cube(small_cube, Scripted(lambda r: Response(text="A") if r.item_id not in flaky else Response(
        text=None, error="HTTP 500", error_kind=ErrorKind.SERVER)), variants=("standard", "blind"), store=store)
    again = run_cube(small_cube, Scripted(lambda r: Response(text="B")), variants=("standard", "blind"), store=store)
    for result in (first, again):
        assert result.outcome_pairs == _pairs_of(result.records)
        assert {o for o, _ in result.outcome_pairs} >= {Outcome.UNAVAILABLE}  # the fixture's restricted images
        assert record_counts(result.records, result.outcome_pairs) == record_counts(result.records)
        assert (result.cache_hits, result.errors, result.unavailable) == tuple(record_counts(result.records).values())
        assert tally(result.records, requests=1, loaded=1, pairs=result.outcome_pairs) == \
            tally(result.records, requests=1, loaded=1)
        counted = dataclasses.replace(result, counted=None)  # run.json's outcomes, read from the records
        assert run_document(result)["counts"] == run_document(counted)["counts"]
    assert again.cache_hits > 0 and first.errors > 0
    judge = Scripted(lambda r: Response(text="B"), fingerprint="judge:9")
    handed: list[GradedRecord] = []
    judged = run_cube(unique_cube, Scripted(lambda r: Response(text="hard to say")), variants=("blind",),
                      store=ResponseStore(tmp_path / "j"), judge=judge, on_graded=handed.extend)
    assert judged.outcome_pairs is None and judged.judge_requests > 0
    # The records handed on were the unparsed ones; the judge's replace them: no places either.
    assert judged.delivery is None and len(handed) == len(judged.records)
    assert {id(r) for r in handed} != {id(r) for r in judged.records}
    assert record_counts(judged.records) == {"cache_hits": judged.cache_hits, "errors": judged.errors,
                                             "unavailable": judged.unavailable}
    # Counts of other records are not taken for these: a total that differs is counted again, and a result
    # given another list (assigned, or by dataclasses.replace) has none.
    assert record_counts(first.records[1:], first.outcome_pairs) == record_counts(first.records[1:])
    assert dataclasses.replace(first, records=list(first.records)).outcome_pairs is None
    first.records = first.records[::-1]
    assert first.outcome_pairs is None


def test_the_outcome_is_handed_over_before_the_run_s_end(small_cube: Cube, tmp_path: Path) -> None:
    """service.infer's `on_result`: the Inference whole (its usage and request counts in) before the adapters
    are closed, the loop ended and the store closed; and the very object `infer` then returns."""
    from medrcube import service

    events: list[str] = []

    class Closing(Scripted):
        async def aclose(self) -> None:
            events.append("adapter closed")

    handed: list[service.Inference] = []

    def on_result(inference: service.Inference) -> None:
        events.append("outcome")
        handed.append(inference)
        assert inference.result.requests_sent == inference.usage["candidate"].requests > 0

    out = service.infer(small_cube, Closing(lambda r: Response(text="A")), variants=("standard",),
                        store_dir=tmp_path / "store", on_result=on_result)
    assert events == ["outcome", "adapter closed"]
    assert handed == [out] and handed[0] is out
    assert out.result.requests_sent == out.usage["candidate"].requests
