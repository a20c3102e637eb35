"""Under xdist, a worker takes the deciding worker's verdicts (plugin/speed/shared_verdicts.py)
only when they were decided on records whose lines have its own records' digest; it stops
waiting at once when the deciding worker withdrew or died, and when the wait runs out."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from medrcube.plugin.speed import shared_verdicts
from medrcube.run import shard_exchange

PAYLOADS = {"overall": {"id": "overall", "verdict": "pass", "message": "decided on the same records"}}


def test_the_payloads_of_the_same_lines_are_taken(tmp_path):
    shared_verdicts.publish(tmp_path, "a" * 64, PAYLOADS)
    assert shared_verdicts.wait_for(tmp_path, "a" * 64, wait_s=0.0) == PAYLOADS
    assert [p.name for p in tmp_path.iterdir()] == [shared_verdicts.FILE]  # written whole, renamed into place


def test_the_payloads_of_other_lines_are_not(tmp_path):
    # The deciding worker read the store itself (its `cached` flags, its latencies): it decided on other lines.
    shared_verdicts.publish(tmp_path, "a" * 64, PAYLOADS)
    assert shared_verdicts.wait_for(tmp_path, "b" * 64, wait_s=0.0) is None
    (tmp_path / shared_verdicts.FILE).write_text('{"format": 1, "lines_sha256": "' + "b" * 64 + '", "payl', "utf-8")
    assert shared_verdicts.wait_for(tmp_path, "b" * 64, wait_s=0.0) is None  # cut short


def test_a_withdrawn_or_dead_decider_is_not_waited_for(tmp_path):
    never = lambda: 0.0  # noqa: E731 - a clock that never moves: only the decider's state can end the wait
    shared_verdicts.withdraw(tmp_path)
    assert shared_verdicts.wait_for(tmp_path, "a" * 64, wait_s=1.0, clock=never) is None
    (tmp_path / shared_verdicts.NONE).unlink()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f"{shared_verdicts.PASS}-{shared_verdicts.DECIDER}.pid").write_text(str(dead.pid))
    assert shard_exchange.writer_gone(tmp_path, shared_verdicts.PASS, shared_verdicts.DECIDER)
    assert shared_verdicts.wait_for(tmp_path, "a" * 64, wait_s=1.0, clock=never) is None


def test_the_wait_runs_out(tmp_path):
    ticks = iter(range(1000))
    assert shared_verdicts.wait_for(tmp_path, "a" * 64, wait_s=5.0, clock=lambda: float(next(ticks))) is None
    assert next(ticks) < 10  # it gave up once its clock passed the wait, not later


OBSERVER = """
import json, os
from pathlib import Path
from medrcube.plugin import session as gate

def pytest_sessionfinish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    run = session.config.stash.get(gate.SESSION_KEY, None)
    if worker and run is not None and run.worker[1] > 1:
        Path(f"shared-{worker}.json").write_text(json.dumps(
            {"shard": run.worker[0], "ran_cases": run.shared_payloads is not None,
             "took": sorted(run.shared_payloads or {}), "decided_itself": bool(run._verdicts),
             "read_other_shards": run._inference.complete if run._inference is not None else None,
             "records_held": len(run._result.records) if run._result is not None else None}))
"""


@pytest.mark.slow  # more xdist workers than cores, each its own interpreter
@pytest.mark.skipif(shared_verdicts.cores() > 4, reason="more workers than this machine's cores would be many")
def test_workers_outnumbering_the_cores_take_one_workers_verdicts(gate_ws, gate_server):
    """With more workers than cores, the worker of shard 0 decides and the others take its
    payloads: the same gate.json as a run without xdist, and only one worker decided."""
    wrong = gate_ws.ids("Disease Diagnosis")[::2]
    gate_server.set_script({"answer_key": gate_ws.answer_key(wrong=wrong)})
    model = gate_ws.openai(gate_server)
    gate_ws.run("--variants=standard,blind", model=model, store="store-serial")
    serial = gate_ws.gate_json()
    serial_records = _graded(gate_ws.run_dirs()[-1])
    (gate_ws.path / "conftest.py").write_text(OBSERVER, encoding="utf-8")
    workers = shared_verdicts.cores() + 1
    gate_ws.run_subprocess("-n", str(workers), "--variants=standard,blind", model=model, store="store-parallel")
    assert gate_ws.gate_json()["checks"] == serial["checks"]
    seen = [json.loads((gate_ws.path / f"shared-gw{i}.json").read_text()) for i in range(workers)
            if (gate_ws.path / f"shared-gw{i}.json").exists()]
    ran = [s for s in seen if s["ran_cases"]]
    assert len(ran) >= 2  # the cases were spread over several workers
    assert all(s["decided_itself"] for s in ran if s["shard"] == 0)  # and wrote what it decided for the others
    assert all(s["took"] and not s["decided_itself"] for s in ran if s["shard"] != 0)
    # Each of them took the payloads as its own pass ended: it read no other shard's records.
    assert all(s["read_other_shards"] is False for s in ran if s["shard"] != 0)
    # and the run's results.jsonl holds every record all the same, as the run without xdist graded them
    # (the controller read the shard files: plugin/speed/shard_preread.py).
    assert _graded(gate_ws.run_dirs()[-1]) == serial_records
    assert all(s["records_held"] < len(serial_records) for s in ran if s["shard"] != 0)


def _graded(run_dir):
    """results.jsonl's records as what was asked and how it was graded (not when, nor how fast)."""
    lines = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted((r["item_id"], r["variant"], r["rotation"], r["outcome"], r["extracted"], r["cached"])
                  for r in map(json.loads, lines) if "item_id" in r)


SITE_TESTS = '''
import json, os
from pathlib import Path
import pytest


@pytest.mark.parametrize("n", range(40))
def test_every_record_in_every_worker(n, medrcube_records, medrcube_verdict, medrcube_session):
    # A site's check reads the whole run's records, in a worker that took the deciding one's verdicts too.
    Path(f"site-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{n}.json").write_text(
        json.dumps({"shard": medrcube_session.worker[0], "records": len(medrcube_records)}))
    diagnosis = [r for r in medrcube_records if r.task == "Disease Diagnosis"]
    medrcube_verdict(f"site/diagnosis {n}", diagnosis, bound=0.5, rule="point", min_n=10)
'''


@pytest.mark.slow  # more xdist workers than cores, each its own interpreter
@pytest.mark.skipif(shared_verdicts.cores() > 4, reason="more workers than this machine's cores would be many")
def test_a_site_check_in_a_worker_that_took_the_verdicts_reads_every_shard(gate_ws, gate_server):
    """A worker that took the deciding worker's verdicts without reading the other shards reads
    them when a site's check asks for the records: every record, and the serial run's verdicts."""
    gate_server.set_script({"answer_key": gate_ws.answer_key(wrong=gate_ws.ids("Disease Diagnosis")[::3])})
    (gate_ws.path / "tests_benchmark" / "test_site.py").write_text(SITE_TESTS, encoding="utf-8")
    model = gate_ws.openai(gate_server)
    gate_ws.run(model=model, store="store-serial")
    serial = gate_ws.gate_json()
    for seen in gate_ws.path.glob("site-*.json"):
        seen.unlink()
    gate_ws.run_subprocess("-n", str(shared_verdicts.cores() + 1), model=model, store="store-parallel")
    assert gate_ws.gate_json()["checks"] == serial["checks"]
    seen = [json.loads(p.read_text()) for p in gate_ws.path.glob("site-gw*.json")]
    assert len(seen) == 40 and all(s["records"] == len(gate_ws.items) for s in seen)
    assert any(s["shard"] != 0 for s in seen)  # forty cases: xdist hands some to the workers that took the verdicts


def test_a_worker_takes_the_payloads_only_for_its_own_file_as_written(tmp_path):
    """The deciding worker names the SHA-256 of every shard file it read; another worker takes
    its payloads before reading any shard only when its own file is named with its digest."""
    shared_verdicts.publish(tmp_path, "a" * 64, PAYLOADS, {0: "0" * 64, 1: "1" * 64, 2: "2" * 64})
    doc = asyncio.run(shared_verdicts.decided(tmp_path, wait_s=0.0))
    assert doc is not None and doc["payloads"] == PAYLOADS and doc["lines_sha256"] == "a" * 64
    assert shared_verdicts.read_from(doc, 1, 3, "1" * 64)
    assert not shared_verdicts.read_from(doc, 1, 3, "f" * 64)  # its file is not the one the decider read
    assert not shared_verdicts.read_from(doc, 1, 4, "1" * 64)  # another count of workers
    # Decided on records read from the store (no shard files named): nothing to match a file against.
    shared_verdicts.publish(tmp_path, "a" * 64, PAYLOADS)
    assert not shared_verdicts.read_from(asyncio.run(shared_verdicts.decided(tmp_path, wait_s=0.0)), 1, 3, "1" * 64)


def test_the_wait_on_the_event_loop_ends_when_the_decider_withdraws(tmp_path):
    never = lambda: 0.0  # noqa: E731 - a clock that never moves: only the decider's state can end the wait
    shared_verdicts.withdraw(tmp_path)
    assert asyncio.run(shared_verdicts.decided(tmp_path, wait_s=1.0, clock=never)) is None


def test_a_worker_whose_decider_is_gone_decides_itself_without_a_second_wait(tmp_path):
    """The wait for the deciding worker's payloads happens once: when it withdrew (or died, or took
    too long) as this worker's pass ended, this worker decides itself at once afterwards."""
    from types import SimpleNamespace

    taken: list = []
    state = SimpleNamespace(exchange_dir=tmp_path, worker=(1, shared_verdicts.cores() + 1),
                            options=SimpleNamespace(sequential=False), has_baseline=False, decider_payloads=None,
                            take_decided=lambda payloads, digest: taken.append((payloads, digest)))
    take = shared_verdicts.taker(state)
    assert take is not None and shared_verdicts.taker(SimpleNamespace(**{**vars(state), "worker": (0, 3)})) is None
    shared_verdicts.withdraw(tmp_path)
    assert asyncio.run(take("1" * 64)) is False
    assert state.decider_payloads == {} and not taken  # nothing to wait for again: decide here
    # Its payloads, decided on this worker's very file: taken.
    (tmp_path / shared_verdicts.NONE).unlink()
    state.decider_payloads = None
    shared_verdicts.publish(tmp_path, "a" * 64, PAYLOADS, {j: f"{j}" * 64 for j in range(state.worker[1])})
    assert asyncio.run(take("1" * 64)) is True and taken == [(PAYLOADS, "a" * 64)]
    assert asyncio.run(take("f" * 64)) is False and state.decider_payloads is None  # another file: compare lines later
