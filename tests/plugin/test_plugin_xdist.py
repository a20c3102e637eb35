"""pytest-xdist: `-n 3` decides exactly as `-n 0`, sends each request to the model once,
spreads the asks over the workers, and only the controller writes reports."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest

VARIANTS = "--variants=standard,blind"


def _without_nodeids(checks: list[dict]) -> list[dict]:
    return [{k: v for k, v in c.items()} for c in checks]


@pytest.mark.slow  # three xdist workers each start an interpreter and import scipy: ~15 s on 2 cores
def test_n0_and_n3_identical_verdicts_and_requests(gate_ws, gate_server):
    # A mixed model: diagnosis half wrong, so that verdicts differ between checks.
    wrong = gate_ws.ids("Disease Diagnosis")[::2]
    gate_server.set_script({"answer_key": gate_ws.answer_key(wrong=wrong)})
    model = gate_ws.openai(gate_server)

    serial = gate_ws.run(VARIANTS, model=model, store="store-serial")
    serial_doc = gate_ws.gate_json()
    serial_stats = gate_server.stats()
    gate_server.reset_stats()

    before = time.time()
    parallel = gate_ws.run_subprocess("-n", "3", VARIANTS, model=model, store="store-parallel")
    after = time.time()
    parallel_doc = gate_ws.gate_json()
    parallel_stats = gate_server.stats()
    # Every answer was asked in this run (on a fresh store), by one worker or another: none
    # is `cached`; and the run's times are the controller's, spanning the whole run.
    run_dir = gate_ws.run_dirs()[-1]
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert records and not any(r["cached"] for r in records)
    timings = json.loads((run_dir / "run.json").read_text())["timings"]
    started = datetime.fromisoformat(timings["started"].replace("Z", "+00:00")).timestamp()
    finished = datetime.fromisoformat(timings["finished"].replace("Z", "+00:00")).timestamp()
    assert before - 1 <= started <= finished <= after + 1
    assert abs(timings["wall_s"] - (finished - started)) <= 1  # whole seconds in the ISO times
    # The server's log is in its own monotonic clock: the first request, in wall-clock time.
    first = time.time() - (time.monotonic() - gate_server._t0 - min(e["t_start"] for e in parallel_stats["requests"]))
    assert started <= first + 1  # not a worker's last pass, which starts after the first requests

    assert len(gate_ws.run_dirs()) == 2  # one per run: the workers wrote nothing
    # What the controller wrote ahead (results.jsonl beside the run directory) was renamed into it
    # or removed, and the sealed digests are those of the files as they are.
    assert not [p.name for p in run_dir.parent.iterdir() if p.name.startswith(".")]
    from medrcube.rundir.seal import verify_run_dir

    assert verify_run_dir(run_dir, page=False).problems == []
    assert parallel_doc["checks"] == serial_doc["checks"]
    assert {c["verdict"] for c in serial_doc["checks"]} >= {"pass", "fail", "undecided"}
    # xdist's controller does not count deselected items (each worker deselects its own).
    ignore = {"deselected"}
    assert {k: v for k, v in parallel.parseoutcomes().items() if k not in ignore} == {
        k: v for k, v in serial.parseoutcomes().items() if k not in ignore
    }

    # 27 items x (standard, blind), each sent exactly once in both runs.
    assert serial_stats["total"] == parallel_stats["total"] == 54
    assert serial_stats["by_request"] == parallel_stats["by_request"]
    assert parallel_stats["duplicates"] == 0
    assert parallel_doc["requests_sent"] == 54
    # Every worker reports its count, and together they sent each request once. How they
    # split is the scheduler's: a worker asks its own shard, then takes the others' from their
    # files (run/shard_exchange.py); one that starts more than the others' wait late finds its
    # shard already asked by another's pass over the store, so an even spread is no guarantee
    # and is not asserted.
    by_process = parallel_doc["requests_by_process"]
    assert sorted(by_process) == ["gw0", "gw1", "gw2"]
    assert sum(by_process.values()) == 54

    # The summary is printed once, by the controller.
    assert parallel.stdout.str().count("= medrcube gate =") == 1
    parallel.stdout.fnmatch_lines(["X-Ray *MR *DD*", "  Chest *pass *FAIL*"])
