"""What every scenario gets: the cube, sizes, repetition counts, a scratch folder, a log.

Two profiles: `full` (the figures of RESULTS.md: the release-size cube, 2,000-request
throughput runs) and `quick` (a small cube and short runs, to check in a minute that
every scenario still works; its figures mean nothing and targets are not judged).
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT


@dataclass(frozen=True)
class Sizes:
    cube: dict[str, Any]  # generate_release_cube parameters (benchmarks/cubes.py FULL when empty)
    throughput_items: int  # requests per throughput run (items with images)
    memory_points: tuple[int, ...]  # cube sizes of the memory curve (the last: every item)
    latency_s: float  # the scripted server's fixed latency
    slow_s: float  # the latency of the few slow requests (barrier run)
    slow_count: int
    corpus: int  # responses in the extraction corpus
    leaderboard_runs: int
    judge_targets: bool  # False in quick mode: figures of a toy cube prove nothing


FULL_SIZES = Sizes(cube={}, throughput_items=2000, memory_points=(2000, 4000, 7626), latency_s=0.2, slow_s=5.0,
                   slow_count=4, corpus=30000, leaderboard_runs=4, judge_targets=True)
QUICK_SIZES = Sizes(cube={"n_items": 600, "n_datasets": 12, "n_images": 240}, throughput_items=200,
                    memory_points=(200, 400, 600), latency_s=0.05, slow_s=0.5, slow_count=2, corpus=2000,
                    leaderboard_runs=4, judge_targets=False)


@dataclass
class Context:
    profile: str  # "full" or "quick"
    sizes: Sizes
    cube: Path  # the generated release-layout cube
    scratch: Path  # this invocation's scratch folder (under benchmarks/out/)
    repeat_override: int | None = None
    shared: dict[str, Any] = field(default_factory=dict)  # figures one scenario hands another
    t0: float = field(default_factory=time.perf_counter)

    def repeats(self, kind: str) -> int:
        """How many times to run: `long` runs (tens of seconds) 3, `short` ones 5."""
        if self.repeat_override is not None:
            return self.repeat_override
        if self.profile == "quick":
            return 1
        return {"long": 3, "pair": 2, "short": 5, "once": 1}[kind]

    def dir(self, *parts: str, fresh: bool = True) -> Path:
        """A scratch directory for one run (emptied first unless fresh=False)."""
        path = self.scratch.joinpath(*parts)
        if fresh and path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def log(self, message: str) -> None:
        elapsed = time.perf_counter() - self.t0
        print(f"[{elapsed:6.1f}s] {message}", file=sys.stderr, flush=True)


def scratch_root(profile: str) -> Path:
    return OUT / ("quick" if profile == "quick" else "run")
