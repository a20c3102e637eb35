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
