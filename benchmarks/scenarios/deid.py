"""Scenario 8: burned-in text detection by the build's OCR screen (benchmarks/deid_ocr.py),
in its own process: line recall, lines still legible after masking, false-mask rate on
frames without text, seconds per frame. One run: the frames are generated from a seed,
so the figures are deterministic but for the times."""

from __future__ import annotations

import json

from benchmarks.context import Context
from benchmarks.harness import Metric, Target, python, run_proc

NAME = "deid"
TITLE = "8. Burned-in text (OCR screen of medrcube build)"


def run(ctx: Context) -> list[Metric]:
    out = ctx.dir("deid")
    n = 160 if ctx.profile == "full" else 12
    run_proc([python(), "-m", "benchmarks.deid_ocr", "--n", str(n), "--json", str(out / "deid.json")], log_dir=out, name="deid",
             timeout=1800.0)
    r = json.loads((out / "deid.json").read_text(encoding="utf-8"))
    judge = ctx.sizes.judge_targets
    return [
        Metric("deid.recall", f"line recall, every glyph masked ({r['lines']} lines on {r['frames_with_text']} frames)", "%",
               [100 * r["recall"]], Target(">", 90.0, "> 90 %") if judge else None, extra={"by": r["by"]}),
        Metric("deid.legible", "  lines still legible after masking (OCR reads 4+ characters back)", "%",
               [100 * r["legible_after_masking"]], Target("<", 2.0, "< 2 %") if judge else None),
        Metric("deid.false_mask", f"false-mask rate ({r['frames_without_text']} frames without text)", "%",
               [100 * r["false_mask_rate"]], Target("<", 5.0, "< 5 %") if judge else None),
        Metric("deid.seconds_per_frame", "  seconds per frame (wall, median)", "s", [r["seconds_per_frame"]]),
        Metric("deid.cpu_per_frame", "  CPU seconds per frame (median)", "s", [r["cpu_seconds_per_frame"]]),
    ]
