"""Several vLLM engines behind one URL, placed, routed and restarted by Ray Serve.

    .venv-vllm/bin/python scripts/ray_serve_vllm.py --model PATH [--replicas 2] [--port 8000]
        [--address auto] [--cpus-per-replica 1] [--gpus-per-replica 0] [-- ENGINE FLAGS ...]

Runs in vLLM's environment (scripts/setup-vllm installs Ray Serve there too). Each Ray
Serve replica starts one vLLM OpenAI-compatible server on its node (`python -m
vllm.entrypoints.openai.api_server`, as the gate's managed engine) and forwards the
requests Ray Serve routes to it; Ray Serve's proxy answers at one URL,
`http://HOST:PORT/v1`, which the gate attaches to like any vLLM server:

    pytest --model=vllm:PATH@http://HOST:PORT/v1

So the gate asks, stores, retries, breaks the circuit and resumes exactly as with one
engine (docs/engines.md, "More than one machine"). `--address auto` joins a running Ray
cluster (`ray start --head` on one node, `ray start --address=HEAD:6379` on the others);
without it a single-node Ray is started for the run. Each response carries the header
`x-medrcube-replica` (the replica's node and engine port), so that the spread can be seen.
SIGTERM or Ctrl-C: the replicas stop their engines, Serve and Ray shut down.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import httpx
import ray
from ray import serve
from starlette.requests import Request
from starlette.responses import Response

API_SERVER = "vllm.entrypoints.openai.api_server"
HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive", "server", "date"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@serve.deployment(health_check_period_s=5, health_check_timeout_s=30)
class VLLMReplica:
    """One vLLM server on this replica's node, behind Ray Serve's router."""

    def __init__(self, model: str, flags: list[str], start_timeout: float) -> None:
        self.port = _free_port()
        self.name = f"{socket.gethostname()}:{self.port}"
        env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", API_SERVER, "--model", model, "--host", "127.0.0.1", "--port", str(self.port), *flags],
            stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        deadline = time.monotonic() + start_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the vLLM engine of replica {self.name} exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self._stop()
                raise RuntimeError(f"the vLLM engine of replica {self.name} did not answer within {start_timeout:g}s")
            time.sleep(0.5)
        self.client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=None)

    async def __call__(self, request: Request) -> Response:
        answer = await self.client.request(
            request.method, request.url.path, params=list(request.query_params.multi_items()),
            content=await request.body(), headers={"content-type": request.headers.get("content-type", "application/json")})
        headers = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS}
        headers["x-medrcube-replica"] = self.name
        return Response(answer.content, status_code=answer.status_code, headers=headers)

    def check_health(self) -> None:
        """Ray Serve's health check: a replica whose engine died is replaced."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"the vLLM engine of replica {self.name} exited with {self.proc.returncode}")

    def _stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=30)
                return
            except (ProcessLookupError, PermissionError):
                return
            except subprocess.TimeoutExpired:
                continue

    def __del__(self) -> None:
        if getattr(self, "proc", None) is not None:
            self._stop()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    flags: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, flags = argv[:at], argv[at + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the checkpoint (a directory every node can read)")
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--address", default=None, help="a Ray cluster to join ('auto': the one on this node)")
    ap.add_argument("--cpus-per-replica", type=float, default=1.0)
    ap.add_argument("--gpus-per-replica", type=float, default=0.0)
    ap.add_argument("--start-timeout", type=float, default=900.0)
    args = ap.parse_args(argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    model = os.path.abspath(args.model) if os.path.isdir(args.model) else args.model
    if args.address:
        ray.init(address=args.address)
    else:  # a single-node Ray for this run: room for the replicas and Serve's proxy and controller
        ray.init(num_cpus=max(2, int(args.replicas * args.cpus_per_replica) + 2), include_dashboard=False)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": args.host, "port": args.port})
        app = VLLMReplica.options(
            num_replicas=args.replicas,
            ray_actor_options={"num_cpus": args.cpus_per_replica, "num_gpus": args.gpus_per_replica},
        ).bind(model, flags, args.start_timeout)
        serve.run(app, name="vllm", route_prefix="/")
        print(f"serving {model} on {args.replicas} vLLM replicas at http://{args.host}:{args.port}/v1", flush=True)
        stop.wait()
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
