"""report.html is drawn by a detached child after the gate's exit status
(medrcube/report/after_exit.py): the sealed files are complete at exit, the page ends up
the page the run would have drawn itself, and the seal holds before and after it."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from medrcube.cube import load_cube
from medrcube.report.after_exit import ENV, drawer_alive, drawing_lock_path, pending_page, spawn, state, wait_drawn
from medrcube.report.html import write_report_html
from medrcube.rundir.seal import MANIFEST, verify_run_dir

SEALED = ("gate.json", "run.json", "results.jsonl", "metrics_summary.json", MANIFEST)


def _sealed_bytes(run_dir: Path) -> dict[str, bytes]:
    return {name: (run_dir / name).read_bytes() for name in SEALED}


def _drawer_ends(run_dir: Path, within_s: float = 60.0) -> bool:
    """Whether the drawer of `run_dir` ends (bounded wait): the page is written before the
    drawer removes its lock file and exits, so right after "drawn" it may still hold it."""
    deadline = time.monotonic() + within_s
    while drawer_alive(run_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not drawer_alive(run_dir)


def test_the_page_is_drawn_after_the_exit_and_is_the_page_the_run_would_draw(gate_ws, gate_server, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run(model=gate_ws.openai(gate_server))
    assert result.ret == 11, result.stdout.str()[-3000:]  # UNDECIDED on this small cube: a verdict, at exit
    run_dir = gate_ws.run_dirs()[-1]
    # At the exit status: every sealed file is there and verifies; the page is pending or drawn.
    at_exit = _sealed_bytes(run_dir)
    assert verify_run_dir(run_dir).ok
    assert state(run_dir) in ("pending", "drawn")
    assert wait_drawn(run_dir) == "drawn"
    assert (run_dir / "plots").is_dir()
    # The child changed nothing the seal covers, and the seal still verifies.
    assert _sealed_bytes(run_dir) == at_exit
    check = verify_run_dir(run_dir)
    assert check.ok, check.problems
    # The same page as drawn in the run's own process (with its loaded cube).
    drawn = (run_dir / "report.html").read_bytes()
    write_report_html(run_dir, cube=load_cube(gate_ws.path / "cube" / "cube.jsonl"))
    assert (run_dir / "report.html").read_bytes() == drawn
    # And it is the child that draws it: the page pending and the figures gone, one child
    # spawned by this process draws them both again.
    shutil.rmtree(run_dir / "plots")
    (run_dir / "report.html").write_text(pending_page(run_dir), encoding="utf-8")
    pid = spawn(run_dir)
    assert pid is not None and pid != os.getpid()
    assert wait_drawn(run_dir) == "drawn"
    assert (run_dir / "report.html").read_bytes() == drawn and any((run_dir / "plots").iterdir())


def test_a_pending_page_is_waited_for_only_while_its_drawer_runs(gate_ws, gate_server, monkeypatch, tmp_path):
    """The drawer holds its lock from the run's exit to its own (taken before it is spawned),
    and removes its file when done; a copy of the directory taken while the page was pending
    has no drawer, and neither has a directory whose drawer died."""
    monkeypatch.delenv(ENV, raising=False)
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    assert gate_ws.run(model=gate_ws.openai(gate_server)).ret == 11
    run_dir = gate_ws.run_dirs()[-1]
    assert wait_drawn(run_dir) == "drawn" and _drawer_ends(run_dir)
    lock = drawing_lock_path(run_dir)
    assert lock is not None and not lock.exists()  # removed by the drawer when done

    # A copy made while the page was pending: nobody draws it, so nobody waits for it.
    copy = Path(shutil.copytree(run_dir, tmp_path / "archived"))
    (copy / "report.html").write_text(pending_page(copy), encoding="utf-8")
    assert not drawer_alive(copy) and wait_drawn(copy) == "pending"

    # The original pending again, with a drawer spawned: held from the spawn, before the child runs.
    (run_dir / "report.html").write_text(pending_page(run_dir), encoding="utf-8")
    assert spawn(run_dir) is not None
    assert drawer_alive(run_dir) or state(run_dir) == "drawn"  # (a child that already finished)
    assert wait_drawn(run_dir) == "drawn" and _drawer_ends(run_dir)

    # A drawer that died leaves its file, unlocked: not waited for.
    lock.write_text("", encoding="utf-8")
    (run_dir / "report.html").write_text(pending_page(run_dir), encoding="utf-8")
    assert not drawer_alive(run_dir) and wait_drawn(run_dir) == "pending"


def test_now_draws_the_page_before_the_exit_and_a_bad_mode_says_so(gate_ws, gate_server, monkeypatch):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    model = gate_ws.openai(gate_server)
    monkeypatch.setenv(ENV, "now")
    assert gate_ws.run(model=model).ret == 11
    assert state(gate_ws.run_dirs()[-1]) == "drawn"  # no child: drawn before the exit status

    monkeypatch.setenv(ENV, "later-please")
    result = gate_ws.run(model=model)
    assert result.ret == 11
    assert state(gate_ws.run_dirs()[-1]) == "drawn"
    result.stdout.fnmatch_lines([f"*{ENV}='later-please': expected one of after, now*drawn before the exit status*"])


def test_a_page_that_cannot_be_drawn_says_why(tmp_path):
    from medrcube.report.after_exit import main

    run_dir = tmp_path / "not-a-run"
    run_dir.mkdir()
    assert main([str(run_dir), "[]"]) == 1
    assert state(run_dir) == "failed"
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Drawing this page failed" in page and f"medrcube report {run_dir}" in page
