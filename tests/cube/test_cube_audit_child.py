"""cube/audit_child.py: the leakage audit computed in a child process, taken by the parent;
a child still starting, failed or orphaned never costs the audit nor leaves a process or a
folder behind. And the gate's use of it (plugin/speed/tail_ahead.py): started where the
cache misses, taken once, kept in the cache."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests.cube.test_cube_audit import leaky_cube
from tests.reliability.reliability_kit import process_state, wait_for

from medrcube.cube import audit_child, load_cube
from medrcube.cube.audit import audit_items
from medrcube.cube.derived_cache import items_digest


@pytest.fixture(scope="module")
def leaky(tmp_path_factory):
    cube = load_cube(leaky_cube(tmp_path_factory.mktemp("leaky") / "cube"))
    items = list(cube.items_by_content)[:160]  # 40 images: leaky still, and quick to audit
    return cube, items, audit_items(items)


def test_the_child_computes_the_audit_the_parent_would(leaky) -> None:
    _, items, truth = leaky
    assert truth.findings  # a leaky cube: an audit that lost its findings would show
    child = audit_child.start(items, items_digest(items))
    assert child is not None and (child.folder / audit_child.ITEMS).is_file()
    wait_for(lambda: child.process.poll() is not None, "the child's end")
    assert child.take() == truth
    assert not child.folder.exists()


def test_a_child_still_starting_is_stopped_and_the_parent_computes(leaky) -> None:
    # Taken before its imports are done (a run whose answers were all in at once): computing
    # here ends sooner than waiting, so the child is stopped and gives nothing.
    _, items, _ = leaky
    child = audit_child.start(items, items_digest(items))
    assert child is not None
    assert child.take() is None
    assert child.process.returncode is not None and not child.folder.exists()


def test_a_child_given_other_items_gives_nothing(leaky) -> None:
    _, items, _ = leaky
    child = audit_child.start(items, "0" * 64)  # not these items' digest
    assert child is not None
    wait_for(lambda: child.process.poll() is not None, "the child's end")
    assert child.process.returncode == 3
    assert "not the parent's" in (child.folder / audit_child.LOG).read_text()
    assert child.take() is None and not child.folder.exists()


def test_a_child_ends_with_its_parent_killed(leaky, tmp_path) -> None:
    # Whatever ends the parent ends the child (its stdin closes), which removes its folder.
    cube, _, _ = leaky
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from medrcube.cube import audit_child, load_cube\n"
         "from medrcube.cube.derived_cache import items_digest\n"
         "items = list(load_cube(sys.argv[1]).items_by_content)\n"
         "child = audit_child.start(items, items_digest(items))\n"
         "print(child.process.pid, child.folder, flush=True)\n"
         "time.sleep(600)\n", str(cube.root)],
        stdout=subprocess.PIPE, text=True)
    try:
        pid_text, folder_text = parent.stdout.readline().split()
        pid, folder = int(pid_text), Path(folder_text)
        assert process_state(pid) not in ("Z", "X", "gone") and folder.is_dir()
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        wait_for(lambda: process_state(pid) in ("Z", "X", "gone"), "the orphaned child's end")  # an orphan may stay a zombie here
        wait_for(lambda: not folder.exists(), "the orphan's folder removed")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_the_gate_starts_the_child_where_the_cache_misses_and_keeps_its_audit(leaky, tmp_path, monkeypatch) -> None:
    from medrcube.plugin.speed.tail_ahead import AUDIT_CHILD_MIN_ITEMS, leak_audit, start_leak_audit, stop_leak_audit

    cube, _, _ = leaky
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path / "cache"))
    truth = audit_items(list(cube.items_by_content))
    assert len(cube.items_by_content) >= AUDIT_CHILD_MIN_ITEMS  # a cube worth a child

    def session() -> SimpleNamespace:  # the fields of plugin/session.GateSession these functions read and set
        return SimpleNamespace(cube=cube, items_digest=None, leak_audit=None, audit_child=None)

    first = session()
    assert start_leak_audit(first) is None and first.audit_child is not None  # cold: started
    child = first.audit_child
    wait_for(lambda: child.process.poll() is not None, "the child's end")
    assert leak_audit(first) == truth and first.audit_child is None  # taken once
    assert child.process.returncode == 0 and not child.folder.exists()
    assert list((tmp_path / "cache" / "leak-audit").glob("*.json"))  # kept for the next run

    second = session()
    assert start_leak_audit(second) == truth and second.audit_child is None  # warm: read, nothing started

    # A run that ends without taking it (Ctrl-C, a usage error) stops it.
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path / "other-cache"))
    third = session()
    start_leak_audit(third)
    started = third.audit_child
    assert started is not None
    stop_leak_audit(third)
    assert third.audit_child is None and started.process.returncode is not None and not started.folder.exists()

    # A small cube: the audit costs less than a child's start-up; computed after the answers.
    small = SimpleNamespace(cube=SimpleNamespace(items_by_content=cube.items_by_content[:AUDIT_CHILD_MIN_ITEMS - 1]),
                            items_digest=None, leak_audit=None, audit_child=None)
    assert start_leak_audit(small) is None and small.audit_child is None
