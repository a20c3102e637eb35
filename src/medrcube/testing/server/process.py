"""Process control of the scripted server: the server on a background thread
(`ScriptedServer`: lifecycle, script swaps, statistics), the server as a child process
(`ServerProcess`, for SIGKILL and restart tests) and the `python -m` entry point.
"""

from __future__ import annotations

import argparse
import copy
import json
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from medrcube.testing.server.faults import _Handler, _HTTPServer
from medrcube.testing.server.owner import _Plan
from medrcube.testing.server.script import REPLYING_FAULTS, Parsed, ReplyFn, Script, ScriptError, _Rule


def _new_stats() -> dict[str, Any]:
    return {
        "total": 0, "by_status": Counter(), "by_outcome": Counter(), "by_fault": Counter(),
        "by_question": Counter(), "by_prompt": Counter(), "by_request": Counter(), "answered": Counter(),
        "models": Counter(), "auth": Counter({"present": 0, "absent": 0}),
        "images": Counter({"with": 0, "without": 0, "total": 0}),
        "in_flight": 0, "max_in_flight": 0, "other": Counter(), "requests": [], "connections": 0,
    }



class ScriptedServer:
    """The server, run on a background thread; a context manager (see the module docstring)."""

    def __init__(self, script: Mapping[str, Any] | Script | None = None, *, reply: ReplyFn | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self.script = script if isinstance(script, Script) else Script.parse(script, reply)
        if reply is not None:
            self.script.reply_fn = reply
        self._stats = _new_stats()
        self._seq = 0
        self._t0 = time.monotonic()
        self._stopping = threading.Event()
        self._inference = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._host, self._port = host, port
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HTTPServer((self._host, self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._port = httpd.server_address[1]  # a restart comes back on the same port
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: wake hung handlers and cut every open connection."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def die(self) -> None:
        """Stop serving from inside a request (the "die" fault): on a thread of its own,
        since stop() waits for the handlers, this one included."""
        threading.Thread(target=self.stop, name="scripted-server-dies", daemon=True).start()

    def restart(self) -> ScriptedServer:
        """Stop (cutting open connections) and serve again on the same port; the script
        and the statistics are kept."""
        self.stop()
        return self.start()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the scripted server is not running (use it as a context manager or call start())")
        return self._httpd.server_address[1]

    @property
    def clock_origin(self) -> float:
        """The `time.monotonic()` value the log's t_start and t_end count from, so that a
        caller can place requests on its own clock (e.g. the time from a client's start to
        its first request)."""
        return self._t0

    @property
    def base_url(self) -> str:
        """Where the `openai` client should point: http://127.0.0.1:PORT/v1."""
        return f"http://{self._host}:{self.port}/v1"

    # -- control --------------------------------------------------------------------

    def set_script(self, script: Mapping[str, Any] | Script, *, reply: ReplyFn | None = None) -> None:
        """Replace the script (rule counters start afresh); statistics are kept."""
        parsed = script if isinstance(script, Script) else Script.parse(script, reply)
        if reply is not None:
            parsed.reply_fn = reply
        with self._lock:
            self.script = parsed

    def reset_stats(self) -> None:
        """Zero the statistics and the fault rules' counts."""
        with self._lock:
            in_flight = self._stats["in_flight"]
            self._stats = _new_stats()
            self._stats["in_flight"] = in_flight
            self.script = Script.parse(self.script.raw, self.script.reply_fn)

    def stats(self, log: bool = True) -> dict[str, Any]:
        """A JSON-ready snapshot of the counters (see the module docstring)."""
        with self._lock:
            s = {k: (dict(v) if isinstance(v, Counter) else v) for k, v in self._stats.items()}
            s["requests"] = copy.deepcopy(self._stats["requests"]) if log else []
        s["duplicates"] = sum(n - 1 for n in s["answered"].values() if n > 1)
        return s

    # -- bookkeeping called by the handler -----------------------------------------------

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)
            self._stats["connections"] += add  # opened: a client that keeps them alive opens few

    def _count_other(self, what: str) -> None:
        with self._lock:
            self._stats["other"][what] += 1

    def _count_bad_request(self, auth: str) -> None:
        with self._lock:
            st = self._stats
            st["total"] += 1
            st["auth"][auth] += 1
            st["by_status"]["400"] += 1
            st["by_outcome"]["400"] += 1

    def _begin(self, p: Parsed, auth: str, body: Mapping[str, Any]) -> _Plan:
        with self._lock:
            script, st = self.script, self._stats
            self._seq += 1
            st["total"] += 1
            st["in_flight"] += 1
            st["max_in_flight"] = max(st["max_in_flight"], st["in_flight"])
            st["by_question"][p.question[:200]] += 1
            st["by_prompt"][p.prompt_hash] += 1
            st["by_request"][p.request_hash] += 1
            st["models"][p.model] += 1
            st["auth"][auth] += 1
            st["images"]["with" if p.images else "without"] += 1
            st["images"]["total"] += len(p.images)
            rule: _Rule | None = None
            if script.require_auth and auth == "absent":
                rule = _Rule.parse({"fault": "status", "status": 401, "message": "no Authorization header"}, -1, 0)
            elif script.models is not None and p.model not in script.models:
                rule = _Rule.parse({"fault": "status", "status": 404, "code": "model_not_found",
                                    "message": f"The model `{p.model}` does not exist"} if script.pinned is None
                                   else {"fault": "status", "status": script.pinned, "style": "fastapi",
                                         "message": f"Server is pinned to {script.models[0]!r}"}, -1, 0)
            else:
                for r in script.rules:
                    if r.fires(p.question, p.prompt, p.request_hash):
                        rule = r
                        break
            if rule is not None:
                st["by_fault"][rule.fault if rule.fault != "status" else f"status:{rule.spec['status']}"] += 1
            entry = {"seq": self._seq, "t_start": round(time.monotonic() - self._t0, 6), "t_end": None,
                     "model": p.model, "question": p.question[:200], "prompt_hash": p.prompt_hash,
                     "request_hash": p.request_hash, "images": p.images, "auth": auth,
                     "params": p.params, "outcome": None, "status": None}
            if len(st["requests"]) < script.log_limit:
                st["requests"].append(entry)
            plan = _Plan(seq=self._seq, entry=entry, rule=rule, latency=script.latency_for(p.question, p.prompt),
                         reply="", request_hash=p.request_hash)
        # Outside the lock: an in-process reply callable may take its time (or call stats()).
        if rule is None or rule.fault in REPLYING_FAULTS:
            plan.reply = script.reply(p.question, p.prompt, body)
        return plan

    def _end(self, plan: _Plan, outcome: str, status: int | None) -> None:
        """Record how a request ended (once; later calls for the same plan do nothing)."""
        with self._lock:
            if plan.ended:
                return
            plan.ended = True
            st = self._stats
            st["in_flight"] -= 1
            st["by_outcome"][outcome] += 1
            if status is not None:
                st["by_status"][str(status)] += 1
            if outcome == "200":
                st["answered"][plan.request_hash] += 1
            plan.entry.update(t_end=round(time.monotonic() - self._t0, 6), outcome=outcome, status=status)


# ---------------------------------------------------------------------------- a separate process


class ServerProcess:
    """`python -m medrcube.testing.server` in a child process, for kill and restart tests.

    `restart()` comes back on the same port, so a client keeps its base URL across it.
    `stats()` and `reset_stats()` go over HTTP (`/_stats`, `/_reset`).
    """

    def __init__(self, script: Mapping[str, Any] | None = None, *, port: int = 0,
                 script_path: str | None = None, startup_timeout: float = 30.0) -> None:
        import os
        import tempfile

        self._script = Script.parse(script).raw  # fail here, with the key named, not in the child
        if script_path is None:
            fd, script_path = tempfile.mkstemp(prefix="medrcube-script-", suffix=".json")
            os.close(fd)
            self._own_file = True
        else:
            self._own_file = False
        with open(script_path, "w", encoding="utf-8") as fh:
            json.dump(self._script, fh)
        self.script_path = script_path
        self._port = port
        self._startup_timeout = startup_timeout
        self.proc: Any = None
        self.base_url = ""

    def start(self) -> ServerProcess:
        import subprocess

        cmd = [sys.executable, "-m", "medrcube.testing.server", "--script", self.script_path,
               "--port", str(self._port)]
        deadline = time.monotonic() + self._startup_timeout
        while True:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = self.proc.stdout.readline().strip()
            if line.startswith("http://"):
                break
            err = self.proc.stderr.read() if self.proc.wait(timeout=10) is not None else ""
            # On restart the old socket may linger for a moment: retry the same port briefly.
            if "Address already in use" not in err or time.monotonic() > deadline:
                raise RuntimeError(f"the scripted server process did not start: {err.strip() or line}")
            time.sleep(0.1)
        self.base_url = line
        self._port = int(urlsplit(line).port or 0)
        return self

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def _control(self, method: str, path: str) -> dict[str, Any]:
        import urllib.request

        root = self.base_url.rsplit("/v1", 1)[0]
        req = urllib.request.Request(root + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as resp:
            doc = json.loads(resp.read())
        if not isinstance(doc, dict):
            raise RuntimeError(f"{root + path}: the scripted server answered {type(doc).__name__}; expected a JSON object")
        return doc

    def stats(self, log: bool = True) -> dict[str, Any]:
        return self._control("GET", "/_stats" if log else "/_stats?log=0")

    def reset_stats(self) -> None:
        self._control("POST", "/_reset")

    def kill(self) -> None:
        """SIGKILL: no goodbye to open connections (their clients see them dropped)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(timeout=10)
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream:
                    stream.close()

    def restart(self) -> ServerProcess:
        """Kill and start again on the same port (statistics start from zero)."""
        self.kill()
        return self.start()

    def close(self) -> None:
        import os

        self.kill()
        if self._own_file:
            try:
                os.unlink(self.script_path)
            except OSError:
                pass

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------- CLI


def serve_main(argv: list[str] | None = None) -> int:
    """`python -m medrcube.testing.server`: print the base URL, serve until killed."""
    ap = argparse.ArgumentParser(prog="python -m medrcube.testing.server", description=__doc__.split("\n")[0])
    ap.add_argument("--script", help="a JSON script file (see the module docstring); default: reply 'A'")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 (the default) picks a free port")
    args = ap.parse_args(argv)
    script: dict[str, Any] = {}
    if args.script:
        try:
            with open(args.script, encoding="utf-8") as fh:
                script = json.load(fh)
        except (OSError, ValueError) as exc:
            print(f"{args.script}: cannot read the script: {exc}", file=sys.stderr)
            return 2
    try:
        server = ScriptedServer(script, host=args.host, port=args.port).start()
    except ScriptError as exc:
        print(f"{args.script}: {exc}", file=sys.stderr)
        return 2
    print(server.base_url, flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()
    return 0

