"""The live progress line of gate inference: asked, cached, errors, rate, ETA.

pytest captures the output of a test (inference runs inside the first `verdict` fixture),
so the line is written around the capture, as pytest's live logging is: through the
terminal writer with the capture manager's `global_and_fixture_disabled()`. Under
pytest-xdist the workers cannot write to the terminal: each one writes its counts to a
small JSON file, and a thread of the controller adds them up into one line.

Shown when the terminal is interactive, redrawn in place; when asked in a log
(`--medrcube-progress=yes`, not a terminal), one full line every LOG_INTERVAL_S and one at
the end, so that a CI log shows a run that is moving (or not); quiet in CI logs by default
(`auto`), never with `no`.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from medrcube.run.progress import Progress
from medrcube.tally import CATEGORIES

WORKERINPUT_KEY = "medrcube_progress_dir"
INTERVAL_S = 0.5
LOG_INTERVAL_S = 10.0  # a line in a log (not a terminal): steady, and few enough to read


class LogPace:
    """When a log (not a terminal) gets its next line: every LOG_INTERVAL_S, and the last."""

    def __init__(self) -> None:
        self._last = time.monotonic()

    def due(self, final: bool) -> bool:
        now = time.monotonic()
        if final or now - self._last >= LOG_INTERVAL_S:
            self._last = now
            return True
        return False


def wanted(config: pytest.Config) -> bool:
    choice = config.option.medrcube_progress or "auto"
    if choice == "no":
        return False
    if choice == "yes":
        return True
    tr = config.pluginmanager.get_plugin("terminalreporter")
    return bool(tr is not None and tr.isatty and not os.environ.get("CI"))


def line(counts: Mapping[str, Any], elapsed: float) -> str:
    """`medrcube: 120/300 done (answered 78, cached 40, failed 2), 6.1/s, ETA 0:30`, in the
    tally's categories (medrcube/tally.py); `not asked` once the run stopped."""
    done, total = int(counts.get("done", 0)), int(counts.get("total", 0))
    by = {name: int(counts.get(name, 0)) for name in CATEGORIES}
    fresh = by["answered"] + by["failed"]
    rate = fresh / elapsed if elapsed > 0 else 0.0
    left = total - done
    eta = f"{int(left / rate) // 60}:{int(left / rate) % 60:02d}" if rate > 0 and left > 0 else "-"
    parts = f"answered {by['answered']}, cached {by['cached']}, failed {by['failed']}"
    parts += f", not asked {by['not_asked']} (the run stopped)" if by["not_asked"] else ""
    parts += f", unavailable {by['unavailable']}" if by["unavailable"] else ""
    return f"medrcube: {done}/{total} done ({parts}), {rate:.1f}/s, ETA {eta}"


class GateProgress(Progress):
    """The runner's Progress (run/progress.py), publishing its counts to a sink at most
    every INTERVAL_S. Only the first pass counts: a sharded worker's first pass is its
    share of the cube; the later passes (the whole cube from the store where the other
    workers' shards could not be exchanged, a baseline model) would only repeat it."""

    def __init__(self, sink: Callable[[dict[str, Any], bool], None]) -> None:
        super().__init__(total=0, enabled=False)
        self.sink = sink
        self.passes = 0
        self.started = time.monotonic()
        self._last = 0.0

    def begin(self, total: int) -> None:
        self.passes += 1
        if self.passes == 1:
            super().begin(total)
            self.started = time.monotonic()
            self._publish(force=True)

    def advance(self, n: int = 1, *, error: bool = False, cached: bool = False, stopped: bool = False,
                unavailable: bool = False) -> None:
        if self.passes <= 1:
            super().advance(n, error=error, cached=cached, stopped=stopped, unavailable=unavailable)
            self._publish()

    def close(self) -> None:
        if self.passes <= 1:
            self._publish(force=True, final=True)

    def note(self, message: str) -> None:
        """The runner's no-progress warning: a line of its own, terminal or log."""
        self.sink({**self.counts(), "note": message}, False)

    def counts(self) -> dict[str, Any]:
        return {"done": self.done, "total": self.total, **self.by, "elapsed": time.monotonic() - self.started}

    def _publish(self, force: bool = False, final: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last >= INTERVAL_S:
            self._last = now
            self.sink(self.counts(), final)


def terminal_sink(config: pytest.Config) -> Callable[[dict[str, Any], bool], None]:
    """Write the line on the terminal around pytest's capture (single process)."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    tty = bool(tr is not None and tr.isatty)
    pace = LogPace()

    def sink(counts: dict[str, Any], final: bool) -> None:
        if tr is None:
            return
        text = line(counts, counts.get("elapsed", 0.0))
        ctx = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
        with ctx:
            if counts.get("note"):
                tr.write_line(f"{chr(10) if tty else ''}medrcube: {counts['note']}")
            elif tty:
                tr.write("\r" + text.ljust(100) + ("\n" if final else ""), flush=True)
            elif pace.due(final):  # asked for in a log: a line every LOG_INTERVAL_S, and the last
                tr.write_line(text)

    return sink


def file_sink(directory: Path, worker: str) -> Callable[[dict[str, Any], bool], None]:
    """A worker's counts, as a JSON file the controller reads."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{worker}.json"

    def sink(counts: dict[str, Any], final: bool) -> None:
        tmp = path.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps({**counts, "final": final}), encoding="utf-8")
            os.replace(tmp, path)

    return sink


class ControllerLine:
    """The xdist controller's thread: adds up the workers' files into one line."""

    def __init__(self, config: pytest.Config, directory: Path) -> None:
        self.config = config
        self.directory = directory
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="medrcube-progress", daemon=True)
        self.shown = False
        self._pace = LogPace()
        self._noted: set[str] = set()  # the workers' notes already shown

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._draw(final=True)

    def _read(self) -> list[dict[str, Any]]:
        out = []
        for p in sorted(self.directory.glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                out.append(json.loads(p.read_text(encoding="utf-8")))
        return out

    def _draw(self, final: bool = False) -> None:
        states = self._read()
        if not states:
            return
        total = {k: sum(int(s.get(k, 0)) for s in states) for k in ("done", "total", *CATEGORIES)}
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        for note in (s["note"] for s in states if s.get("note") and s["note"] not in self._noted):
            self._noted.add(note)
            if tr is not None:
                tr.write("\nmedrcube: " + note + "\n", flush=True)
        elapsed = max(float(s.get("elapsed", 0.0)) for s in states)
        if tr is None:
            return
        text = line(total, elapsed)
        if tr.isatty:
            tr.write("\r" + text.ljust(100) + ("\n" if final else ""), flush=True)
        elif self._pace.due(final):  # a log: on lines of their own (xdist's "[100%]" ends no line)
            tr.write("\n" + text + "\n", flush=True)
        self.shown = True

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self._draw()  # a log's lines are paced in _draw


def interrupted_lines(config: pytest.Config, session: Any) -> list[str]:
    """What a run interrupted before its verdict (Ctrl-C) did, in the tally's categories
    (the live line's counts: the records themselves were never graded), and the command
    that resumes it: the answers are in the response store, and a rerun asks only the rest."""
    import shlex

    from medrcube.models.urls import redact_urls

    counts = session.progress.counts() if session is not None and isinstance(session.progress, GateProgress) else None
    args = " ".join(shlex.quote(a) for a in config.invocation_params.args)
    out = ["interrupted before the verdict: no check was decided, no run directory written"]
    if counts and counts.get("total"):
        done, total = int(counts["done"]), int(counts["total"])
        by = {name: int(counts.get(name, 0)) for name in CATEGORIES}
        out.append(f"{done}/{total} asks done before the interruption: answered {by['answered']}, "
                   f"cached {by['cached']}, failed {by['failed']}; {total - done} not asked")
    store = session.options.response_store if session is not None else None
    where = f" in the response store {store}" if store is not None else ""
    out.append(f"the answers got so far are kept{where}; the same command resumes, asking only what is missing:")
    out.append(redact_urls(f"  pytest {args}".rstrip()))
    return out
