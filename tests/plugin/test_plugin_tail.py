"""The gate's time after its last answer (issue 29, docs/speed.md): the heap is frozen
once inference is done and given back to the collector after pytest's own end-of-run
collections, and gate.json is the same whole document, sealed at the exit status."""

from __future__ import annotations

import gc
import importlib
import json
import os

from medrcube.rundir.seal import verify_run_dir

SITE_TEST = '''
import gc
import os


def test_the_heap_is_frozen_once_the_records_are_in(medrcube_records):
    assert medrcube_records
    assert gc.get_freeze_count() > 0
'''


def test_the_heap_is_frozen_after_inference_and_thawed_after_the_run(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    (gate_ws.path / "tests_benchmark" / "test_heap.py").write_text(SITE_TEST, encoding="utf-8")
    assert gc.get_freeze_count() == 0
    result = gate_ws.run("--junitxml=junit.xml", model=gate_ws.openai(gate_server))
    assert result.ret == 11, result.stdout.str()[-3000:]
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.stdout.str()[-3000:]
    # This process ran the gate in-process (pytester): it collects its whole heap again.
    assert gc.get_freeze_count() == 0
    run_dir = gate_ws.run_dirs()[-1]
    assert verify_run_dir(run_dir).ok
    # One entry per check, each with its nodeid (the payload is read once per case).
    doc = gate_ws.gate_json()
    junit = (gate_ws.path / "junit.xml").read_text(encoding="utf-8")
    assert doc["checks"] and all(f'"{c["id"]}"' in json.dumps(doc) for c in doc["checks"])
    assert junit.count('name="medrcube_verdict"') == len(doc["checks"])
    assert 'name="test_the_heap_is_frozen_once_the_records_are_in"' in junit


def test_an_in_process_run_stopped_in_its_configure_leaves_the_heap_unfrozen(gate_ws, gate_server):
    """A process running the gate in-process again and again (pytester, a notebook): after a
    run that froze and gave back its heap, a run stopped by a usage error while it is
    configured (before it could register the thaw) must not freeze the heap at its end."""
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    gate_ws.run(model=gate_ws.openai(gate_server))
    assert gc.get_freeze_count() == 0
    refused = gate_ws.run("--max-requests=5", model=gate_ws.openai(gate_server))  # budgets need --sequential
    assert refused.ret == 4 and "only apply to a sequential run" in refused.stderr.str()
    assert gc.get_freeze_count() == 0


def test_a_large_runs_results_and_summary_come_from_the_mirror_child_and_are_the_runs_own(
        gate_ws, gate_server, monkeypatch):
    """rundir/mirror.py: with the child on (here for any size), the run directory's results.jsonl and
    metrics_summary.json are the child's files, renamed into place, and they are what the records
    give: the summary made again from results.jsonl's records is the file, byte for byte; the
    records digest of run.json is theirs; the seal verifies; nothing is left beside the run."""
    from medrcube.rundir.files import metrics_summary, read_results, records_digest, summary_arguments, summary_text

    # The module the run will import (pytester's in-process runs drop the modules they imported
    # afterwards, so a package's attribute can name a module an earlier run imported).
    mirror = importlib.import_module("medrcube.rundir.mirror")
    monkeypatch.setattr(mirror, "MIN_RECORDS", 1)
    taken = []
    take = mirror.Mirror.take

    def observed(self, wait_s=mirror.WAIT_S):
        taken.append(take(self, wait_s))
        return taken[-1]

    monkeypatch.setattr(mirror.Mirror, "take", observed)
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run("--variants=standard,blind", model=gate_ws.openai(gate_server))
    assert result.ret in (0, 10, 11), result.stdout.str()[-3000:]
    assert len(taken) == 1 and taken[0] is not None  # asked once, and its files taken
    run_dir = gate_ws.run_dirs()[-1]
    assert verify_run_dir(run_dir).ok
    records = read_results(run_dir / "results.jsonl")
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert run["records_digest"] == records_digest(records)
    prevalence, costs = summary_arguments(run["site_policy"])
    summary = metrics_summary(records, run["variants"], prevalence=prevalence, costs=costs)
    assert (run_dir / "metrics_summary.json").read_text(encoding="utf-8") == summary_text(summary)
    assert not [p.name for p in run_dir.parent.iterdir() if p.name.startswith(".")]


# A forked evidence child of the test below sleeps before it collects: the process's own share is done
# first, and its wait for the child's answer is where the run files' ask is prepared.
_SLOW_CHILD = {"on": False}


def _child_sleeps() -> None:
    if _SLOW_CHILD["on"]:
        import time

        time.sleep(0.3)


os.register_at_fork(after_in_child=_child_sleeps)


def test_the_run_files_ask_is_prepared_while_the_evidence_child_works(gate_ws, gate_server, monkeypatch):
    """plugin/speed/forked_evidence.py's `meanwhile`, as the session wires it: with the evidence forked and
    the run files child on (here at any size), the offsets of the records' lines are found while the
    process waits for the evidence child's answer (by the records' places among the batches graded:
    RunResult.delivery, with no lookup by identity), taken by the ask after the verdicts, and the run
    directory's files are the child's, renamed into place, and the run's own."""
    from medrcube.rundir.files import read_results, records_digest

    mirror = importlib.import_module("medrcube.rundir.mirror")
    forked = importlib.import_module("medrcube.plugin.speed.forked_evidence")
    files = importlib.import_module("medrcube.rundir.files")
    monkeypatch.setattr(mirror, "MIN_RECORDS", 1)
    monkeypatch.setattr(forked, "MIN_RECORDS", 0)
    prepared, asked, taken, looked_up = [], [], [], []
    prepare, ask, take = files.GradedAhead.prepare_ask, files.GradedAhead.ask_mirror, mirror.Mirror.take
    lookups = files.ResultRows.offsets

    def observed_prepare(self, records, directory, *rest):
        prepare(self, records, directory, *rest)
        prepared.append(self._ask_ready)

    def observed_lookups(self, records):
        looked_up.append(len(records))
        return lookups(self, records)

    def observed_ask(self, records, *args, **kwargs):
        ready = self._ask_ready
        asked.append(ready is not None and ready[:2] == (files._order(records), self.rows.end))
        return ask(self, records, *args, **kwargs)

    def observed_take(self, wait_s=mirror.WAIT_S):
        taken.append(take(self, wait_s))
        return taken[-1]

    monkeypatch.setattr(files.GradedAhead, "prepare_ask", observed_prepare)
    monkeypatch.setattr(files.GradedAhead, "ask_mirror", observed_ask)
    monkeypatch.setattr(mirror.Mirror, "take", observed_take)
    monkeypatch.setattr(files.ResultRows, "offsets", observed_lookups)
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    _SLOW_CHILD["on"] = True
    try:
        result = gate_ws.run("--variants=standard,blind,shuffled:2", model=gate_ws.openai(gate_server))
    finally:
        _SLOW_CHILD["on"] = False
    assert result.ret in (0, 10, 11), result.stdout.str()[-3000:]
    assert len(prepared) == 1 and prepared[0] is not None and prepared[0][2] is not None  # in the wait, once
    assert asked == [True]  # the ask took the offsets found then
    assert looked_up == []  # found by the records' places among the batches graded
    assert len(taken) == 1 and taken[0] is not None  # and the child's files were made from them
    run_dir = gate_ws.run_dirs()[-1]
    assert verify_run_dir(run_dir).ok
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert run["records_digest"] == records_digest(read_results(run_dir / "results.jsonl"))
