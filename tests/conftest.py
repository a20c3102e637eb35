"""Shared fixtures of the project's own tests.

- `scripted_server`: a running in-process `ScriptedServer` (medrcube.testing.server) with
  the default script (every answer "A"); call `.set_script({...})` to script it. Point the
  `openai` client or an adapter at `scripted_server.base_url` (ends in /v1).
- `scripted_server_factory(script=None, *, reply=None)`: start more in-process servers;
  each is stopped at the end of the test.
- `scripted_server_process(script=None, *, port=0)`: a `ServerProcess`, the server in a
  child process (`.base_url`, `.stats()`, `.reset_stats()`, `.kill()` (SIGKILL),
  `.restart()` on the same port, `.pid`); killed at the end of the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from medrcube.testing.server import ScriptedServer, ServerProcess


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def scripted_server_factory() -> Iterator[Callable[..., ScriptedServer]]:
    started: list[ScriptedServer] = []

    def make(script: Mapping[str, Any] | None = None, *, reply: Callable[..., Any] | None = None) -> ScriptedServer:
        server = ScriptedServer(script, reply=reply).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def scripted_server_process() -> Iterator[Callable[..., ServerProcess]]:
    started: list[ServerProcess] = []

    def make(script: Mapping[str, Any] | None = None, *, port: int = 0) -> ServerProcess:
        proc = ServerProcess(script, port=port).start()
        started.append(proc)
        return proc

    yield make
    for proc in started:
        proc.close()
