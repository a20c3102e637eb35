"""The processes of this machine as the tests look for them: each one's pid and command
line, read from /proc (Linux). Tests that start an engine use it to find the engine's
processes and to show that none outlives a run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def command_lines() -> Iterator[tuple[int, str]]:
    """(pid, command line with its arguments joined by spaces) of every process still
    readable; one that ends while it is read is left out."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        yield int(entry.name), cmd


def carrying(name: str, value: str) -> list[int]:
    """Pids of the processes (this one aside) whose environment holds `name=value`: a
    marker a test gives the process it starts, which every descendant inherits whatever its
    command line (an engine's spawned workers name no model). The environment read is the
    one each process started with."""
    import os

    needle = f"{name}={value}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            out.append(int(entry.name))
    return out
