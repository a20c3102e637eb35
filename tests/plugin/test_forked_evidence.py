"""plugin/speed/forked_evidence.py: the family's evidence collected with a forked child on a
share of the checks is the evidence collected in one process, check by check; a child that
dies leaves the parent to collect its share.

Real forks of this test process, a real family of checks from the packaged policy, and a run's
records of every variant (standard, blind, shuffled:3) on images shared by several tasks, so
that credibility, image dependence and position all have something to measure."""

from __future__ import annotations

import os
import random
import time
from dataclasses import replace

import pytest

from medrcube.gate.checks import build_checks
from medrcube.gate.evaluate import collect_each, evaluate_gate
from medrcube.gate.evidence import ByScope
from medrcube.gate.thresholds import load_policy
from medrcube.plugin.options import _parse_variants, packaged_thresholds
from medrcube.plugin.speed.forked_evidence import collect_forked
from medrcube.records import Outcome

VARIANTS = "standard,blind,shuffled:3"
TASKS = ("Modality Recognition", "Organ Recognition", "Disease Diagnosis", "Abnormality Diagnosis")
PLACES = (("Chest", "X-Ray"), ("Brain", "MRI"), ("Lungs", "CT"))

# Set by a test for the forks it makes: each fork of this process counted; its child ended at once, or
# asleep (a child whose core another job holds).
_FORKS: dict = {"count": 0, "child_exits": None, "child_sleeps": False, "in_child": None, "parent_waits": 0.0}


def _counted() -> None:
    _FORKS["count"] += 1
    time.sleep(_FORKS["parent_waits"])  # the child's answer ready before this process looks for it


def _in_child() -> None:
    if _FORKS["child_exits"] is not None:
        os._exit(_FORKS["child_exits"])
    if _FORKS["child_sleeps"]:
        time.sleep(600)
        os._exit(0)
    if _FORKS["in_child"] is not None:
        _FORKS["in_child"]()


os.register_at_fork(after_in_parent=_counted, after_in_child=_in_child)


def _run(rec, images_per_place: int, seed: int) -> list:
    """Every task asked on every image, in every variant; a model right about 70% of the time
    without the image (blind) too, as a shortcut-taker would be, so that the checks differ."""
    rng = random.Random(seed)
    out = []
    for part, modality in PLACES:
        for i in range(images_per_place):
            image = f"img/{part}-{i}.png"
            for task in TASKS:
                item = f"{part}-{modality}-{task}-{i}"
                for variant, rotation in (("standard", 0), ("blind", 0), ("shuffled", 1), ("shuffled", 2),
                                          ("shuffled", 3)):
                    outcome = Outcome.CORRECT if rng.random() < 0.7 else rng.choice((Outcome.WRONG, Outcome.WRONG,
                                                                                      Outcome.UNPARSED))
                    out.append(rec(item, outcome, task=task, modality=modality, part=part, image=image,
                                           variant=variant, rotation=rotation, answer=rng.randrange(4)))
    return out


def _family(records: list) -> list:
    cells = sorted({(r.part, r.modality, r.task) for r in records})
    return build_checks(cells, load_policy(packaged_thresholds()), variants=_parse_variants(VARIANTS))


def _min_records(n: int):
    """collect_forked with its threshold for this test's smaller runs."""
    def collect(checks, scoped, base, baseline_error):
        return collect_forked(checks, scoped, base, baseline_error, min_records=n)
    return collect


@pytest.fixture
def forks():
    _FORKS.update(count=0, child_exits=None, child_sleeps=False, in_child=None, parent_waits=0.0)
    yield _FORKS
    _FORKS.update(count=0, child_exits=None, child_sleeps=False, in_child=None, parent_waits=0.0)


def test_forked_evidence_is_the_evidence_collected_check_by_check(forks, rec) -> None:
    records = _run(rec, images_per_place=40, seed=1)  # 2,400 records
    checks = _family(records)
    kinds = {str(c.kind) for c in checks}
    assert {"credibility", "image_dependence", "position", "cell"} <= kinds
    serial = evaluate_gate(checks, records)
    forks["parent_waits"] = 0.3  # so that the child's answer is there and taken
    forked = evaluate_gate(checks, records, collect_family=_min_records(0))
    assert forks["count"] == 1
    assert forked.evidences == serial.evidences
    assert [v.to_dict() for v in forked.verdicts] == [v.to_dict() for v in serial.verdicts]
    assert forked.gate == serial.gate
    # The parent's own Check objects, in the checks' order.
    assert all(ev.check is c for ev, c in zip(forked.evidences, checks, strict=True))
    # Something to decide on in the kinds the child collects (not an all-empty family).
    assert any(ev.criteria for ev in forked.evidences if str(ev.check.kind) in ("credibility", "position"))


def test_the_childs_answer_is_taken_for_its_share(forks, rec) -> None:
    """A child whose worst items differ (changed in the child only): its share comes back that way,
    the parent's own checks as always. So the evidence above was the child's where it was its share."""
    import medrcube.gate.evidence as evidence_module

    records = _run(rec, images_per_place=40, seed=5)
    checks = _family(records)
    serial = collect_each(checks, ByScope(records), None, None)
    forks["parent_waits"] = 0.3
    forks["in_child"] = lambda: setattr(evidence_module, "MAX_WORST", 0)
    got = collect_forked(checks, ByScope(records), None, None, min_records=0)
    theirs = [i for i, (a, b) in enumerate(zip(got, serial, strict=True)) if a != b]
    assert theirs, "no evidence came from the child"
    assert all(replace(got[i], worst=serial[i].worst) == serial[i] for i in theirs)  # their worst items only
    assert {str(checks[i].kind) for i in theirs} <= {"credibility", "position", "image_dependence", "calibration"}
    assert all(str(c.kind) not in ("cell", "slice", "overall") or a == b
               for c, a, b in zip(checks, got, serial, strict=True))


def test_a_child_that_dies_leaves_its_share_to_the_parent(forks, rec) -> None:
    records = _run(rec, images_per_place=20, seed=2)
    checks = _family(records)
    forks["child_exits"] = 3  # every child of this process ends before it collects anything
    got = collect_forked(checks, ByScope(records), None, None, min_records=0)
    assert forks["count"] == 1
    assert got == collect_each(checks, ByScope(records), None, None)


def test_a_child_that_does_not_answer_is_not_waited_for(forks, rec) -> None:
    """A child whose core another job holds: this process collects the child's share too, takes its own
    and ends the child (the test would wait ten minutes for it otherwise)."""
    records = _run(rec, images_per_place=20, seed=4)
    checks = _family(records)
    forks["child_sleeps"] = True
    got = collect_forked(checks, ByScope(records), None, None, min_records=0)
    assert forks["count"] == 1
    assert got == collect_each(checks, ByScope(records), None, None)
    assert all(ev.check is c for ev, c in zip(got, checks, strict=True))


def test_few_records_are_collected_without_a_fork(forks, rec) -> None:
    records = _run(rec, images_per_place=5, seed=3)
    checks = _family(records)
    assert len(records) < 4000
    got = collect_forked(checks, ByScope(records), None, None)
    assert forks["count"] == 0
    assert got == collect_each(checks, ByScope(records), None, None)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_a_process_pinned_to_one_core_collects_without_a_fork(forks, rec) -> None:
    # A CI job pinned to one core of a larger machine: os.cpu_count() names the machine's cores,
    # the affinity the one this process may use, where a child would only take turns with it.
    records = _run(rec, images_per_place=5, seed=5)
    checks = _family(records)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        got = collect_forked(checks, ByScope(records), None, None, min_records=0)
    finally:
        os.sched_setaffinity(0, before)
    assert forks["count"] == 0
    assert got == collect_each(checks, ByScope(records), None, None)


def test_the_wait_for_the_child_does_the_meanwhile_work_once_and_changes_no_evidence(forks, rec) -> None:
    # A child that has not answered when this process's share is done (asleep: another job holds its
    # core): the process's other work is done in that wait, once; a meanwhile that raises changes nothing.
    records = _run(rec, images_per_place=20, seed=6)
    checks = _family(records)
    serial = collect_each(checks, ByScope(records), None, None)
    forks["child_sleeps"] = True
    done: list[int] = []
    got = collect_forked(checks, ByScope(records), None, None, min_records=0, meanwhile=lambda: done.append(1))
    assert done == [1]
    assert got == serial
    forks["count"] = 0

    def broken() -> None:
        done.append(2)
        raise RuntimeError("an optimisation that failed")

    assert collect_forked(checks, ByScope(records), None, None, min_records=0, meanwhile=broken) == serial
    assert done == [1, 2] and forks["count"] == 1


def test_a_child_that_answered_first_leaves_the_meanwhile_work_undone(forks, rec) -> None:
    records = _run(rec, images_per_place=20, seed=7)
    checks = _family(records)
    forks["parent_waits"] = 0.3  # the child's answer is there before this process looks for it
    done: list[int] = []
    got = collect_forked(checks, ByScope(records), None, None, min_records=0, meanwhile=lambda: done.append(1))
    assert done == []  # done where it was before: after the verdicts (tail_ahead.ask_for_run_files)
    assert got == collect_each(checks, ByScope(records), None, None)


def test_each_kind_given_only_the_variants_it_reads_decides_as_on_every_record(rec) -> None:
    """The family's checks take from ByScope only the variants their kind reads (KindEntry.reads:
    credibility, calibration and the accuracy counts the standard answers, image dependence the
    standard and blind ones, position the standard and shuffled ones); each check's evidence is
    the evidence `collect` makes from the whole run's records, unordered as xdist may hand them."""
    from medrcube.gate.evidence import collect
    from medrcube.gate.kinds import entry_of

    records = _run(rec, images_per_place=12, seed=11)
    random.Random(3).shuffle(records)
    checks = _family(records)
    assert {entry_of(str(c.kind)).reads for c in checks} >= {("standard",), ("standard", "blind"),
                                                               ("standard", "shuffled")}
    grouped = collect_each(checks, ByScope(records), None, None)
    assert grouped == [collect(c, records) for c in checks]
    assert any(ev.criteria for ev in grouped if str(ev.check.kind) in ("credibility", "position", "image_dependence"))


def test_the_answer_is_taken_without_waiting_for_the_child_to_exit(forks, rec, tmp_path) -> None:
    """The child closes its end of the pipe once it has written its answer, and the parent takes the answer
    then, not once the child has exited (an exit lets go of the child's copy of the heap first: about 10 ms at
    the paper's scale); the child is waited for by a thread. Here the child's exit hangs: the parent has the
    same evidence while the child is still there."""
    records = _run(rec, images_per_place=12, seed=7)
    checks = _family(records)
    pidfile = tmp_path / "child.pid"

    def exit_slowly() -> None:
        pidfile.write_text(str(os.getpid()))
        real_exit = os._exit

        def slow_exit(status: int) -> None:
            time.sleep(120)
            real_exit(status)

        os._exit = slow_exit

    forks["in_child"] = exit_slowly
    forks["parent_waits"] = 0.3
    got = collect_forked(checks, ByScope(records), None, None, min_records=0)
    pid = int(pidfile.read_text())
    try:
        assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # not exited yet
        assert got == collect_each(checks, ByScope(records), None, None)
    finally:
        os.kill(pid, 9)
