"""What the HTTP handler (faults.py) needs of the server that owns it (process.py).

A module of its own so that the two meet here instead of importing each other: the
handler sees the server through `Owner`, a structural type that `ScriptedServer`
satisfies, and both share `_Plan`, the answer the server plans for one chat request.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from medrcube.testing.server.script import Parsed, ReplyFn, Script, _Rule


@dataclass
class _Plan:
    seq: int
    entry: dict[str, Any]
    rule: _Rule | None
    latency: float
    reply: str
    request_hash: str
    ended: bool = False


class Owner(Protocol):
    """The server as its handler calls it: the script, statistics and per-request bookkeeping."""

    script: Script
    _stopping: threading.Event
    _inference: threading.Lock  # the one inference thread of an "endless" server

    def die(self) -> None: ...

    def set_script(self, script: Mapping[str, Any] | Script, *, reply: ReplyFn | None = None) -> None: ...

    def reset_stats(self) -> None: ...

    def stats(self, log: bool = True) -> dict[str, Any]: ...

    def _track(self, conn: socket.socket, add: bool) -> None: ...

    def _count_other(self, what: str) -> None: ...

    def _count_bad_request(self, auth: str) -> None: ...

    def _begin(self, p: Parsed, auth: str, body: Mapping[str, Any]) -> _Plan: ...

    def _end(self, plan: _Plan, outcome: str, status: int | None) -> None: ...
