"""Sharded workers hand each other their shards' records through files (run/shard_exchange.py,
service.infer's `exchange_dir`): the records every worker ends with are the ones a pass over
the whole cube gives, in the same order; a file that is not exactly its shard's, a writer
that died or a wait that runs out gives nothing, and the worker reads the store as before."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from medrcube import service
from medrcube.cube import load_cube
from medrcube.cube.item import Cube
from medrcube.plugin.handover import records_out
from medrcube.records import GradedRecord, Outcome
from medrcube.run import shard_exchange
from medrcube.run.runner import RunResult
from medrcube.rundir.files import result_line
from medrcube.testing.gencube import distinct_questions, generate_release_cube


def _record(item_id: str, variant: str = "standard", rotation: int = 0, **kw: object) -> GradedRecord:
    fields: dict[str, object] = dict(
        item_id=item_id, dataset="DS", task="Disease Diagnosis", modality="CT", part="Chest", image=f"{item_id}.png",
        image_digest="d" * 8, variant=variant, rotation=rotation, answer=1, n_options=3, prompt_hash="p",
        response="B", extracted=1, how="bare_letter", outcome=Outcome.CORRECT, latency_s=0.125, cached=False,
        options=("a", "b", "c"), confidence={"source": "logprobs", "value": 0.7, "probs": [0.1, 0.7, 0.2]},
    )
    fields.update(kw)
    return GradedRecord(**fields)  # type: ignore[arg-type]


def _handover(worker: str, fields: dict, info: dict | None = None) -> dict:
    """A worker's hand-over to the controller with `fields` (its records or their digest, its asks)."""
    return {"worker": worker, **fields, "requests_sent": 1, "judge_requests": 0, "usage": {}, "started": 1.0,
            "finished": 2.0, "wall_s": 1.0, "aborted": None, "info": info or {}}


def _gather(directory: Path, tag: str, index: int, count: int, shards: list[list[str]], wait_s: float = 5.0,
            clock=None) -> dict[int, shard_exchange.Shard] | None:
    kw = {} if clock is None else {"clock": clock}
    return asyncio.run(asyncio.wait_for(shard_exchange.gather(directory, tag, index, count, shards, wait_s, **kw), 60))


def test_a_shard_read_back_is_the_records_written(tmp_path):
    shards = [["a1", "a2"], ["b1"]]
    mine = [_record("b1"), _record("b1", "shuffled", 1, outcome=Outcome.WRONG, extracted=0, response="A"),
            _record("b1", "blind", confidence=None, error=None, cached=True)]
    shard_exchange.publish(tmp_path, "candidate-0", 1, 2, shards[1], mine, {"served_models": {"m": 3}})
    got = _gather(tmp_path, "candidate-0", 0, 2, shards)
    assert got is not None and list(got) == [1]
    assert got[1].records == mine  # every field, the confidence's nesting and the tuple of options too
    assert got[1].info == {"served_models": {"m": 3}}


@pytest.mark.parametrize("spoil", ["another pass", "another cube", "cut short", "an item of another shard"])
def test_a_file_not_exactly_its_shards_gives_nothing(tmp_path, spoil):
    shards = [["a1"], ["b1", "b2"]]
    records = [_record("b1"), _record("b2")]
    tag = "candidate-1" if spoil == "another pass" else "candidate-0"
    ids = ["b1", "b3"] if spoil == "another cube" else shards[1]
    if spoil == "an item of another shard":
        records = [_record("b1"), _record("a1")]
    shard_exchange.publish(tmp_path, tag, 1, 2, ids, records)
    if tag != "candidate-0":  # the file of pass 1 under the name of pass 0: its header says pass 1
        (tmp_path / "candidate-1-1.jsonl").rename(tmp_path / "candidate-0-1.jsonl")
    if spoil == "cut short":
        path = tmp_path / "candidate-0-1.jsonl"
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    assert _gather(tmp_path, "candidate-0", 0, 2, shards) is None


def test_a_writer_that_died_is_not_waited_for(tmp_path):
    # A clock that never moves: only the dead writer's pid can end the wait.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "candidate-0-1.pid").write_text(str(dead.pid))
    assert _gather(tmp_path, "candidate-0", 0, 2, [["a"], ["b"]], wait_s=1.0, clock=lambda: 0.0) is None


def test_the_wait_runs_out(tmp_path):
    ticks = iter(range(1000))
    assert _gather(tmp_path, "candidate-0", 0, 3, [["a"], ["b"], ["c"]], wait_s=5.0,
                   clock=lambda: float(next(ticks))) is None


def test_in_plan_order():
    from medrcube.run.plan import as_variants

    order = shard_exchange.variant_positions(as_variants(("standard", "blind", "shuffled:3")))
    wanted = [_record("x"), _record("y"), _record("x", "blind"), _record("y", "blind"),
              *[_record(i, "shuffled", r) for i in ("x", "y") for r in range(3)]]
    mixed = wanted[::-1]
    assert shard_exchange.in_plan_order(mixed, ["x", "y"], order) == wanted
    assert shard_exchange.in_plan_order([*wanted, _record("x")], ["x", "y"], order) is None  # twice
    assert shard_exchange.in_plan_order([*wanted, _record("z")], ["x", "y"], order) is None  # not in the part
    assert shard_exchange.in_plan_order([_record("x", "jpeg:30")], ["x"], order) is None  # not a variant of the run


# ---------------------------------------------------------------- two sharded workers, real requests


@pytest.fixture(scope="module")
def distinct_cube(tmp_path_factory: pytest.TempPathFactory) -> Cube:
    """Every question distinct, so that every ask is its own request (and `cached` tells who asked it)."""
    root = generate_release_cube(tmp_path_factory.mktemp("xcube"), n_items=40, n_datasets=3, n_images=20,
                                 image_size=32, n_base_images=6, seed=11)
    distinct_questions(root)
    return load_cube(root)


VARIANTS = ("standard", "blind", "shuffled:2")


def _adapter(server):
    from medrcube.models.openai_adapter import OpenAIAdapter

    return OpenAIAdapter("scripted-model", base_url=server.base_url, concurrency=4, max_retries=0)


def _workers(cube: Cube, server, store: Path, exchange: list[Path | None],
             settle: list | None = None, take_whole: list | None = None) -> list[service.Inference]:
    """Two sharded workers at once, as two xdist workers run (threads here: each its own event loop and store);
    `settle`: each worker's settle calls are appended to it; `take_whole`: each worker's service.infer `take_whole`."""
    out: list[service.Inference | BaseException | None] = [None, None]

    def one(index: int) -> None:
        try:
            out[index] = service.infer(cube, _adapter(server), variants=VARIANTS, store_dir=store, shard=(index, 2),
                                       exchange_dir=exchange[index], run_token="20261206T000000Z-shards",
                                       settle=None if settle is None else lambda: settle.append(index),
                                       take_whole=None if take_whole is None else take_whole[index],
                                       shard_digests=take_whole is not None)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            out[index] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for o in out:
        if isinstance(o, BaseException):
            raise o
    assert all(isinstance(o, service.Inference) for o in out)
    return out  # type: ignore[return-value]


def _plain(records: list[GradedRecord]) -> list[GradedRecord]:
    return [dataclasses.replace(r, latency_s=0.0, cached=False) for r in records]


def _serial(cube: Cube, server, store: Path, answer: str) -> tuple[RunResult, dict]:
    """A serial run's records (one process, the whole cube) and the requests it sent, the server's counts then zeroed."""
    server.set_script({"default": answer})
    serial = service.infer(cube, _adapter(server), variants=VARIANTS, store_dir=store).result
    asked = server.stats()["by_request"]
    server.reset_stats()
    return serial, asked


def test_sharded_workers_exchange_their_shards(distinct_cube, scripted_server, tmp_path):
    serial, asked = _serial(distinct_cube, scripted_server, tmp_path / "s1", "B")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    workers = _workers(distinct_cube, scripted_server, tmp_path / "s2", [exchange, exchange])
    assert scripted_server.stats()["by_request"] == asked  # each request reached the model as often as serially
    for w in workers:
        # The whole cube, in the serial pass's order; every record the one its asker graded
        # (none read back from the store: on a fresh store, none is `cached`).
        assert _plain(w.result.records) == _plain(serial.records)
        assert not any(r.cached for r in w.result.records)
        assert w.result.info["provenance"]["live"] == serial.info["provenance"]["live"]
        assert w.result.info["served_models"] == serial.info["served_models"]
        # Its hand-over's lines are results.jsonl's, the others' copied as they wrote them.
        assert w.lines is not None and w.lines.made_from(w.result.records)
        assert records_out(w.result.records, w.lines)["records_jsonl"] == "\n".join(map(result_line, w.result.records))
    assert sorted(p.name for p in exchange.iterdir()) == [
        "candidate-0-0.jsonl", "candidate-0-0.pid", "candidate-0-1.jsonl", "candidate-0-1.pid"]


def test_without_the_others_file_a_worker_reads_the_store(distinct_cube, scripted_server, tmp_path, monkeypatch):
    monkeypatch.setattr(service, "EXCHANGE_WAIT_S", 0.2)
    monkeypatch.setattr(service, "EXCHANGE_WAIT_SHARE", 0.0)
    serial, asked = _serial(distinct_cube, scripted_server, tmp_path / "s1", "C")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    # Worker 0 hands nothing over (as a worker of an older medrcube, or one whose file failed):
    # worker 1 waits, then takes worker 0's answers from the store as before.
    workers = _workers(distinct_cube, scripted_server, tmp_path / "s2", [None, exchange])
    assert scripted_server.stats()["by_request"] == asked
    for w in workers:
        assert _plain(w.result.records) == _plain(serial.records)
    mine = {it.id for it in distinct_cube.items if service.stable_shard(it.id, 2) == 1}
    # Read from the store: the other shard's records are `cached` in worker 1's pass over it
    # (and some of its own may be: worker 0's pass over the whole cube can ask them first).
    assert {r.item_id for r in workers[1].result.records if r.cached} >= {it.id for it in distinct_cube.items} - mine
    # Its records were corrected after the grading counted them (what it asked itself is not `cached`): its
    # counts are the records' own, none taken from the grading's (RunResult.outcome_pairs).
    from medrcube.run.runner import record_counts
    from medrcube.tally import tally

    for w in workers:
        r = w.result
        assert record_counts(r.records, r.outcome_pairs) == record_counts(r.records)
        assert tally(r.records, requests=0, loaded=0, pairs=r.outcome_pairs) == tally(r.records, requests=0, loaded=0)
        assert r.cache_hits == sum(x.cached for x in r.records)


def test_a_writer_that_withdrew_is_not_waited_for(tmp_path):
    shard_exchange.announce(tmp_path, "candidate-0", 1)  # alive: this very process
    shard_exchange.withdraw(tmp_path, "candidate-0", 1)
    assert _gather(tmp_path, "candidate-0", 0, 2, [["a"], ["b"]], wait_s=1.0, clock=lambda: 0.0) is None


def test_the_controller_reads_the_shards_the_workers_decided_on(distinct_cube, scripted_server, tmp_path):
    """The xdist controller's read of the shard files (plugin/speed/shard_preread.py) gives the
    records the workers ended with, and the merge takes it only for a hand-over of those very lines."""
    import hashlib

    from medrcube.plugin.handover import merged_run
    from medrcube.plugin.speed.shard_preread import ShardPreread

    scripted_server.set_script({"default": "B"})
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    preread = ShardPreread(exchange, 2, distinct_cube, VARIANTS)
    preread.start()  # before the workers: it waits for their files
    workers = _workers(distinct_cube, scripted_server, tmp_path / "store", [exchange, exchange])
    read = preread.take()
    assert read is not None and read.records == workers[0].result.records
    handed = records_out(workers[0].result.records, workers[0].lines)["records_jsonl"]
    assert read.digest == hashlib.sha256(handed.encode("utf-8")).hexdigest()

    result, ahead = merged_run([_handover("gw0", {"records_jsonl": handed, "asked": ""})], read)
    assert ahead is read.ahead and result.records is read.records
    # Lines that differ (another pass, a worker that read the store): the hand-over's own are read.
    other = handed.replace('"response": "B"', '"response": "B "', 1)
    again = ShardPreread(exchange, 2, distinct_cube, VARIANTS)
    again.start()
    read2 = again.take()
    assert read2 is not None
    result2, ahead2 = merged_run([_handover("gw0", {"records_jsonl": other, "asked": ""})], read2)
    assert ahead2 is not read2.ahead and result2.records[0].response != read2.records[0].response
    assert result2.records[1:] == read2.records[1:]


def test_a_worker_hands_over_the_digest_of_the_lines_the_controller_holds(distinct_cube, scripted_server, tmp_path):
    """Once the controller holds its read, it says so in the exchange directory; a worker whose
    lines are the same hands over their SHA-256 alone, and the controller writes the lines it read.
    Lines that differ travel whole, and a digest the controller does not hold is an error, not a guess."""
    import io

    from medrcube.plugin.handover import DIGEST, RECORDS, Preread, controller_read, merged_run
    from medrcube.plugin.speed.shard_preread import ShardPreread
    from medrcube.rundir.files import GradedAhead, Landing, file_sha256, summary_arguments, write_run_dir
    from medrcube.rundir.summary import metrics_summary

    scripted_server.set_script({"default": "B"})
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    assert controller_read(exchange) is None
    site = {"prevalence": {}, "deferral_cost": 0.25}
    reports = tmp_path / "reports"
    preread = ShardPreread(exchange, 2, distinct_cube, VARIANTS, site_policy=lambda: site,
                           report_dir=reports)
    preread.start()
    workers = _workers(distinct_cube, scripted_server, tmp_path / "store", [exchange, exchange])
    read = preread.take()
    assert read is not None and controller_read(exchange) == read.digest
    out = [records_out(w.result.records, w.lines, exchange) for w in workers]
    assert all(o.get(DIGEST) == read.digest and RECORDS not in o for o in out)
    whole = records_out(workers[0].result.records, workers[0].lines)  # the same lines, as sent without the exchange

    info = workers[0].result.info
    result, ahead = merged_run([_handover("gw0", out[0], info), _handover("gw1", out[1], info)], read)
    assert ahead is read.ahead and result.records == workers[0].result.records
    assert ahead.rows.made_from(result.records)  # the summary's sums are taken as read, not made again
    # metrics_summary.json's document was made while the workers decided, for these records and this policy only.
    specs, (prevalence, costs) = result.info["variants"], summary_arguments(site)
    made = ahead.summary(result.records, specs, prevalence=prevalence, costs=costs)
    assert made is ahead.summary(result.records, specs, prevalence=prevalence, costs=costs)
    assert made == metrics_summary(result.records, specs, prevalence=prevalence, costs=costs)
    assert ahead.summary(list(result.records), specs, prevalence=prevalence, costs=costs) is made  # the same records
    assert ahead.summary(result.records[::-1], specs, prevalence=prevalence, costs=costs) is not made  # another order
    assert ahead.summary(result.records, specs, prevalence=prevalence, costs=None) is not made
    # results.jsonl was written beside the run directory to come, and is renamed into it, its digest kept for the seal.
    assert [p.name.startswith(".results.jsonl.") for p in reports.iterdir()] == [True]
    with Landing() as landing:
        written = write_run_dir(reports / "run", result, {"site_policy": site}, landing=landing, ahead=ahead)
    assert [p.name for p in reports.iterdir()] == ["run"]
    assert (written / "results.jsonl").read_text(encoding="utf-8") == whole[RECORDS] + "\n"
    assert landing.landed[written / "results.jsonl"].sha256 == file_sha256(written / "results.jsonl")
    assert json.loads((written / "metrics_summary.json").read_text(encoding="utf-8")) == json.loads(json.dumps(made))

    # A record the controller's merge corrects (`cached` by one worker, asked by another) gets its own line.
    cached = [dataclasses.replace(r, cached=True) if i == 0 else r for i, r in enumerate(workers[0].result.records)]
    held = GradedAhead()
    held.add(cached)
    first = {DIGEST: "0" * 64, "asked": ""}
    asked = {"asked": f"{cached[0].item_id}\t{cached[0].variant}\t{cached[0].rotation}"}
    result2, ahead2 = merged_run([_handover("gw0", first, info), _handover("gw1", asked, info)], Preread(cached, held, "0" * 64))
    assert not result2.records[0].cached and result2.records[1:] == cached[1:]
    fh = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="\n")
    assert ahead2 is not None
    ahead2.rows.write(fh, result2.records)
    assert fh.buffer.getvalue().decode("utf-8").split("\n")[0] == result_line(result2.records[0])

    # Lines that differ from the controller's read are handed over whole.
    changed = [dataclasses.replace(workers[0].result.records[0], response="B ")] + list(workers[0].result.records[1:])
    assert RECORDS in records_out(changed, None, exchange)
    with pytest.raises(RuntimeError, match="response store"):
        merged_run([_handover("gw0", out[0], info)], None)


def test_results_written_ahead_serve_only_their_own_list(tmp_path):
    """results.jsonl written ahead (rundir/files.GradedAhead.prewrite) is placed for the very list
    of records it was written from; another list is written afresh, and the file is dropped."""
    from medrcube.rundir.files import GradedAhead, write_run_dir

    records = [_record("a1"), _record("a2", "blind", outcome=Outcome.WRONG, extracted=0, response="A")]
    ahead = GradedAhead()
    ahead.add(records)
    ahead.prewrite(records, tmp_path)
    assert not ahead.place_results(records[::-1], tmp_path / "reordered.jsonl")  # the same records, another order
    other = [records[0], dataclasses.replace(records[1], cached=True)]
    result = RunResult(records=other, requests_sent=2, cache_hits=1, errors=0, wall_s=1.0,
                       info={"variants": ["standard", "blind"]})
    written = write_run_dir(tmp_path / "run", result, ahead=ahead)
    assert (written / "results.jsonl").read_text(encoding="utf-8") == "".join(f"{result_line(r)}\n" for r in other)
    assert len([p for p in tmp_path.iterdir() if p.name.startswith(".results.jsonl.")]) == 1
    ahead.close()
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_the_controller_gives_up_on_a_withdrawn_shard(distinct_cube, tmp_path):
    from medrcube.plugin.speed.shard_preread import ShardPreread

    shard_exchange.withdraw(tmp_path, "candidate-0", 1)
    preread = ShardPreread(tmp_path, 2, distinct_cube, VARIANTS)
    preread.start()
    preread._thread.join(30)  # type: ignore[union-attr]  # it ends by itself, without `take`
    assert preread._thread is not None and not preread._thread.is_alive()
    assert preread.take() is None


def test_a_sharded_worker_settles_its_heap_while_its_answers_come_in(distinct_cube, scripted_server, tmp_path,
                                                                     monkeypatch):
    # The gate passes plugin/speed/frozen_heap.settle_heap; here a list notes each call.
    scripted_server.set_script({"default": "B"})
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    calls: list[int] = []
    monkeypatch.setattr(service, "SETTLE_EVERY_S", 0.0)  # at every graded batch
    _workers(distinct_cube, scripted_server, tmp_path / "s1", [exchange, exchange], settle=calls)
    assert set(calls) == {0, 1}
    calls.clear()
    monkeypatch.setattr(service, "SETTLE_EVERY_S", 3600.0)  # never within a run this short
    (tmp_path / "e2").mkdir()
    _workers(distinct_cube, scripted_server, tmp_path / "s2", [tmp_path / "e2", tmp_path / "e2"], settle=calls)
    assert calls == []


def test_a_run_without_verdicts_leaves_nothing_written_ahead(tmp_path):
    """The controller's read wrote results.jsonl ahead; a run that writes no run directory (no
    verdict: Ctrl-C, every case deselected) removes it, and the read's lines with it."""
    from medrcube.plugin.handover import Preread
    from medrcube.plugin.summary import GateReport
    from medrcube.rundir.files import GradedAhead

    records = [_record("a1"), _record("a2")]
    ahead = GradedAhead()
    ahead.add(records)
    ahead.prewrite(records, tmp_path)
    assert len(list(tmp_path.iterdir())) == 1
    report = GateReport()
    report.preread = Preread(records, ahead, "0" * 64)
    report.finish(session=None)
    assert list(tmp_path.iterdir()) == [] and report.preread is None


def test_a_shard_file_is_known_by_the_digest_its_writer_returns(tmp_path):
    """What a reader read (Shard.sha256) is what the writer wrote (publish's digest): another
    process can tell that it read these very records from that digest alone; the headers
    give what each pass counted without reading a record."""
    ids = [["a", "b"], ["c"]]
    records = {0: [_record("a"), _record("b")], 1: [_record("c")]}
    digests = {j: shard_exchange.publish(tmp_path, "candidate-0", j, 2, ids[j], records[j], {"served_models": {"m": j + 1}})
               for j in (0, 1)}
    shard = shard_exchange.read_shard(tmp_path / "candidate-0-1.jsonl", "candidate-0", 1, 2, ids[1], digest=True)
    assert shard is not None and shard.sha256 == digests[1] != digests[0]
    assert shard_exchange.read_shard(tmp_path / "candidate-0-1.jsonl", "candidate-0", 1, 2, ids[1]).sha256 == ""
    assert hashlib.sha256((tmp_path / "candidate-0-0.jsonl").read_bytes()).hexdigest() == digests[0]
    assert shard_exchange.read_infos(tmp_path, "candidate-0", 0, 2, ids) == [{"served_models": {"m": 2}}]
    assert shard_exchange.read_others(tmp_path, "candidate-0", 0, 2, ids)[1].records == records[1]
    # Another cube's shard (its items' digest differs): neither its header nor its records are taken.
    assert shard_exchange.read_infos(tmp_path, "candidate-0", 0, 2, [["a", "b"], ["d"]]) is None
    assert shard_exchange.read_others(tmp_path, "candidate-0", 0, 2, [["a", "b"], ["d"]]) is None
    (tmp_path / "candidate-0-1.jsonl").unlink()
    assert shard_exchange.read_infos(tmp_path, "candidate-0", 0, 2, ids) is None
    # A file that cannot be written has no digest.
    assert shard_exchange.publish(tmp_path / "missing", "candidate-0", 0, 2, ids[0], records[0]) is None


def test_a_worker_spared_the_other_shards_reads_them_only_when_asked(distinct_cube, scripted_server, tmp_path):
    """`take_whole` (another worker decided on these files): the worker's Inference holds its own
    shard's records, with what every shard's pass counted, and reads the rest from their files only
    when asked (Inference.completed): then the very records of a worker that read them at once. Its
    hand-over is the run's lines' digest once the controller holds them, its own asks with it."""
    from medrcube.plugin.handover import DIGEST, RECORDS, digest_out, lines_sha256, publish_no_read, publish_read

    scripted_server.set_script({"default": "B"})
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    given: list[str] = []

    async def take(own_file: str) -> bool:  # as the deciding worker's payloads come: once it read every file
        given.append(own_file)
        while not (exchange / "candidate-0-0.jsonl").exists():
            await asyncio.sleep(0.01)
        return True

    whole, spared = _workers(distinct_cube, scripted_server, tmp_path / "store", [exchange, exchange],
                             take_whole=[None, take])
    assert given == [hashlib.sha256((exchange / "candidate-0-1.jsonl").read_bytes()).hexdigest()]
    assert whole.complete and whole.shard_files == {0: whole.shard_files[0], 1: given[0]}
    assert not spared.complete and spared.shard_files is None
    own = spared.result.records
    assert 0 < len(own) < len(whole.result.records) and set(own) <= set(whole.result.records)
    assert spared.result.info["served_models"] == whole.result.info["served_models"]  # every shard's, from the headers

    digest = lines_sha256(whole.result.records, whole.lines)
    assert digest_out(own, exchange, digest, wait_s=0.0) is None  # the controller holds no read yet
    # The worker that read every shard (the deciding one): its lines when no read is there and it does
    # not wait; waiting, the digest alone once the controller's read comes (published from another thread).
    assert RECORDS in records_out(whole.result.records, whole.lines, exchange, digest)
    later = threading.Timer(0.3, publish_read, args=(exchange, digest))
    later.start()
    try:
        handed = records_out(whole.result.records, whole.lines, exchange, digest, wait_s=60.0)
    finally:
        later.join()
    assert handed == {DIGEST: digest, "asked": records_out(whole.result.records)["asked"]}
    assert digest_out(own, exchange, digest) == {DIGEST: digest, "asked": records_out(own)["asked"]}
    assert digest_out(own, exchange, "0" * 64) is None  # the controller holds other lines: the rest is read

    sent = spared.result.requests_sent
    assert spared.completed() and spared.complete
    assert spared.result.records == whole.result.records  # in plan order, as the other worker put them together
    assert lines_sha256(spared.result.records, spared.lines) == digest
    assert spared.result.requests_sent == sent > 0  # its own asks stay its own

    # The controller said it has no read: a worker does not wait for one.
    (exchange / "controller-read.sha256").unlink()
    publish_no_read(exchange)
    assert digest_out(own, exchange, digest, wait_s=60.0, clock=lambda: 0.0) is None
    assert RECORDS in records_out(whole.result.records, whole.lines, exchange, digest, wait_s=60.0)  # nor the decider


def test_a_spared_worker_whose_shard_files_are_gone_says_so(distinct_cube, scripted_server, tmp_path):
    scripted_server.set_script({"default": "B"})
    exchange = tmp_path / "exchange"
    exchange.mkdir()

    async def take(own_file: str) -> bool:
        while not (exchange / "candidate-0-0.jsonl").exists():
            await asyncio.sleep(0.01)
        return True

    _, spared = _workers(distinct_cube, scripted_server, tmp_path / "store", [exchange, exchange],
                         take_whole=[None, take])
    (exchange / "candidate-0-0.jsonl").unlink()
    assert not spared.completed() and not spared.complete
