"""The controller's own records handed over as they are (GateSession.handover(live=True))
merge into the run a worker's JSON dicts of the same records give (plugin/handover.py)."""

from __future__ import annotations

import dataclasses
import json

from medrcube.plugin.handover import merge_handovers
from medrcube.records import GradedRecord, Outcome


def _handover(records: list, worker: str, sent: int) -> dict:
    return {"worker": worker, "records": records, "requests_sent": sent, "judge_requests": 0, "usage": {},
            "started": 1.0, "finished": 2.0, "wall_s": 1.0, "aborted": None, "info": {"variants": ["standard"]}}


def test_live_records_merge_as_their_dicts_do() -> None:
    base = dict(dataset="ds", task="t", modality="CT", part="Brain", image="img/1.png", image_digest="sha256:ab",
                variant="standard", rotation=0, answer=1, n_options=4, prompt_hash="ph", response="B", extracted=1,
                how="bare_letter", outcome=Outcome.CORRECT)
    records = [GradedRecord(item_id=f"i{k}", cached=k % 2 == 0, **base) for k in range(6)]
    # another process of the run sent i0 (cached for this one): not cached for the run
    other = [dataclasses.replace(records[0], cached=False).to_dict()]
    as_dicts = [json.loads(json.dumps(r.to_dict())) for r in records]
    live = merge_handovers([_handover(list(records), "main", 3), _handover(other, "gw1", 1)])
    dicts = merge_handovers([_handover(as_dicts, "main", 3), _handover(other, "gw1", 1)])
    assert live.records == dicts.records
    assert [r.cached for r in live.records] == [False, False, True, False, True, False]
    assert (live.requests_sent, live.cache_hits) == (dicts.requests_sent, dicts.cache_hits) == (4, 2)


def test_a_workers_lines_are_the_run_directorys_and_a_corrected_record_gets_its_own(tmp_path) -> None:
    from medrcube.plugin.handover import merged_run, records_out, without_records
    from medrcube.rundir.files import result_line

    base = dict(dataset="ds", task="t", modality="CT", part="Brain", image="img/1.png", image_digest="sha256:ab",
                variant="standard", rotation=0, answer=1, n_options=4, prompt_hash="ph", response="B", extracted=1,
                how="bare_letter", outcome=Outcome.CORRECT, options=("a", "b", "c", "d"), latency_s=0.1 + 0.2,
                confidence={"source": "logprobs", "value": 0.61, "probs": [0.1, 0.61, 0.2, 0.09]})
    records = [GradedRecord(item_id=f"i{k}", cached=k % 2 == 0, **base) for k in range(6)]
    def handed(worker: str, sent: int, records: list[GradedRecord]) -> dict:  # as a worker hands over (session.handover)
        h = {**_handover([], worker, sent), **records_out(records)}
        del h["records"]
        return h

    gw0 = handed("gw0", 3, records)
    # gw1 asked i0 itself: its records carry it not cached (and the controller keeps only gw0's records)
    gw1 = without_records(handed("gw1", 1, [dataclasses.replace(records[0], cached=False)]))
    assert "records_jsonl" not in gw1 and gw1["asked"] == "i0\tstandard\t0"
    result, ahead = merged_run([gw0, gw1])
    assert result.records == [dataclasses.replace(r, cached=r.cached and r.item_id != "i0") for r in records]
    assert ahead is not None and ahead.rows.made_from(result.records)
    out = tmp_path / "results.jsonl"
    with out.open("w", encoding="utf-8") as fh:
        ahead.rows.write(fh, result.records)
    # Byte for byte the lines results.jsonl has when the records are written here; i0's, corrected, is its own.
    assert out.read_text(encoding="utf-8").splitlines() == [result_line(r) for r in result.records]
    assert json.loads(out.read_text(encoding="utf-8").splitlines()[0])["cached"] is False
    ahead.close()


def test_the_controller_keeps_one_copy_of_the_records() -> None:
    from medrcube.plugin.handover import records_out
    from medrcube.plugin.summary import GateReport

    base = dict(dataset="ds", task="t", modality="CT", part="Brain", image="img/1.png", image_digest="sha256:ab",
                variant="standard", rotation=0, answer=1, n_options=4, prompt_hash="ph", response="B", extracted=1,
                how="bare_letter", outcome=Outcome.CORRECT)
    records = [GradedRecord(item_id=f"i{k}", cached=k == 1, **base) for k in range(3)]
    report = GateReport()
    for worker in ("gw0", "gw1", "gw2"):
        handover = {**_handover([], worker, 1), **records_out(records)}
        del handover["records"]
        report.add_handover(handover)
    assert ["records_jsonl" in h for h in report.handovers] == [True, False, False]
    assert [h["asked"] for h in report.handovers] == ["i0\tstandard\t0\ni2\tstandard\t0"] * 3


def test_a_node_lets_go_of_its_records_once_the_report_has_them(pytester) -> None:
    """pytest-xdist keeps every node's workeroutput to the end of the run: the controller's hook
    takes the records into its report, then drops them from the node."""
    from types import SimpleNamespace

    from medrcube.plugin.handover import records_out
    from medrcube.plugin.hooks import ControllerHooks
    from medrcube.plugin.summary import HANDOVER

    base = dict(dataset="ds", task="t", modality="CT", part="Brain", image="img/1.png", image_digest="sha256:ab",
                variant="standard", rotation=0, answer=1, n_options=4, prompt_hash="ph", response="B", extracted=1,
                how="bare_letter", outcome=Outcome.CORRECT)
    records = [GradedRecord(item_id=f"i{k}", cached=False, **base) for k in range(3)]
    hooks = ControllerHooks(pytester.parseconfig())
    nodes = []
    for worker in ("gw0", "gw1"):
        handover = {**_handover([], worker, 1), **records_out(records)}
        del handover["records"]
        nodes.append(SimpleNamespace(workeroutput={HANDOVER: handover}))
        hooks.pytest_testnodedown(nodes[-1], None)
    assert not any("records_jsonl" in n.workeroutput[HANDOVER] for n in nodes)
    kept = hooks.report.handovers
    assert ["records_jsonl" in h for h in kept] == [True, False]
    assert kept[0]["records_jsonl"].count("\n") == 2  # three records' lines, kept by the report


def test_each_rotation_is_an_ask_of_its_own_for_cached() -> None:
    """`cached` is corrected per ask: another process's fresh answer to one rotation of an item's
    shuffled options says nothing of another rotation, which this run read from an older store."""
    from medrcube.plugin.handover import merged_run, records_out, without_records

    base = dict(dataset="ds", task="t", modality="CT", part="Brain", image="img/1.png", image_digest="sha256:ab",
                variant="shuffled", answer=1, n_options=4, prompt_hash="ph", response="B", extracted=1,
                how="bare_letter", outcome=Outcome.CORRECT)
    records = [GradedRecord(item_id="i0", rotation=k, cached=True, **base) for k in range(3)]
    def handed(worker: str, sent: int, records: list[GradedRecord]) -> dict:  # as a worker hands over
        h = {**_handover([], worker, sent), **records_out(records)}
        del h["records"]
        return h

    gw0 = handed("gw0", 0, records)
    # gw1 asked rotation 1 itself; rotations 0 and 2 came from a store written before the run
    gw1 = without_records(handed("gw1", 1, [dataclasses.replace(records[1], cached=False)]))
    assert gw1["asked"] == "i0\tshuffled\t1"
    result, ahead = merged_run([gw0, gw1])
    assert [r.cached for r in result.records] == [True, False, True]
    assert ahead is not None
    ahead.close()


def test_the_live_records_counts_from_their_grading_are_taken_only_for_those_very_records() -> None:
    """A live hand-over carries its records' (outcome, cached) counts from the grading
    (RunResult.outcome_pairs): the merged run and its tally read them while its records are
    those records, and count the records again once one was corrected (another process sent it)."""
    from collections import Counter

    from medrcube.plugin.handover import merged_run
    from medrcube.tally import tally

    base = dict(dataset="ds", task="t", modality="CT", part="Brain", image="img/1.png", image_digest="sha256:ab",
                variant="standard", rotation=0, answer=1, n_options=4, prompt_hash="ph", response="B", extracted=1,
                how="bare_letter", outcome=Outcome.CORRECT)
    records = [GradedRecord(item_id=f"i{k}", cached=k % 2 == 0, **base) for k in range(6)]
    pairs = dict(Counter((r.outcome, r.cached) for r in records))
    alone, _ = merged_run([{**_handover(list(records), "main", 3), "outcome_pairs": pairs}])
    assert alone.outcome_pairs == pairs and alone.cache_hits == 3
    assert tally(alone.records, requests=3, loaded=6, pairs=alone.outcome_pairs) == tally(alone.records, requests=3, loaded=6)
    other = [dataclasses.replace(records[0], cached=False).to_dict()]
    corrected, _ = merged_run([{**_handover(list(records), "main", 3), "outcome_pairs": pairs}, _handover(other, "gw1", 1)])
    assert corrected.outcome_pairs is None and corrected.cache_hits == 2
