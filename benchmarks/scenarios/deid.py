"""Scenario 8: burned-in text detection by the build's OCR screen (benchmarks/deid_ocr.py),
in its own process, at every frame size from 512 to 4,096 px: line recall, lines still
readable after masking, false-mask rate on frames without text, CPU seconds per frame.
One run: the frames are generated from a seed, so the figures are deterministic but for
the times."""

from __future__ import annotations

import json

from benchmarks.context import Context
from benchmarks.harness import Metric, Target, python, run_proc

NAME = "deid"
TITLE = "8. Burned-in text (OCR screen of medrcube build)"


def run(ctx: Context) -> list[Metric]:
    out = ctx.dir("deid")
    full = ctx.profile == "full"
    args = ["--n", "30", "--no-text", "15"] if full else ["--n", "1", "--sides", "512,2048"]
    run_proc([python(), "-m", "benchmarks.deid_ocr", *args, "--json", str(out / "deid.json")], log_dir=out, name="deid", timeout=3600.0)
    r = json.loads((out / "deid.json").read_text(encoding="utf-8"))
    judge = ctx.sizes.judge_targets
    sides = r["by_side"]
    worst = min(v["recall"] for v in sides.values() if v["recall"] is not None)
    return [
        Metric("deid.recall", f"line recall, every glyph masked ({r['lines']} lines on {r['frames_with_text']} frames)", "%",
               [100 * r["recall"]], Target(">", 98.999, ">= 99 %") if judge else None, extra={"by": r["by"]}),
        Metric("deid.recall_worst_size", "  line recall at the worst frame size", "%", [100 * worst],
               Target(">", 98.999, ">= 99 %") if judge else None, extra={"by_side": {k: v["recall"] for k, v in sides.items()}}),
        Metric("deid.readable", "  lines still readable after masking (the recogniser on each line's own box of an exported frame)", "lines",
               [r["readable_after"]], Target("<", 0.5, "0") if judge else None),
        Metric("deid.false_mask", f"false-mask rate ({r['frames_without_text']} frames without text)", "%",
               [100 * r["false_mask_rate"]], Target("<", 5.001, "<= 5 %") if judge else None),
        Metric("deid.cpu_per_frame_4096", "  CPU seconds per 4,096 px frame (median)", "s",
               [sides["4096"]["cpu_seconds_median"]] if "4096" in sides else [r["cpu_seconds_max_median"]],
               Target("<", 5.0, "<= 5 s") if judge and "4096" in sides else None),
    ]  # fmt: skip
