"""Measuring child processes, and the figures a scenario reports.

`run_proc` starts a command in its own process group and reaps it with `os.wait4`, which
returns that child's own resource usage: CPU (user + system, its reaped descendants
included, e.g. xdist workers) and peak RSS (the largest single process among them; Linux
reports ru_maxrss in KiB). Wall time is `time.perf_counter` around start and reap.

A `Metric` is one reported figure: its value in every repetition, summarised as median,
min and max, with an optional target (`< 5 s`) that it meets or misses.
"""

from __future__ import annotations

import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent  # the project checkout
OUT = ROOT / "benchmarks" / "out"  # scratch (git-ignored)


class BenchError(RuntimeError):
    """A scenario could not produce its figure (a command failed, a check did not hold)."""


@dataclass
class Proc:
    """What one child process cost, and where its output went."""

    cmd: list[str]
    returncode: int
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_mib: float
    stdout: Path
    stderr: Path

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    def text(self) -> str:
        return self.stdout.read_text(encoding="utf-8", errors="replace")

    def tail(self, n: int = 25) -> str:
        out = self.stdout.read_text(errors="replace").splitlines()[-n:]
        err = self.stderr.read_text(errors="replace").splitlines()[-n:]
        return "\n".join(["--- stdout (tail)", *out, "--- stderr (tail)", *err])


def python() -> str:
    """The interpreter the benchmarks run under (the project's .venv via scripts/bench)."""
    return sys.executable


def bin_path(name: str) -> str:
    """A console script installed beside the interpreter (e.g. `medrcube`)."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def run_proc(
    cmd: Sequence[str],
    *,
    log_dir: Path,
    name: str,
    cwd: Path = ROOT,
    env: Mapping[str, str] | None = None,
    timeout: float = 300.0,
    check: bool = True,
    ok_codes: Sequence[int] = (0,),
    on_start: Callable[[int], None] | None = None,
) -> Proc:
    """Run `cmd` to completion and measure it (module docstring). Output goes to
    `log_dir/name.out|.err`; a non-zero code outside `ok_codes` raises BenchError.
    `on_start` is called with the child's pid once it is spawned."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    full_env = {**os.environ, **(env or {})}
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=full_env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        if on_start is not None:
            on_start(proc.pid)
        timer = threading.Timer(timeout, _kill_group, args=(proc.pid,))
        timer.start()
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait
    result = Proc(list(cmd), proc.returncode, wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss / 1024.0, out_path, err_path)
    if check and result.returncode not in ok_codes:
        shown = " ".join(str(c) for c in cmd)
        raise BenchError(f"`{shown}` exited with {result.returncode} (after {wall:.1f} s)\n{result.tail()}")
    return result


def _kill_group(pid: int) -> None:
    # The child leads its own session (start_new_session), so this reaches its
    # descendants (xdist workers) and nothing else.
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def pid_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) of process `pid` so far, from /proc
    (clock ticks, 10 ms); None where /proc cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu_s() -> float:
    """CPU seconds (user + system, all threads) of the calling process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def self_maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ------------------------------------------------------------------------------ figures


@dataclass(frozen=True)
class Target:
    """A bound on a figure's median: `value < bound` (op "<") or `value > bound` (op ">")."""

    op: str
    bound: float
    text: str = ""  # how README/issue phrase it, e.g. "< 5 s"

    def met(self, value: float) -> bool:
        return value < self.bound if self.op == "<" else value > self.bound

    def shown(self, unit: str) -> str:
        return self.text or f"{self.op} {fmt(self.bound)} {unit}".strip()


@dataclass
class Metric:
    """One reported figure over its repetitions."""

    id: str  # stable key in latest.json, e.g. "load.validate_cmd_s"
    label: str  # the table's row label
    unit: str
    runs: list[float]
    target: Target | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return float(statistics.median(self.runs))

    @property
    def status(self) -> str:
        if self.target is None:
            return "info"
        return "ok" if self.target.met(self.median) else "MISS"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "unit": self.unit,
            "n": len(self.runs),
            "median": round(self.median, 6),
            "min": round(min(self.runs), 6),
            "max": round(max(self.runs), 6),
            "runs": [round(r, 6) for r in self.runs],
            "target": None if self.target is None else {"op": self.target.op, "bound": self.target.bound,
                                                         "text": self.target.shown(self.unit)},
            "status": self.status,
            "note": self.note,
            **({"extra": self.extra} if self.extra else {}),
        }


def fmt(x: float) -> str:
    """A figure with as many digits as it deserves."""
    if x != x:  # NaN
        return "nan"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def repeat(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """`fn(i)` for i in 0..n-1, in order (a loop with a name, for scenario code)."""
    return [fn(i) for i in range(n)]
