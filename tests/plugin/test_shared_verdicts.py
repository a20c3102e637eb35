"""Under xdist, a worker takes the deciding worker's verdicts (plugin/speed/shared_verdicts.py)
only when they were decided on records whose lines have its own records' digest; it stops
waiting at once when the deciding worker withdrew or died, and when the wait runs out."""

from __future__ import annotations

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
             "took": sorted(run.shared_payloads or {}), "decided_itself": bool(run._verdicts)}))
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
