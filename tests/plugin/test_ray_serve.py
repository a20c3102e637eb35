"""Ray runs the inference: two vLLM replicas (CPU build, the tiny BLIP-2 built at test time)
behind Ray Serve at one URL, on a single-node Ray started for the test
(scripts/ray_serve_vllm.py, in vLLM's environment, where scripts/setup-vllm installs Ray
Serve). The gate attaches to that URL (`vllm:PATH@URL`) and decides from its store as after
any run of its own; both replicas answer; stopping the server leaves no engine behind.
Skipped, saying why, without a vLLM environment holding Ray Serve.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from medrcube.testing.processes import command_lines

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ray_python(vllm_python: Path) -> Path:
    if subprocess.run([str(vllm_python), "-c", "import ray.serve"], capture_output=True).returncode != 0:
        pytest.skip(f"Ray Serve is not installed in {vllm_python.parent.parent} (scripts/setup-vllm installs it)")
    return vllm_python


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _engines(model: Path) -> list[int]:
    return [pid for pid, cmd in command_lines() if "vllm.entrypoints.openai.api_server" in cmd and str(model) in cmd]


@pytest.mark.slow
def test_the_gate_on_vllm_replicas_behind_ray_serve(gate_ws, ray_python: Path, tiny_blip2: Path, tmp_path: Path) -> None:
    # The shared checkpoint under a path of this test's own: its replicas are found by it.
    model = tmp_path / "tiny-vlm"
    shutil.copytree(tiny_blip2, model)
    port = _free_port()
    log = tmp_path / "serve.log"
    argv = [str(ray_python), str(REPO / "scripts" / "ray_serve_vllm.py"), "--model", str(model), "--replicas", "2",
            "--port", str(port), "--", "--enforce-eager", "--dtype", "float32", "--max-model-len", "256",
            "--max-num-seqs", "4"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["VLLM_CPU_KVCACHE_SPACE"] = "1"
    with log.open("wb") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 1200
        while "serving " not in log.read_text(errors="replace"):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(1)
        replicas = set()
        for _ in range(12):  # Ray Serve spreads requests over both replicas
            with urllib.request.urlopen(f"{base}/models", timeout=60) as r:
                replicas.add(r.headers["x-medrcube-replica"])
                assert json.load(r)["data"][0]["id"] == str(model)
        assert len(replicas) == 2, replicas

        result = gate_ws.run_subprocess(model=f"vllm:{model}@{base}")
        run_dir = gate_ws.run_dirs()[-1]
        run_json = json.loads((run_dir / "run.json").read_text())
        assert run_json.get("aborted") is None and run_json["requests_sent"] == 27
        records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
        assert {r["outcome"] for r in records} <= {"correct", "wrong", "unparsed", "refused", "truncated"}
        assert result.ret in (10, 11)
        engine = json.loads((run_dir / "gate.json").read_text())["model_engine"]
        assert engine["engine"].startswith("vllm ") and engine["managed"] is False  # its /version, through Serve
        # The rerun on the same store asks nothing: the gate decides from its store.
        gate_ws.run_subprocess(model=f"vllm:{model}@{base}")
        assert json.loads((gate_ws.run_dirs()[-1] / "run.json").read_text())["requests_sent"] == 0
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while _engines(model) and time.monotonic() < deadline:
        time.sleep(1)
    assert _engines(model) == [], "a replica's engine outlived Ray Serve"
