"""The benchmark scenarios, in the order they run. Each module has `NAME`, `TITLE` and
`run(ctx) -> list[Metric]`; a scenario raises BenchError when a run fails or a check of
its output (every request answered once, zero model calls when warm ...) does not hold."""

from __future__ import annotations

from benchmarks.scenarios import (
    calibration,
    deid,
    extraction,
    findings,
    leaderboard,
    load,
    memory,
    oc,
    parallel,
    qualify,
    throughput,
)

SCENARIOS = (load, qualify, throughput, parallel, memory, extraction, leaderboard, deid, oc, calibration, findings)
