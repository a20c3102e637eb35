"""The scripted OpenAI-compatible server in its own process, as the throughput runs use it.

A thin layer over `medrcube.testing.server.ServerProcess` (the project's own): replace
the script between runs (`POST /_script`), zero the counters, read the counters and the
per-request log, and read the server's CPU time from /proc so that a figure of the
client's cost never includes the server's.
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

from medrcube.testing.server import ServerProcess

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class BenchServer:
    """`with BenchServer() as srv: srv.script({...}); ...; srv.stats()`."""

    def __init__(self) -> None:
        self._proc = ServerProcess({"default": "A"})

    def __enter__(self) -> BenchServer:
        self._proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._proc.close()

    @property
    def base_url(self) -> str:
        return self._proc.base_url

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        root = self.base_url.rsplit("/v1", 1)[0]
        data = json.dumps(body or {}).encode()
        req = urllib.request.Request(root + path, data=data, method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def script(self, script: dict[str, Any]) -> None:
        """Replace the script and zero the counters (one run's figures start from zero)."""
        self._post("/_script", script)
        self._proc.reset_stats()

    def stats(self, log: bool = False) -> dict[str, Any]:
        return self._proc.stats(log=log)

    def cpu_s(self) -> float | None:
        """The server process's CPU seconds so far (all threads), or None off Linux."""
        try:
            with open(f"/proc/{self.pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14, 15)


def span_s(stats: dict[str, Any]) -> float | None:
    """Seconds from the first request's arrival to the last one's end, from the server's
    log: the inference span of a run, whatever the client did before and after."""
    reqs = [r for r in stats.get("requests", []) if r.get("t_end") is not None]
    if not reqs:
        return None
    return max(r["t_end"] for r in reqs) - min(r["t_start"] for r in reqs)


def mean_in_flight(stats: dict[str, Any]) -> float | None:
    """Requests in flight at the server on average over the span (Little's law from the
    log): how many of the client's concurrency slots were actually busy."""
    reqs = [r for r in stats.get("requests", []) if r.get("t_end") is not None]
    span = span_s(stats)
    if not reqs or not span:
        return None
    return sum(r["t_end"] - r["t_start"] for r in reqs) / span


def each_once(stats: dict[str, Any]) -> tuple[int, int, int]:
    """(requests received, distinct requests answered, duplicate answers) at the server."""
    return int(stats["total"]), len(stats.get("answered", {})), int(stats.get("duplicates", 0))
