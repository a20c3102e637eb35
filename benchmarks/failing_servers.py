"""How long a run takes to end when its server fails, with the default settings.

    python -m benchmarks.failing_servers [--reps 3] [--only die,stall,throttle,endless,hf-die]

Every figure goes through the real runner, the real OpenAI adapter and the `openai`
client, with the adapter's defaults (concurrency 16, timeout 60 s, 6 retries, backoff
1..60 s, breaker 10 failed attempts and 10 s without an answer):

- `die`: the scripted server (its own process, 50 ms per answer) is SIGKILLed after 100
  answers of the bundled mini cube (1,064 items); time from the kill to the run's end.
- `stall`: the server stops answering after 100 requests (every later request hangs):
  time from the last answer to the end.
- `throttle`: after 100 answers every request gets 429 with `Retry-After: 100000`; and
  with `Retry-After: 5` (under the cap: the breaker, not the cap, ends it).
- `endless`: the README's command (`pytest --model=openai:NAME@URL`, in a subprocess, on
  the mini cube) against the scripted server whose model never stops (2 ms per token,
  one inference thread): wall time and CPU time of the gate, and the outcomes recorded.
- `hf-die`: `transformers serve` on the tiny VLM (medrcube.testing.tiny_vlm), killed
  after 20 answers; time to the end, then the rerun on the same store: how many requests
  it sends (the unanswered items exactly).

Durations are measured here, never asserted in a test. Results print as JSON lines and
go to benchmarks/results/failing_servers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from medrcube.report import after_exit

ROOT = Path(__file__).resolve().parents[1]
MINI = ROOT / "fixtures" / "mini"
OUT = ROOT / "benchmarks" / "results" / "failing_servers.json"
MODEL = "bench-model"


def _cube() -> Any:
    from medrcube.cube import load_cube

    return load_cube(MINI)


def _adapter(url: str, model: str = MODEL) -> Any:
    from medrcube.models.openai_adapter import OpenAIAdapter

    return OpenAIAdapter(model, base_url=url)  # every default


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _run_until(cube: Any, adapter: Any, store_dir: Path | None, trigger: Any) -> dict[str, Any]:
    """Run the cube on a thread; `trigger()` blocks until the fault is in and returns its
    time; returns the run's result and the seconds from the fault to the end."""
    from medrcube.run.runner import run_cube
    from medrcube.run.store import ResponseStore

    store = ResponseStore(store_dir) if store_dir is not None else None
    box: dict[str, Any] = {}

    def work() -> None:
        box["result"] = run_cube(cube, adapter, store=store)
        box["end"] = time.monotonic()

    cpu0 = _cpu()
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    at = trigger()
    thread.join(timeout=1800)
    if store is not None:
        store.close()
    result = box["result"]
    outcomes = Counter(r.outcome.value for r in result.records)
    return {"seconds_after_fault": round(box["end"] - at, 2), "cpu_s": round(_cpu() - cpu0, 2),
            "aborted": (result.aborted or "")[:160], "outcomes": dict(outcomes), "requests_sent": result.requests_sent}


def _answers_reached(srv: Any, n: int) -> float:
    while sum(srv.stats(log=False)["answered"].values()) < n:
        time.sleep(0.02)
    return time.monotonic()


def die(rep: int) -> dict[str, Any]:
    from medrcube.testing.server import ServerProcess

    srv = ServerProcess({"latency": 0.05}).start()
    try:
        def trigger() -> float:
            _answers_reached(srv, 100)
            srv.kill()
            return time.monotonic()

        return _run_until(_cube(), _adapter(srv.base_url), None, trigger)
    finally:
        srv.close()


def stall(rep: int) -> dict[str, Any]:
    from medrcube.testing.server import ScriptedServer

    with ScriptedServer({"latency": 0.05, "faults": [{"fault": "hang", "after": 100}]}) as srv:
        return _run_until(_cube(), _adapter(srv.base_url), None, lambda: _answers_reached(srv, 100))


def throttle(rep: int, retry_after: float) -> dict[str, Any]:
    from medrcube.testing.server import ScriptedServer

    rule = {"fault": "status", "status": 429, "retry_after": retry_after, "after": 100}
    with ScriptedServer({"latency": 0.05, "faults": [rule]}) as srv:
        return _run_until(_cube(), _adapter(srv.base_url), None, lambda: _answers_reached(srv, 100))


def endless(rep: int) -> dict[str, Any]:
    """The README's command against a model that never stops, on one inference thread."""
    from medrcube.testing.server import ScriptedServer

    with ScriptedServer({"faults": [{"fault": "endless", "token_s": 0.002}]}) as srv, \
            tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pytest", "--pyargs", "medrcube.suite", f"--model=openai:{MODEL}@{srv.base_url}",
               f"--medrcube-report={tmp}/reports", f"--response-store={tmp}/store", "-p", "no:cacheprovider", "-q"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        t0 = time.monotonic()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=1800)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.monotonic() - t0
        (run_dir,) = list(Path(tmp, "reports").iterdir())
        outcomes = Counter(json.loads(line)["outcome"] for line in (run_dir / "results.jsonl").read_text().splitlines())
        after_exit.wait_drawn(run_dir, timeout_s=120)  # the detached page drawer, before the directory goes
        return {"wall_s": round(wall, 1), "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
                "exit": done.returncode, "outcomes": dict(outcomes), "requests": srv.stats(log=False)["total"],
                "verdict": done.stdout.strip().splitlines()[-2][:80] if done.stdout.strip() else ""}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(model: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    exe = str(Path(sys.executable).with_name("transformers"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with log.open("ab") as out:
        proc = subprocess.Popen([exe, "serve", model, "--host", "127.0.0.1", "--port", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5):
                return proc
        except OSError:
            time.sleep(1)
    proc.kill()
    raise RuntimeError(f"transformers serve did not start: {log.read_text(errors='replace')[-1000:]}")


def hf_die(rep: int) -> dict[str, Any]:
    """`transformers serve` killed after 20 answers; then restarted and the run resumed."""
    import dataclasses

    from medrcube.testing.tiny_vlm import build_tiny_vlm

    tmp = Path(tempfile.mkdtemp(prefix="medrcube-hf-die-"))
    try:
        model = str(build_tiny_vlm(tmp / "my-vlm"))
        port = _free_port()
        url = f"http://127.0.0.1:{port}/v1"
        cube = _cube()
        cube = dataclasses.replace(cube, items=cube.items[:120])  # a CPU answers ~1 request a second
        proc = _serve(model, port, tmp / "serve.log")
        answered = {"n": 0}

        def trigger() -> float:
            while answered["n"] < 20:
                time.sleep(0.5)
                answered["n"] = _count(tmp / "store")
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return time.monotonic()

        first = _run_until(cube, _adapter(url, model), tmp / "store", trigger)
        proc = _serve(model, port, tmp / "serve.log")
        try:
            from medrcube.run.runner import run_cube
            from medrcube.run.store import ResponseStore

            store = ResponseStore(tmp / "store")
            again = run_cube(cube, _adapter(url, model), store=store)
            store.close()
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        unanswered = first["outcomes"].get("error", 0)
        return {**first, "rerun_requests": again.requests_sent, "unanswered_before": unanswered,
                "rerun_errors": again.errors, "rerun_aborted": again.aborted}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _count(store_dir: Path) -> int:
    import sqlite3

    db = store_dir / "responses.sqlite3"
    if not db.exists():
        return 0
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])


SCENARIOS = {
    "die": die, "stall": stall,
    "throttle": lambda rep: throttle(rep, 100000.0), "throttle-5s": lambda rep: throttle(rep, 5.0),
    "endless": endless, "hf-die": hf_die,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.failing_servers", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    args = ap.parse_args(argv)
    for name in args.only.split(","):
        runs = [SCENARIOS[name](r) for r in range(args.reps if name not in ("hf-die", "stall") else 1)]
        key = "seconds_after_fault" if "seconds_after_fault" in runs[0] else "wall_s"
        entry = {"runs": runs, f"median_{key}": statistics.median(r[key] for r in runs)}
        print(json.dumps({name: entry}), flush=True)
        out: dict[str, Any] = json.loads(OUT.read_text()) if OUT.exists() else {}  # read late: runs may overlap
        out[name] = entry
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
