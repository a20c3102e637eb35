"""results.jsonl's lines and metrics_summary.json's sums made while the run grades
(rundir/files.GradedAhead, fed by RunOptions.on_graded) give the files written from the
records themselves, byte for byte; a record made after them (a judge's reading, a merge)
is written from itself."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.records import GradedRecord, Outcome
from medrcube.run.runner import RunResult, run_cube
from medrcube.run.store import ResponseStore
from medrcube.rundir.files import GradedAhead, records_digest, result_line, write_run_dir
from medrcube.testing.gencube import generate_release_cube


def test_lines_made_while_grading_are_the_lines_written_after(tmp_path: Path, scripted_server,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    cube = load_cube(str(generate_release_cube(tmp_path / "cube", n_items=70, n_datasets=2, n_images=20,
                                               image_size=32, restricted_fraction=0.2, seed=3)))
    scripted_server.set_script({"default": "C"})
    ahead = GradedAhead()
    seen: list[GradedRecord] = []

    def graded(batch: Sequence[GradedRecord]) -> None:
        seen.extend(batch)
        ahead.add(batch)

    adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, concurrency=4, timeout=10.0)
    result = run_cube(cube, adapter, variants="standard,blind,shuffled:2", store=ResponseStore(tmp_path / "s.sqlite"),
                      concurrency=4, on_graded=graded)
    # every record of the run was handed over once, as it was graded (the restricted ones as planned)
    assert sorted(map(id, seen)) == sorted(map(id, result.records))
    assert any(r.outcome is Outcome.UNAVAILABLE for r in result.records)
    early = write_run_dir(tmp_path / "early", result, ahead=ahead)
    late = write_run_dir(tmp_path / "late", result)
    for name in ("results.jsonl", "metrics_summary.json"):
        assert (early / name).read_bytes() == (late / name).read_bytes(), name
    assert (early / "results.jsonl").read_text(encoding="utf-8").count("\n") == len(result.records)
    assert ahead.summary(result.records) is not None
    digest = json.loads((early / "run.json").read_text(encoding="utf-8"))["records_digest"]
    assert digest == json.loads((late / "run.json").read_text(encoding="utf-8"))["records_digest"] \
        == records_digest(result.records) == ahead.rows.records_digest()
    # A record dropped after grading: the digest is the records', not the one of the records fed.
    fewer = write_run_dir(tmp_path / "fewer", RunResult(records=result.records[1:], info=result.info), ahead=ahead)
    assert json.loads((fewer / "run.json").read_text(encoding="utf-8"))["records_digest"] == \
        records_digest(result.records[1:]) != digest

    # A record replaced after grading (as a judge's reading replaces one): its own line, not the one made early.
    at, first = next((i, r) for i, r in enumerate(result.records) if r.graded)
    changed = dataclasses.replace(first, response="(judged) B", extracted=1,
                                  outcome=Outcome.WRONG if first.correct else Outcome.CORRECT)
    again = RunResult(records=[*result.records[:at], changed, *result.records[at + 1:]], info=result.info)
    judged = write_run_dir(tmp_path / "judged", again, ahead=ahead)
    written = (judged / "results.jsonl").read_text(encoding="utf-8")
    assert written.splitlines()[at] == result_line(changed) != ahead.rows.line(first)
    # and the summary counted afresh: the judged record's outcome, not the one the tally saw
    assert ahead.summary(again.records) is None
    assert (judged / "metrics_summary.json").read_bytes() == \
        (write_run_dir(tmp_path / "judged_late", again) / "metrics_summary.json").read_bytes() != \
        (early / "metrics_summary.json").read_bytes()


def test_the_summary_reads_each_records_cluster_once_with_the_same_numbers(tmp_path: Path) -> None:
    # Every group of metrics_summary.json against accuracy and clustered_accuracy of its records, computed apart.
    from medrcube.metrics.accuracy import accuracy
    from medrcube.metrics.clustered import clustered_accuracy
    from medrcube.models.baselines import RandomAdapter
    from medrcube.rundir.summary import summarize

    cube = load_cube(str(generate_release_cube(tmp_path / "cube", n_items=120, n_datasets=3, n_images=30,
                                               image_size=32, restricted_fraction=0.1, seed=5)))
    records = [r for r in run_cube(cube, RandomAdapter(seed=2)).records]
    doc = summarize(records)
    groups = {"global": records}
    for r in records:
        groups.setdefault(f"task={r.task}", []).append(r)
        groups.setdefault(f"task={r.task}|modality={r.modality}|parts={r.part}", []).append(r)
    shown = {"global": doc["global"], **doc["slice_results"]["by_task"], **doc["voxel_results"]["by_task_modality_parts"]}
    assert len(shown) == len(groups) > 3
    for name, members in groups.items():
        a, ci = accuracy(members), clustered_accuracy(members)
        assert (shown[name]["n"], shown[name]["correct"], shown[name]["ci95"]) == (a.n, a.correct, [a.lo, a.hi])
        assert (shown[name]["ci95_clustered"], shown[name]["images"], shown[name]["design_effect"]) == \
            ([ci.lo, ci.hi], ci.clusters, ci.deff)


def test_lines_copied_from_the_spool_are_the_records_lines_in_the_records_order(rec, tmp_path: Path) -> None:
    """The copy works on bytes: a line with text beyond ASCII, lines fed in another order and
    in several batches, a record never fed and one replaced after feeding are each written
    as result_line writes it, in the order of the records handed over."""
    records = [dataclasses.replace(rec(f"q{i:02d}", Outcome.WRONG if i % 3 else Outcome.CORRECT),
                                   response=f"Réponse {i}: « B » — ✓ 肺")
               for i in range(40)]
    ahead = GradedAhead()
    fed = records[:35]
    for batch in (fed[20:], fed[:7], fed[7:20]):  # not in the records' order
        ahead.add(batch)
    written = list(records)
    written[3] = dataclasses.replace(records[3], response="read again")  # another object: written from itself
    write_run_dir(tmp_path / "run", RunResult(records=written), ahead=ahead)
    lines = (tmp_path / "run" / "results.jsonl").read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and lines[:-1] == [result_line(r) for r in written]
