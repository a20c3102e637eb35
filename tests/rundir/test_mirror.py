"""results.jsonl and metrics_summary.json made by a child that read the run's lines as they were
spooled (rundir/mirror.py): the very bytes the writer makes itself, taken only for the very
records and arguments asked about, and nothing left behind when they are not taken."""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.metrics.selective import DeferralCosts
from medrcube.models.baselines import RandomAdapter
from medrcube.records import GradedRecord, Outcome
from medrcube.run.runner import RunResult, run_cube
from medrcube.rundir.files import GradedAhead, Landing, file_sha256, records_digest, write_run_dir
from medrcube.rundir.mirror import Mirror
from medrcube.testing.gencube import generate_release_cube

VARIANTS = ["standard", "blind", "shuffled:2"]
PREVALENCE = {"cardiomegaly": 0.2}
COSTS = DeferralCosts(deferral=0.25)


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[GradedRecord]:
    where = tmp_path_factory.mktemp("mirror")
    cube = load_cube(str(generate_release_cube(where / "cube", n_items=90, n_datasets=3, n_images=25,
                                               image_size=32, restricted_fraction=0.15, seed=12)))
    run = run_cube(cube, RandomAdapter(seed=5), variants=",".join(VARIANTS))
    assert any(r.outcome is Outcome.UNAVAILABLE for r in run.records)
    return list(run.records)


def _fed(records: list[GradedRecord], *, mirrored: bool = True) -> GradedAhead:
    """Fed as a run feeds it: batches of 16 in the order the answers came (shuffled)."""
    ahead = GradedAhead()
    if mirrored:
        ahead.mirror_to(Mirror.start(ahead.rows.spool_fileno()))
    order = list(records)
    random.Random(7).shuffle(order)
    for start in range(0, len(order), 16):
        ahead.add(order[start:start + 16])
    return ahead


def _written(run_dir: Path, records: list[GradedRecord], ahead: GradedAhead | None) -> dict[str, bytes]:
    result = RunResult(records=records, info={"variants": VARIANTS})
    meta = {"site_policy": {"prevalence": PREVALENCE, "deferral_cost": COSTS.deferral}}
    write_run_dir(run_dir, result, meta, ahead=ahead)
    return {name: (run_dir / name).read_bytes() for name in ("results.jsonl", "metrics_summary.json")}


def _hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_the_childs_files_are_the_writers_own_bytes_and_are_renamed_into_place(
        records: list[GradedRecord], tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    ahead = _fed(records)
    assert ahead._mirror is not None  # started at the first batch
    ahead.ask_mirror(records, reports, VARIANTS, prevalence=PREVALENCE, costs=COSTS)
    run_dir = reports / "run"
    run_dir.mkdir()
    with Landing() as landing:
        digest = ahead.place_mirrored(records, run_dir, VARIANTS, prevalence=PREVALENCE, costs=COSTS, landing=landing)
    assert digest == records_digest(records)
    # the seal takes the digests the child gave: they are the files' own
    for name in ("results.jsonl", "metrics_summary.json"):
        assert landing.landed[run_dir / name].sha256 == file_sha256(run_dir / name)
    made = {name: (run_dir / name).read_bytes() for name in ("results.jsonl", "metrics_summary.json")}
    process = ahead._mirror.process
    waited_on: list[str] = []
    wait = process.wait

    def noted_wait(*args: object, **kwargs: object) -> object:
        waited_on.append(threading.current_thread().name)
        return wait(*args, **kwargs)

    process.wait = noted_wait  # type: ignore[method-assign]
    ahead.close()
    assert made == _written(tmp_path / "alone", records, None)  # written from the records themselves
    assert _hidden(reports) == []
    # Its answer taken, the child is ended and waited for by a thread, not by `close` (its exit lets go of every
    # record it read first): it is reaped, and not by this test.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            assert os.waitpid(process.pid, os.WNOHANG) == (0, 0), "the child was left to this test to reap"
        except ChildProcessError:
            break  # reaped
        time.sleep(0.01)
    else:
        pytest.fail("the child was never reaped")
    assert threading.current_thread().name not in waited_on


def test_write_run_dir_takes_them_and_the_files_are_the_same_either_way(records: list[GradedRecord],
                                                                         tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    ahead = _fed(records)
    ahead.ask_mirror(records, reports, VARIANTS, prevalence=PREVALENCE, costs=COSTS)
    mirrored = _written(reports / "run", records, ahead)
    assert ahead._mirror is not None and ahead._mirror.made is not None  # taken from the child
    ahead.close()
    assert mirrored == _written(tmp_path / "alone", records, None)
    assert _hidden(reports) == []


@pytest.mark.parametrize("change", ["order", "judged", "arguments"])
def test_other_records_or_arguments_are_written_by_the_writer_and_nothing_is_left(
        records: list[GradedRecord], tmp_path: Path, change: str) -> None:
    reports = tmp_path / "reports"
    ahead = _fed(records)
    ahead.ask_mirror(records, reports, VARIANTS, prevalence=PREVALENCE, costs=COSTS)
    written = list(records)
    costs = COSTS
    if change == "order":
        written[0], written[1] = written[1], written[0]
    elif change == "judged":  # a record replaced after grading: another object
        at = next(i for i, r in enumerate(written) if r.graded)
        written[at] = dataclasses.replace(written[at], outcome=Outcome.WRONG)
    else:
        costs = DeferralCosts(deferral=0.5)
    run_dir = reports / "run"
    run_dir.mkdir()
    assert ahead.place_mirrored(written, run_dir, VARIANTS, prevalence=PREVALENCE, costs=costs) is None
    assert not (run_dir / "results.jsonl").exists()
    ahead.close()
    assert _hidden(reports) == []  # the child's files, made and not taken, removed


def test_a_child_that_died_is_not_asked_and_the_writer_writes(records: list[GradedRecord], tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    ahead = _fed(records)
    assert ahead._mirror is not None
    ahead._mirror.process.kill()
    ahead._mirror.process.wait()
    ahead.ask_mirror(records, reports, VARIANTS, prevalence=PREVALENCE, costs=COSTS)
    written = _written(reports / "run", records, ahead)
    ahead.close()
    assert written == _written(tmp_path / "alone", records, None)
    assert _hidden(reports) == []


def test_asked_about_records_whose_lines_it_did_not_all_read_it_makes_nothing(records: list[GradedRecord],
                                                                               tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    ahead = _fed(records)
    mirror = ahead._mirror
    assert mirror is not None
    # Asked about all but the last line: its sums counted every line, so it refuses.
    offsets = ahead.rows.offsets(records[:-1])
    assert offsets is not None and mirror.request(offsets, ahead.rows.end, reports, VARIANTS, PREVALENCE, COSTS)
    assert mirror.take() is None
    mirror.close()
    ahead.close()
    assert _hidden(reports) == []


def test_a_child_is_started_at_the_first_batch_of_a_large_run_only(records: list[GradedRecord]) -> None:
    from medrcube.rundir import mirror
    from medrcube.service import _AheadAtFirstBatch

    small, large = _AheadAtFirstBatch(mirror.MIN_RECORDS - 1), _AheadAtFirstBatch(mirror.MIN_RECORDS)
    for ahead in (small, large):
        ahead.add(records[:16])
    assert small.made is not None and small.made._mirror is None
    assert large.made is not None and isinstance(large.made._mirror, Mirror)
    assert large.made._mirror.process.poll() is None  # reading the lines as they come
    small.made.close()
    large.made.close()
    assert large.made._mirror is None


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_no_child_for_a_process_pinned_to_one_core(records: list[GradedRecord], tmp_path: Path) -> None:
    # The child would read and write on the one core the gate runs on: its interpreter's start
    # (about 0.3 s of CPU) and its reading taken from the requests, nothing taken off the end.
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        ahead = _fed(records)
    finally:
        os.sched_setaffinity(0, before)
    assert ahead._mirror is None
    assert _written(tmp_path / "run", records, ahead) == _written(tmp_path / "plain", records, None)


def test_an_ask_prepared_for_the_records_asks_the_same(records: list[GradedRecord], tmp_path: Path) -> None:
    # The offsets found while the evidence child works (GradedAhead.prepare_ask) are taken for the very
    # same records only: the same files either way.
    reports = tmp_path / "reports"
    ahead = _fed(records)
    ahead.prepare_ask(records, reports)
    assert ahead._ask_ready is not None and ahead._ask_ready[2] == ahead.rows.offsets(records)
    staged = sorted(p.name for p in reports.iterdir())
    assert len(staged) == 3  # the order, and the two files the child fills, made ahead
    assert ahead.ask_mirror(records, reports, VARIANTS, prevalence=PREVALENCE, costs=COSTS)
    assert ahead._ask_ready is None
    assert sorted(p.name for p in reports.iterdir()) == staged  # the very files: the ask made none
    assert _written(reports / "run", records, ahead) == _written(tmp_path / "alone", records, None)
    assert ahead._mirror is None or ahead._mirror.made is not None  # taken from the child
    ahead.close()


def test_an_ask_prepared_for_other_records_is_not_taken(records: list[GradedRecord], tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    ahead = _fed(records)
    other = list(records)
    other[0], other[1] = other[1], other[0]
    ahead.prepare_ask(other, reports)  # the offsets of another order, and their order file
    assert ahead.ask_mirror(records, reports, VARIANTS, prevalence=PREVALENCE, costs=COSTS)
    mirrored = _written(reports / "run", records, ahead)
    ahead.close()
    assert mirrored == _written(tmp_path / "alone", records, None)
    assert _hidden(reports) == []


def test_files_made_ahead_in_another_directory_or_never_asked_for_are_removed(records: list[GradedRecord],
                                                                             tmp_path: Path) -> None:
    reports, elsewhere = tmp_path / "reports", tmp_path / "elsewhere"
    ahead = _fed(records)
    ahead.prepare_ask(records, elsewhere)
    assert len(_hidden(elsewhere)) == 3
    assert ahead.ask_mirror(records, reports, VARIANTS, prevalence=PREVALENCE, costs=COSTS)
    assert _hidden(elsewhere) == []  # made again where asked
    assert _written(reports / "run", records, ahead) == _written(tmp_path / "alone", records, None)
    ahead.close()
    assert _hidden(reports) == []
    never = _fed(records)
    never.prepare_ask(records, reports)
    assert len(_hidden(reports)) == 3
    never.close()  # the verdicts failed, say: nothing asked, nothing left
    assert _hidden(reports) == []


def test_the_runs_delivery_finds_the_lines_the_lookups_find_and_only_for_its_own_records(tmp_path: Path) -> None:
    """A run's records found in the lines by their places among the batches handed on (RunResult.delivery,
    the run's order not the batches'): the very offsets the lookups by identity find, and the same files
    asked of the child; a delivery of other records (another run's, or these in another order) is not
    used, and the lookups answer as before."""
    cube = load_cube(str(generate_release_cube(tmp_path / "cube", n_items=60, n_datasets=3, n_images=20,
                                               image_size=32, restricted_fraction=0.15, seed=21)))
    ahead = GradedAhead()
    run = run_cube(cube, RandomAdapter(seed=3), variants=",".join(VARIANTS), on_graded=ahead.add)
    delivery = run.delivery
    assert delivery is not None and delivery.order is not None  # planned in chunks: put in plan order at the end
    # Graded as answered, not in the run's order: the places are not the positions.
    assert list(delivery.places()) != list(range(len(run.records)))
    assert ahead.rows.offsets_by_delivery(delivery) == ahead.rows.offsets(run.records)
    other = run_cube(cube, RandomAdapter(seed=4), variants=",".join(VARIANTS), on_graded=GradedAhead().add)
    assert other.delivery is not None and ahead.rows.offsets_by_delivery(other.delivery) is None
    # Handed on in another order than these: not taken (the ids differ), looked up instead.
    reordered = GradedAhead()
    for start in range(len(run.records), 0, -16):
        reordered.add(run.records[max(0, start - 16):start])
    assert reordered.rows.offsets_by_delivery(delivery) is None
    assert reordered._offsets(run.records, delivery) == reordered.rows.offsets(run.records)
    # Another list for the result's records: no delivery (the places are of the run's own list).
    assert dataclasses.replace(run, records=list(run.records)).delivery is None
    # Asked by delivery, the child makes the writer's own bytes.
    mirrored = GradedAhead()
    mirrored.mirror_to(Mirror.start(mirrored.rows.spool_fileno()))
    again = run_cube(cube, RandomAdapter(seed=3), variants=",".join(VARIANTS), on_graded=mirrored.add)
    reports = tmp_path / "reports"
    reports.mkdir()
    assert mirrored.ask_mirror(again.records, reports, VARIANTS, prevalence=PREVALENCE, costs=COSTS,
                               delivery=again.delivery)
    assert _written(tmp_path / "by-delivery", again.records, mirrored) == _written(tmp_path / "plain", again.records, None)
    mirrored.close()
