"""Fault suite: the runner, the store and the gate attacked from outside.

Every class injects faults through the scripted OpenAI-compatible server (or kills
processes, damages files, fills disks) and then proves, by counting at the server and
reading the store back, that the run either completed with every item answered once, or
stopped with a clear error having lost nothing already answered; that no item was graded
from an error or from a damaged text; and that the gate never passed a check whose
evidence had more errors than its max_error_rate. Counts go into the class's tally
(reliability_recorder.py) and from there into RELIABILITY.md.

tests/run/test_runner.py has single examples of some of these; this suite runs each
class systematically, with the same audit for all.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from reliability_kit import (
    MARKER_KEY,
    asked_items,
    audit,
    child_pids,
    cli_run,
    env_with_key,
    fingerprint,
    fsize_limited,
    gate_audit,
    no_traceback,
    openai_adapter,
    process_state,
    replies,
    server_duplicates,
    sigkill,
    stored_responses,
    tiny_filesystem,
    wait_for,
)

from medrcube.cube.item import Cube
from medrcube.records import Outcome
from medrcube.run.plan import plan_asks
from medrcube.run.runner import run_cube
from medrcube.run.store import DB_NAME, ResponseStore, StoreError
from medrcube.rundir.files import read_results

VARIANTS = ("standard", "blind")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", MARKER_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _by_fault(stats: dict[str, Any]) -> int:
    return sum(stats["by_fault"].values())


# ---------------------------------------------------------------------------- retried faults

# Each class: fault rules that hit a share of the requests but never more often per
# request than the retry budget allows, so the run must complete with no error at all.
# per_prompt + first N: every distinct request fails at most N times (each with
# probability `fraction`, seeded); the adapter retries up to max_retries.
RETRIED: dict[str, dict[str, Any]] = {
    "f429_retry_after": dict(
        rules=[{"fault": "status", "status": 429, "retry_after": 0.05, "per_prompt": True, "first": 2, "fraction": 0.7},
               {"fault": "status", "status": 429, "retry_after_ms": 20, "first": 6}],
        # One prompt can meet both rules: the first 6 requests of the run (its retries
        # among them, when the adaptive limit lets one request through at a time) and 2
        # of its own, 8 failures; the budget covers that whatever the scheduling.
        max_retries=8),
    "f429_plain": dict(
        rules=[{"fault": "status", "status": 429, "first": 8},
               {"fault": "status", "status": 429, "per_prompt": True, "first": 2, "fraction": 0.7}],
        max_retries=12),
    "f5xx_storm": dict(
        # A storm: the first 12 requests all fail, then every request may fail once per status.
        rules=[{"fault": "status", "status": 503, "first": 12}]
        + [{"fault": "status", "status": s, "per_prompt": True, "first": 1, "fraction": 0.4} for s in (500, 502, 503, 504)],
        max_retries=20),
    "f_hang": dict(
        rules=[{"fault": "hang", "seconds": 60, "per_prompt": True, "first": 1, "fraction": 0.25}],
        max_retries=2, timeout=2.0),  # a deadline no load breaks for a good answer
    "f_malformed": dict(rules=[{"fault": "malformed", "per_prompt": True, "first": 2, "fraction": 0.6}], max_retries=3),
    "f_truncated": dict(rules=[{"fault": "truncated", "per_prompt": True, "first": 2, "fraction": 0.6}], max_retries=3),
    "f_empty_choices": dict(rules=[{"fault": "empty_choices", "per_prompt": True, "first": 2, "fraction": 0.6}],
                            max_retries=3),
    "f_drop": dict(rules=[{"fault": "drop", "per_prompt": True, "first": 2, "fraction": 0.6}], max_retries=3),
    "f_reset": dict(rules=[{"fault": "reset", "per_prompt": True, "first": 2, "fraction": 0.6}], max_retries=3),
}


@pytest.mark.parametrize("klass", list(RETRIED))
def test_retried_faults_complete_with_every_item_answered_once(
    klass: str, rel_cube: Cube, tmp_path: Path, scripted_server, tally
) -> None:
    t = tally(klass)
    spec = RETRIED[klass]
    answers = replies(rel_cube)
    scripted_server.set_script({"answers": answers, "faults": spec["rules"], "seed": 7})
    adapter = openai_adapter(scripted_server.base_url, max_retries=spec["max_retries"],
                             timeout=spec.get("timeout", 10.0))
    store = ResponseStore(tmp_path / "store")
    plan = plan_asks(rel_cube, VARIANTS, fingerprint=adapter.fingerprint)

    result = run_cube(rel_cube, adapter, variants=VARIANTS, store=store)
    stats = scripted_server.stats(log=False)
    a = audit(result, plan, store, answers)
    g = gate_audit(result.records, VARIANTS)
    t.injected += _by_fault(stats)
    t.runs += 1
    t.completed += int(a.asks == a.graded + a.errors and a.lost == 0)
    t.lost += a.lost + a.not_from_server
    t.duplicates += server_duplicates(stats)
    t.gate_passes_incomplete += g.passes_on_incomplete

    # A rerun asks nothing: every answer is in the store.
    scripted_server.reset_stats()
    again = run_cube(rel_cube, adapter, variants=VARIANTS, store=store)
    rerun_total = scripted_server.stats(log=False)["total"]
    t.runs += 1
    t.completed += int(again.errors == 0)
    t.duplicates += rerun_total
    store.close()

    assert _by_fault(stats) > 0, "the script injected nothing"
    assert a.ok(), a.problems[:5]
    assert result.errors == 0 and a.graded == a.asks == asked_items(rel_cube, VARIANTS)
    assert server_duplicates(stats) == 0
    assert sorted(stats["answered"].values()) == [1] * result.requests_sent
    assert g.passes_on_incomplete == 0
    assert rerun_total == 0 and again.requests_sent == 0 and again.cache_hits == again.asked


def test_faults_beyond_the_retry_budget_are_recorded_never_graded_and_reasked_alone(
    rel_cube: Cube, tmp_path: Path, scripted_server, tally
) -> None:
    t = tally("f_persistent")
    answers = replies(rel_cube)
    victims = [it for it in rel_cube.items][:10:2]  # five items, each its own fault kind
    kinds = [{"fault": "status", "status": 503}, {"fault": "malformed"}, {"fault": "drop"},
             {"fault": "status", "status": 429, "retry_after": 0}, {"fault": "hang", "seconds": 60}]
    rules = [{**k, "match": it.question} for it, k in zip(victims, kinds, strict=True)]
    scripted_server.set_script({"answers": answers, "faults": rules})
    adapter = openai_adapter(scripted_server.base_url, max_retries=2, timeout=2.0)  # no load times out a good answer
    store = ResponseStore(tmp_path / "store")
    plan = plan_asks(rel_cube, VARIANTS, fingerprint=adapter.fingerprint)

    result = run_cube(rel_cube, adapter, variants=VARIANTS, store=store)
    stats = scripted_server.stats(log=False)
    a = audit(result, plan, store, answers)
    g = gate_audit(result.records, VARIANTS)
    victim_asks = {(p.item.id, p.variant) for p in plan if p.available and p.item in victims}
    errored = {(r.item_id, r.variant) for r in result.records if r.outcome is Outcome.ERROR}
    t.injected += _by_fault(stats)
    t.runs += 1
    t.completed += int(a.lost == 0 and a.asks == a.graded + a.errors)
    t.lost += a.lost + a.not_from_server
    t.gate_passes_incomplete += g.passes_on_incomplete
    t.duplicates += server_duplicates(stats)

    # The endpoint heals: the rerun asks exactly the failed ones.
    scripted_server.set_script({"answers": answers})
    scripted_server.reset_stats()
    healed = run_cube(rel_cube, adapter, variants=VARIANTS, store=store)
    healed_stats = scripted_server.stats(log=False)
    b = audit(healed, plan, store, answers)
    t.runs += 1
    t.completed += int(healed.errors == 0 and b.ok())
    t.resent += healed_stats["total"]
    t.lost += b.lost
    t.duplicates += server_duplicates(healed_stats)
    t.note(f"{len(errored)} asks failed past the retry budget; the gate errored {g.incomplete_errored} of "
           f"{g.checks} checks for incomplete evidence and passed none of them")
    store.close()

    assert a.ok(), a.problems[:5]
    assert errored == victim_asks  # exactly the victims failed, each recorded, none graded
    assert all(r.extracted is None and r.error for r in result.records if r.outcome is Outcome.ERROR)
    assert g.incomplete > 0 and g.incomplete_errored == g.incomplete and g.passes_on_incomplete == 0
    assert healed_stats["total"] == len(victim_asks) == healed.requests_sent
    assert healed.errors == 0 and b.ok(), b.problems[:5]
    assert server_duplicates(stats) == 0 and server_duplicates(healed_stats) == 0


def test_a_run_where_every_request_failed_still_gets_its_report(rel_cube: Cube, tmp_path: Path, scripted_server,
                                                                tally) -> None:
    t = tally("f_persistent")
    scripted_server.set_script({"faults": [{"fault": "status", "status": 400, "message": "bad request"}]})
    done = subprocess.run([*cli_run(scripted_server.base_url, rel_cube, tmp_path / "store", tmp_path / "out"),
                           "--run-id", "all-failed"], env=env_with_key(), capture_output=True, text=True, timeout=180)
    t.injected += scripted_server.stats(log=False)["total"]
    t.runs += 1
    t.stopped += int(done.returncode == 1 and "every request failed" in done.stderr)
    t.note("a run where every request failed gets its report.html, saying so and listing the errors")
    assert done.returncode == 1 and "every request failed" in done.stderr, done.stderr
    assert no_traceback(done.stdout, done.stderr)
    assert (tmp_path / "out" / "all-failed" / "results.jsonl").exists()
    assert (tmp_path / "out" / "all-failed" / "report.html").exists(), done.stderr
    page = (tmp_path / "out" / "all-failed" / "report.html").read_text(encoding="utf-8")
    assert "No graded answer: every request failed" in page and "bad request" in page


def test_refusals_and_content_filters_are_refused_outcomes_not_errors(
    rel_cube: Cube, tmp_path: Path, scripted_server, tally
) -> None:
    t = tally("f_refusal")
    answers = replies(rel_cube)
    victims = list(rel_cube.items)[1:12:3]
    kinds = [{"fault": "refusal"}, {"fault": "content_filter"}, {"fault": "content_filter", "text": "B"},
             {"fault": "status", "status": 400, "code": "content_filter", "message": "filtered"}]
    scripted_server.set_script({"answers": answers,
                                "faults": [{**k, "match": it.question} for it, k in zip(victims, kinds, strict=True)]})
    adapter = openai_adapter(scripted_server.base_url, max_retries=1)
    store = ResponseStore(tmp_path / "store")
    plan = plan_asks(rel_cube, VARIANTS, fingerprint=adapter.fingerprint)
    result = run_cube(rel_cube, adapter, variants=VARIANTS, store=store)
    stats = scripted_server.stats(log=False)
    a = audit(result, plan, store, answers)
    refused = {r.item_id for r in result.records if r.outcome is Outcome.REFUSED}
    t.injected += _by_fault(stats)
    t.runs += 1
    t.completed += int(a.ok() and result.errors == 0)
    t.lost += a.lost + a.not_from_server
    t.duplicates += server_duplicates(stats)
    store.close()

    assert a.ok(), a.problems[:5]
    assert result.errors == 0
    victim_ids = {it.id for it in victims if any(p.available and p.item is it for p in plan)}
    assert refused == victim_ids
    # A filtered answer that happens to be a letter ("B") is still a refusal, never graded as B.
    assert all(r.extracted is None for r in result.records if r.outcome is Outcome.REFUSED)


# ---------------------------------------------------------------------------- server restart


def test_server_killed_and_restarted_mid_run(rel_cube: Cube, tmp_path: Path, scripted_server_process, tally) -> None:
    """SIGKILL the server process while K answers are in and the next requests hang there,
    restart it on the same port: the run retries through the outage and completes, and
    across both server lives each request was answered once."""
    t = tally("server_restart")
    answers = replies(rel_cube)
    items = [it for it in rel_cube.items if it.image is not None]
    k, concurrency = 8, 4
    srv = scripted_server_process({"answers": answers, "latency_by_question": {it.question: 300 for it in items[k:]}})
    adapter = openai_adapter(srv.base_url, concurrency=concurrency, max_retries=40, backoff_base=0.05,
                             backoff_max=0.5, timeout=120)
    store = ResponseStore(tmp_path / "store")
    plan = plan_asks(rel_cube, ("standard",), fingerprint=adapter.fingerprint)
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = run_cube(rel_cube, adapter, variants=("standard",), store=store)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertions below
            box["error"] = exc

    runner = threading.Thread(target=work, daemon=True)
    runner.start()
    try:
        wait_for(lambda: (s := srv.stats(log=False))["in_flight"] == concurrency and sum(s["answered"].values()) == k,
                 "K answers and every worker waiting on the server", poll=0.02)
        before = srv.stats(log=False)
        srv.kill()  # the in-flight requests see their connections dropped
        Path(srv.script_path).write_text(json.dumps({"answers": answers}), encoding="utf-8")
        time.sleep(0.3)  # an outage long enough for retries to meet a closed port
        srv.start()
        runner.join(timeout=600)  # a bound on a hang, far beyond a loaded machine's run
    finally:
        if runner.is_alive():
            srv.kill()
            runner.join(timeout=30)
    after = srv.stats(log=False)
    assert "error" not in box, box.get("error")
    result = box["result"]
    a = audit(result, plan, store, answers)
    answered = Counter(before["answered"]) + Counter(after["answered"])
    t.injected += 1 + concurrency  # the restart, and the connections it dropped
    t.runs += 1
    t.completed += int(a.ok() and result.errors == 0)
    t.lost += a.lost + a.not_from_server
    t.duplicates += sum(n - 1 for n in answered.values() if n > 1)
    t.resent += concurrency  # the dropped requests, never answered before the kill
    store.close()

    assert a.ok(), a.problems[:5]
    assert result.errors == 0 and a.graded == len(items)
    assert sorted(answered.values()) == [1] * len(items)


# ---------------------------------------------------------------------------- SIGKILL the run


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_run_sigkilled_at_a_random_point_resumes_without_asking_a_stored_response_again(
    seed: int, rel_cube: Cube, tmp_path: Path, scripted_server, tally
) -> None:
    """The kill lands anywhere: before the first request (k = 0), mid-run, or after the
    last answer while the reports are written (k = all)."""
    t = tally("sigkill_random")
    rng = random.Random(seed)
    answers = replies(rel_cube)
    items = [it for it in rel_cube.items if it.image is not None]
    scripted_server.set_script({"answers": answers, "latency": {"uniform": [0.01, 0.06]}, "seed": seed})
    store_dir, out = tmp_path / "store", tmp_path / "reports"
    cmd = cli_run(scripted_server.base_url, rel_cube, store_dir, out, "--concurrency", "4")
    target = rng.randint(0, len(items))
    proc = subprocess.Popen([*cmd, "--run-id", "killed"], env=env_with_key(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        wait_for(lambda: sum(scripted_server.stats(log=False)["answered"].values()) >= target or proc.poll() is not None,
                 f"{target} answers")
        time.sleep(rng.uniform(0.0, 0.04))
    finally:
        sigkill(proc)
    keys = {p.item.question: p.key for p in plan_asks(rel_cube, "standard", fingerprint=fingerprint(scripted_server.base_url)) if p.available}
    kept = stored_responses(store_dir, list(keys.values()))
    stored_q = {q for q, key in keys.items() if key in kept}
    before = Counter(scripted_server.stats(log=False)["by_question"])

    done = subprocess.run([*cmd, "--run-id", "resumed"], env=env_with_key(), capture_output=True, text=True,
                          timeout=180)
    after = Counter(scripted_server.stats(log=False)["by_question"])
    asked_again = {q: after[q] - before[q] for q in keys if after[q] > before[q]}
    records = read_results(out / "resumed" / "results.jsonl") if done.returncode == 0 else []
    final = stored_responses(store_dir, list(keys.values()))
    by_id = {it.id: it for it in rel_cube.items}
    wrong_text = [r.item_id for r in records if r.graded and r.response != answers[by_id[r.item_id].question]]
    lost = len(items) - sum(1 for r in records if r.graded) + sum(1 for q in stored_q if final.get(keys[q]) != kept[keys[q]])
    t.injected += 1
    t.runs += 2
    t.completed += int(done.returncode == 0)
    t.lost += lost + len(wrong_text)
    t.duplicates += sum(1 for q in asked_again if q in stored_q)
    t.resent += sum(n for q, n in asked_again.items() if before[q] > 0)
    t.note("kill points drawn by seed over 0..all answers (before the first request, mid-run, while writing reports)")

    assert done.returncode == 0, done.stderr
    assert no_traceback(done.stdout, done.stderr)
    assert not (set(asked_again) & stored_q), "a stored response was requested again"
    assert set(asked_again) == set(keys) - stored_q  # everything else was asked, once more
    assert lost == 0 and not wrong_text
    # Only requests in flight at the kill (at most the concurrency) had been sent before.
    assert sum(1 for q in asked_again if before[q] > 0) <= 4


# ---------------------------------------------------------------------------- two runs at once


def test_two_runs_at_once_on_one_store_send_each_request_once(
    rel_cube: Cube, tmp_path: Path, scripted_server, tally
) -> None:
    t = tally("concurrent_runs")
    answers = replies(rel_cube)
    scripted_server.set_script({
        "answers": answers, "latency": {"uniform": [0.01, 0.05]}, "seed": 5,
        "faults": [{"fault": "status", "status": 500, "per_prompt": True, "first": 1, "fraction": 0.3}],
    })
    store_dir, out = tmp_path / "store", tmp_path / "reports"
    procs = [
        subprocess.Popen([*cli_run(scripted_server.base_url, rel_cube, store_dir, out, "--concurrency", "3",
                                   "--variant", variant), "--run-id", f"p{i}"],
                         env=env_with_key(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i, variant in enumerate(("standard,blind", "blind,standard"))
    ]
    outputs = [p.communicate(timeout=180) for p in procs]
    stats = scripted_server.stats(log=False)
    n_asks = asked_items(rel_cube, VARIANTS)
    runs = [json.loads((out / f"p{i}" / "run.json").read_text())["counts"] for i in range(2) if (out / f"p{i}" / "run.json").exists()]
    results = [{(r.item_id, r.variant): (r.outcome, r.response) for r in read_results(out / f"p{i}" / "results.jsonl")}
               for i in range(len(runs))]
    t.injected += _by_fault(stats)
    t.runs += 2
    t.completed += sum(1 for p in procs if p.returncode == 0)
    t.duplicates += server_duplicates(stats)
    t.lost += sum(n_asks - sum(1 for o, _ in r.values() if o in (Outcome.CORRECT, Outcome.WRONG)) for r in results)
    t.lost += 2 - len(results)

    for p, (_, e) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, e
    assert server_duplicates(stats) == 0
    assert sum(stats["answered"].values()) == n_asks  # each request answered once across both runs
    assert all(c["errors"] == 0 and c["requests_sent"] + c["cache_hits"] == n_asks for c in runs)
    assert results[0] == results[1]


# ---------------------------------------------------------------------------- a damaged store


def _populate(cube: Cube, server, store_dir: Path, texts: dict[str, str]) -> None:
    server.set_script({"answers": texts})
    store = ResponseStore(store_dir)
    # One at a time: rows are inserted in plan order, so the file's layout (and where a
    # seeded corruption lands) is the same on every run.
    run_cube(cube, openai_adapter(server.base_url, concurrency=1), variants=("standard",), store=store)
    store.close()  # the last connection checkpoints the WAL into the database file


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def _corrupt(mode: str, store_dir: Path, rng: random.Random, first_text: str) -> None:
    db = store_dir / DB_NAME
    size = db.stat().st_size
    if mode == "garbage_header":
        _overwrite(db, 0, rng.randbytes(100))
    elif mode == "truncated":
        with open(db, "r+b") as fh:
            fh.truncate(size // 3)
    elif mode == "random_bytes":
        # A few short runs of garbage anywhere after the header page. Printable ASCII, so
        # that a stored text stays valid UTF-8: damage that makes it invalid is the known
        # bug of test_a_stored_text_damaged_into_invalid_utf8_is_reasked.
        for _ in range(3):
            junk = bytes(rng.randint(0x20, 0x7E) for _ in range(rng.randint(1, 32)))
            _overwrite(db, rng.randrange(4096, size - 32), junk)
    elif mode == "flipped_value":
        raw = db.read_bytes()
        needle = first_text.encode()
        at = raw.index(needle)
        _overwrite(db, at, needle.replace(b"first", b"FIRST"))
    elif mode == "garbage_wal":
        # A WAL as a killed process leaves it (copied while a connection was open), then damaged.
        scratch = store_dir.parent / "scratch"
        shutil.copytree(store_dir, scratch)
        conn = sqlite3.connect(scratch / DB_NAME)
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute("UPDATE responses SET latency_s = latency_s + 1")
        conn.commit()
        shutil.copy(scratch / DB_NAME, db)
        shutil.copy(scratch / (DB_NAME + "-wal"), store_dir / (DB_NAME + "-wal"))
        conn.close()
        wal = store_dir / (DB_NAME + "-wal")
        wal_size = wal.stat().st_size
        _overwrite(wal, rng.randrange(32, wal_size - 16), rng.randbytes(16))
    else:
        raise ValueError(mode)


CORRUPTIONS = ["garbage_header", "truncated", "flipped_value", "garbage_wal"] + [f"random_bytes:{s}" for s in range(6)]


@pytest.mark.parametrize("mode", CORRUPTIONS)
def test_a_damaged_store_is_detected_reported_and_never_trusted(
    mode: str, rel_cube: Cube, tmp_path: Path, scripted_server, tally, caplog: pytest.LogCaptureFixture
) -> None:
    t = tally("store_corruption")
    name = mode.partition(":")[0]
    rng = random.Random(mode)
    first = replies(rel_cube, template="The answer is {letter} (first run, item {i}).")
    second = replies(rel_cube, template="The answer is {letter} (second run, item {i}).")
    store_dir = tmp_path / "store"
    _populate(rel_cube, scripted_server, store_dir, first)
    plan = plan_asks(rel_cube, ("standard",), fingerprint=fingerprint(scripted_server.base_url))
    keys = [p.key for p in plan if p.available]
    _corrupt(name, store_dir, rng, next(iter(first.values())))

    # What the damaged store vouches for, read from a copy (the real run moves files).
    probe_dir = tmp_path / "probe"
    shutil.copytree(store_dir, probe_dir)
    try:
        with ResponseStore(probe_dir) as probe:
            trusted = {k: r.text for k, r in probe.get_many(keys).items()}
    except StoreError:
        trusted = {}
    caplog.clear()

    scripted_server.set_script({"answers": second})
    scripted_server.reset_stats()
    expected = {q: {first[q], second[q]} for q in first}
    attempts, result, messages = 0, None, []
    store = None
    while result is None and attempts < 3:
        attempts += 1
        store = ResponseStore(store_dir)
        if store.recovered is not None:
            messages.append(f"moved aside to {store.recovered}")
        try:
            result = run_cube(rel_cube, openai_adapter(scripted_server.base_url), variants=("standard",), store=store)
        except StoreError as exc:
            messages.append(str(exc))
            store.close()
    assert store is not None
    stats = scripted_server.stats(log=False)
    reasked = {q for q, n in stats["by_question"].items() if n}
    q_of_key = {p.key: p.item.question for p in plan if p.available}
    a = audit(result, plan, store, expected) if result is not None else None
    from_store = {r.item_id for r in (result.records if result else []) if r.cached}
    t.injected += 1
    t.runs += attempts
    t.completed += int(result is not None)
    t.stopped += attempts - 1
    t.lost += (a.lost + a.not_from_server) if a else len(keys)
    t.duplicates += sum(1 for k in trusted if q_of_key[k] in reasked)
    t.resent += len(reasked)
    t.note("modes: garbage header, truncated file, a stored answer altered in place, damaged WAL, random bytes (4 seeds)")
    store.close()

    assert result is not None, messages
    assert a is not None and a.ok(), a.problems[:5]
    # Never graded from damage: a first-run text only where the damaged store still vouched for it.
    for ask, rec in zip(plan, result.records, strict=True):
        if ask.available and rec.response == first[ask.item.question]:
            assert trusted.get(ask.key) == rec.response
    # Nothing it vouched for was asked again; everything else was.
    assert not {q_of_key[k] for k in trusted} & reasked
    assert reasked == {q_of_key[k] for k in keys if k not in trusted}
    assert len(from_store) == len(trusted)
    if attempts > 1:  # it stopped first: the message said what to do
        assert "damaged" in messages[0] and "start it again" in messages[0]
    said = bool(messages) or any("damaged" in r.getMessage() for r in caplog.records)
    # Whatever was re-asked was reported: structural damage by integrity_check at open
    # (moved aside), a damaged value by its row checksum (a warning).
    assert len(trusted) == len(keys) or said, "damage re-asked without a word"


def test_a_stored_text_damaged_into_invalid_utf8_is_reasked(rel_cube: Cube, tmp_path: Path, scripted_server, tally) -> None:
    t = tally("store_corruption")
    first = replies(rel_cube, template="The answer is {letter} (first run, item {i}).")
    store_dir = tmp_path / "store"
    _populate(rel_cube, scripted_server, store_dir, first)
    db = store_dir / DB_NAME
    raw = db.read_bytes()
    at = raw.index(next(iter(first.values())).encode())
    _overwrite(db, at + len("The answer is X ("), b"\xff\xfe\xfd\xfc\xfb")  # "first" -> invalid UTF-8
    scripted_server.reset_stats()
    outcomes = []
    for _ in range(2):  # a second run must not meet the same wall
        try:
            with ResponseStore(store_dir) as store:
                result = run_cube(rel_cube, openai_adapter(scripted_server.base_url), variants=("standard",),
                                  store=store)
            outcomes.append(("completed", result.errors))
            break
        except StoreError as exc:
            outcomes.append(("stopped", str(exc)))
    t.injected += 1
    t.runs += len(outcomes)
    t.completed += sum(1 for o in outcomes if o[0] == "completed")
    t.stopped += sum(1 for o in outcomes if o[0] == "stopped")
    t.unclear += int(all(o[0] == "stopped" for o in outcomes))
    t.note("a stored text damaged into invalid UTF-8 reads as a damaged row (run/store/opening.py text_factory): "
           "that answer alone is asked again, the file stays in use")
    assert outcomes == [("completed", 0)], outcomes  # the first run completes: no wall to stop at
    assert scripted_server.stats(log=False)["total"] == 1  # only the damaged answer is asked again
    assert not any("\ufffd" in (r.response or "") for r in result.records)  # never graded from damage
    assert not list(store_dir.glob(f"{DB_NAME}.corrupt-*"))  # one damaged row: the file is kept


def test_damage_inside_the_key_index_is_reported(rel_cube: Cube, tmp_path: Path, scripted_server, tally,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    t = tally("store_corruption")
    first = replies(rel_cube, template="The answer is {letter} (first run, item {i}).")
    store_dir = tmp_path / "store"
    _populate(rel_cube, scripted_server, store_dir, first)
    db = store_dir / DB_NAME
    key = next(p.key for p in plan_asks(rel_cube, "standard", fingerprint=fingerprint(scripted_server.base_url)) if p.available)
    pristine = db.read_bytes()
    # The key is in the file twice: in its table row and in the index. Damage the copy
    # whose loss only PRAGMA integrity_check notices: the index entry.
    for at in [i for i in range(len(pristine)) if pristine.startswith(key.encode(), i)]:
        db.write_bytes(pristine)
        _overwrite(db, at + 10, b"ZZZZ")
        with sqlite3.connect(db) as conn:
            quick = conn.execute("PRAGMA quick_check").fetchall()
            full = conn.execute("PRAGMA integrity_check").fetchall()
        if quick == [("ok",)] and full != [("ok",)]:
            break
    else:
        pytest.fail("no index copy of the key found")
    caplog.clear()
    scripted_server.reset_stats()
    with ResponseStore(store_dir) as store:
        recovered = store.recovered
        run_cube(rel_cube, openai_adapter(scripted_server.base_url), variants=("standard",), store=store)
    reasked = scripted_server.stats(log=False)["total"]
    said = recovered is not None or any("damaged" in r.getMessage() for r in caplog.records)
    t.injected += 1
    t.runs += 1
    t.completed += 1
    t.resent += reasked
    t.note("damage inside the key index passes quick_check but not integrity_check (run/store/opening.py _check): "
           "the file is moved aside and reported")
    assert said, "damaged store used without a word"
    assert recovered is not None and recovered.exists()  # moved aside, as any structural damage


def test_a_damaged_store_is_reported_by_medrcube_run(rel_cube: Cube, tmp_path: Path, scripted_server, tally) -> None:
    """The user-facing side of the damaged store: `medrcube run` says it moved the file
    aside, where to, and completes; the damaged file is kept as evidence."""
    t = tally("store_corruption")
    answers = replies(rel_cube)
    store_dir, out = tmp_path / "store", tmp_path / "reports"
    _populate(rel_cube, scripted_server, store_dir, answers)
    _overwrite(store_dir / DB_NAME, 0, b"\0" * 100)
    scripted_server.reset_stats()
    done = subprocess.run([*cli_run(scripted_server.base_url, rel_cube, store_dir, out), "--run-id", "after"],
                          env=env_with_key(), capture_output=True, text=True, timeout=180)
    aside = sorted(store_dir.glob(f"{DB_NAME}.corrupt-*"))
    t.injected += 1
    t.runs += 1
    t.completed += int(done.returncode == 0)
    t.resent += scripted_server.stats(log=False)["total"]
    assert done.returncode == 0, done.stderr
    assert "damaged" in done.stderr and "moved aside" in done.stderr and str(aside[0]) in done.stderr
    assert no_traceback(done.stdout, done.stderr)
    assert aside and aside[0].read_bytes()[:100] == b"\0" * 100


# ---------------------------------------------------------------------------- disk full


def _tree_bytes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_disk_full_while_writing_reports_stops_clearly_and_keeps_the_store(
    rel_cube: Cube, tmp_path: Path, scripted_server, tally
) -> None:
    t = tally("disk_full_reports")
    answers = replies(rel_cube)
    scripted_server.set_script({"answers": answers})
    store_dir, small = tmp_path / "store", tmp_path / "small"
    n = asked_items(rel_cube, ("standard",))
    with tiny_filesystem(small, 8) as mounted:
        cmd = cli_run(scripted_server.base_url, rel_cube, store_dir, small, "--run-id", "full")
        if not mounted:  # no tmpfs here: every file of the run is capped below results.jsonl's size
            cmd = fsize_limited(cmd, 8 * 1024)
            t.note("disk full simulated with RLIMIT_FSIZE (no tmpfs on this machine)")
        else:
            t.note("disk full on a real 8 KiB tmpfs")
        done = subprocess.run(cmd, env=env_with_key(), capture_output=True, text=True, timeout=180)
        leftovers = _tree_bytes(small)
    first_stats = scripted_server.stats(log=False)
    keys = [p.key for p in plan_asks(rel_cube, "standard", fingerprint=fingerprint(scripted_server.base_url)) if p.available]
    kept = stored_responses(store_dir, keys)

    scripted_server.reset_stats()
    again = subprocess.run(cli_run(scripted_server.base_url, rel_cube, store_dir, tmp_path / "roomy", "--run-id", "ok"),
                           env=env_with_key(), capture_output=True, text=True, timeout=180)
    second_total = scripted_server.stats(log=False)["total"]
    t.injected += 1
    t.runs += 2
    t.stopped += int(done.returncode == 1 and "cannot write the run directory" in done.stderr)
    t.completed += int(again.returncode == 0)
    t.lost += n - len(kept)
    t.duplicates += second_total + server_duplicates(first_stats)
    t.unclear += int(not no_traceback(done.stdout, done.stderr))

    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "cannot write the run directory" in done.stderr and "safe in the store" in done.stderr
    assert no_traceback(done.stdout, done.stderr)
    # No half-written report is left looking complete.
    assert "full/results.jsonl" not in leftovers or leftovers["full/results.jsonl"] > 0
    assert not [name for name in leftovers if name.endswith(".tmp")], leftovers
    assert len(kept) == n and sum(first_stats["answered"].values()) == n
    assert again.returncode == 0, again.stderr
    assert second_total == 0  # everything came from the store
    assert len(read_results(tmp_path / "roomy" / "ok" / "results.jsonl")) == len(rel_cube)


def test_disk_full_under_the_store_stops_clearly_and_keeps_what_was_committed(
    rel_cube: Cube, tmp_path: Path, scripted_server, tally
) -> None:
    t = tally("disk_full_store")
    answers = replies(rel_cube)
    scripted_server.set_script({"answers": answers, "latency": 0.01})
    small, out = tmp_path / "small", tmp_path / "reports"
    store_dir = small / "store"
    keys = {p.key: p.item.question for p in plan_asks(rel_cube, "standard", fingerprint=fingerprint(scripted_server.base_url)) if p.available}
    # 256 KiB: the run's 24 answers must not all fit. One commit per answer (the next claim
    # in the same transaction, run/pump.py) writes half the WAL frames of two, and at 384
    # KiB a whole run sometimes fitted.
    with tiny_filesystem(small, 256) as mounted:
        if not mounted:
            pytest.skip("needs a tmpfs (root): a per-file size limit cannot fill a disk under SQLite's feet")
        done = subprocess.run([*cli_run(scripted_server.base_url, rel_cube, store_dir, out, "--concurrency", "2"),
                               "--run-id", "full"], env=env_with_key(), capture_output=True, text=True, timeout=180)
        # Take the database (and its WAL: the committed tail) to roomy disk, as a user would.
        roomy = tmp_path / "moved"
        roomy.mkdir()
        for f in store_dir.iterdir():
            if not f.name.endswith("-shm"):
                shutil.copy(f, roomy / f.name)
    first = scripted_server.stats()
    kept = stored_responses(roomy, list(keys))
    answered_q = {e["question"] for e in first["requests"] if e["outcome"] == "200"}
    scripted_server.reset_stats()
    again = subprocess.run([*cli_run(scripted_server.base_url, rel_cube, roomy, out), "--run-id", "resumed"],
                           env=env_with_key(), capture_output=True, text=True, timeout=180)
    second = scripted_server.stats(log=False)
    reasked = {q for q, c in second["by_question"].items() if c}
    kept_q = {keys[k] for k in kept}
    t.injected += 1
    t.runs += 2
    t.stopped += int(done.returncode == 1)
    t.completed += int(again.returncode == 0)
    t.duplicates += len(reasked & kept_q)
    t.resent += len(reasked & answered_q)  # answered, but the full disk refused the commit
    t.lost += len(keys) - len(stored_responses(roomy, list(keys)))
    t.unclear += int(not no_traceback(done.stdout, done.stderr))
    t.note("the store on a 256 KiB tmpfs filled mid-run")

    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "response store" in done.stderr and "full" in done.stderr.lower(), done.stderr
    assert no_traceback(done.stdout, done.stderr)
    assert 0 < len(kept) < len(keys)  # it filled mid-run, and what was committed is there
    assert {keys[k] for k in kept} <= answered_q
    assert again.returncode == 0, again.stderr
    assert not reasked & kept_q  # committed responses never asked again
    assert reasked == set(keys.values()) - kept_q
    assert len(reasked & answered_q) <= 2  # only what was in flight when the disk filled


# ---------------------------------------------------------------------------- xdist worker killed

_THRESHOLDS = """\
version: 1
defaults: {rule: point, confidence: 0.95, min_n: 3, max_error_rate: 0.05}
overall: {bound: 0.5}
slices:
  part: {default: {bound: 0.5}}
cells:
  - {match: "*/*/*", bound: 0.5}
"""


def _png(shade: int) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (shade, 255 - shade, (shade * 7) % 256)).save(buf, format="PNG")
    return buf.getvalue()


def _gate_workspace(root: Path, n: int = 16) -> list[dict[str, Any]]:
    """tests_benchmark of this checkout, a JSON Lines cube with real PNGs, a policy and a
    models.yaml that gives the scripted model a short timeout."""
    shutil.copytree(REPO / "tests_benchmark", root / "tests_benchmark",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (root / "cube" / "img").mkdir(parents=True)
    items = []
    for i in range(n):
        (root / "cube" / "img" / f"x{i}.png").write_bytes(_png(12 * i))
        items.append({"id": f"item-{i:02d}", "dataset": "reliab", "image": f"img/x{i}.png",
                      "question": f"Case {i}: what is the most likely diagnosis?",
                      "options": ["pneumonia", "effusion", "normal", "nodule"], "answer": i % 4,
                      "task": "Disease Diagnosis" if i % 2 else "Modality Recognition",
                      "modality": "X-Ray", "part": "Chest"})
    (root / "cube" / "cube.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
    (root / "thresholds.yaml").write_text(_THRESHOLDS, encoding="utf-8")
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return items


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states through /proc")
def test_a_zombie_owner_is_dead(tally) -> None:
    import socket

    from medrcube.run.store import owner_is_dead

    t = tally("xdist_worker_kill")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.kill(child.pid, 9)
        wait_for(lambda: process_state(child.pid) == "Z", "the killed child to become a zombie")
        dead = owner_is_dead(f"{socket.gethostname()}:{child.pid}:feedbeef")
    finally:
        child.wait()
    t.note("a SIGKILLed process counts as dead while it is a zombie (run/store/claims.py owner_is_dead reads "
           "/proc/<pid>/stat), so its claims are taken over at once, not at their expiry")
    assert dead


@pytest.mark.slow  # two gate runs with two xdist workers each: ~20 s on 2 cores
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the xdist workers through /proc")
def test_an_xdist_worker_killed_mid_run_is_reported_and_the_rerun_completes_from_the_store(
    tmp_path: Path, scripted_server, tally
) -> None:
    t = tally("xdist_worker_kill")
    items = _gate_workspace(tmp_path)
    letters = {it["question"]: "ABCD"[it["answer"]] for it in items}
    k = 4
    slow = {it["question"]: 300 for it in items[k:]}
    scripted_server.set_script({"answers": letters, "latency_by_question": slow})
    (tmp_path / "models.yaml").write_text(
        "models:\n  reliab-model:\n    provider: openai\n"
        f"    model: scripted-model\n    base_url: {scripted_server.base_url}\n"
        "    timeout: 8\n    max_retries: 4\n    concurrency: 2\n", encoding="utf-8")  # no good answer cut under load
    cmd = [sys.executable, "-m", "pytest", "tests_benchmark", "-n", "2", "-p", "no:cacheprovider", "-q",
           "--cube=cube/cube.jsonl", "--thresholds=thresholds.yaml", "--models-file=models.yaml",
           "--model=reliab-model", "--response-store=store", "-rA"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env_with_key(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    killed, zombie = None, False
    try:
        wait_for(lambda: (s := scripted_server.stats(log=False))["in_flight"] >= 4
                 and sum(s["answered"].values()) >= k, "both workers waiting on slow answers", timeout=120)
        # The controller's children besides its workers: a leakage audit computing in a child
        # process (cube/audit_child.py) when the cube is new to the cache.
        workers = [w for w in child_pids(proc.pid) if b"audit_child" not in Path(f"/proc/{w}/cmdline").read_bytes()]
        assert len(workers) >= 2, workers
        killed = workers[0]
        os.kill(killed, 9)
        scripted_server.set_script({"answers": letters})  # the survivors' retries now succeed
        time.sleep(0.5)
        zombie = process_state(killed) == "Z"
        first_out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            sigkill(proc)
    first_stats = scripted_server.stats(log=False)
    questions = {it["question"] for it in items}
    store = ResponseStore(tmp_path / "store")
    from medrcube.cube import load_cube

    cube = load_cube(tmp_path / "cube" / "cube.jsonl")
    keys = {p.key: p.item.question for p in plan_asks(cube, "standard", fingerprint=fingerprint(scripted_server.base_url))}
    stored_first = {keys[k] for k in store.get_many(list(keys))}
    store.close()

    scripted_server.reset_stats()
    second = subprocess.run(cmd, cwd=tmp_path, env=env_with_key(), capture_output=True, text=True, timeout=240)
    second_stats = scripted_server.stats(log=False)
    reasked = {q for q, c in second_stats["by_question"].items() if c}
    answered = Counter(first_stats["answered"]) + Counter(second_stats["answered"])
    gate = sorted((tmp_path / "reports").glob("*/gate.json"))
    verdicts = json.loads(gate[-1].read_text())["checks"] if gate else []
    t.injected += 1
    t.runs += 2
    t.stopped += int(proc.returncode != 0 and "crashed" in first_out)
    t.completed += int(second.returncode == 0)
    t.duplicates += len(reasked & stored_first) + sum(n - 1 for n in answered.values() if n > 1)
    t.lost += len(questions) - len(stored_first | reasked)
    t.note("one of two workers SIGKILLed while its requests hung at the server; xdist replaced it")
    if zombie:
        t.note("the killed worker stayed a zombie until xdist reaped it; its claims were taken over at once "
               "all the same (see test_a_zombie_owner_is_dead)")

    assert killed is not None
    assert proc.returncode != 0 and "crashed" in first_out, first_out[-3000:]
    assert second.returncode == 0, second.stdout[-3000:]
    assert not reasked & stored_first  # what the first run stored was never asked again
    assert stored_first | reasked == questions
    assert sum(n - 1 for n in answered.values() if n > 1) == 0
    assert verdicts and all(c["verdict"] == "pass" for c in verdicts), verdicts
