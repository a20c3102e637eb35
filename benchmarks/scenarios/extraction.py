"""Scenario 6: answer extraction speed (responses per second) on a long mixed corpus
(benchmarks/corpus.py), in its own process, warm-up pass not counted. Agreement with the
corpus's expected choices is shown as a sanity figure (not a target)."""

from __future__ import annotations

import json

from benchmarks.context import Context
from benchmarks.harness import Metric, python, run_proc

NAME = "extraction"
TITLE = "6. Answer extraction"


def run(ctx: Context) -> list[Metric]:
    out = ctx.dir("extraction")
    n = ctx.sizes.corpus
    p = run_proc([python(), "-m", "benchmarks.extract_client", "--n", str(n), "--repeat", str(ctx.repeats("short"))],
                 log_dir=out, name="extract")
    r = json.loads(p.text())
    mix = ", ".join(f"{k} {v['n'] / r['n']:.0%}" for k, v in r["by_kind"].items())
    ctx.log(f"extraction: agreement {r['agreement']:.2%}, how: {r['how']}")
    return [
        Metric("extraction.rps", f"`extract` over {r['n']:,} mixed responses (mean {r['mean_chars']:.0f} chars)",
               "resp/s", r["rates"], note=f"mix: {mix}", extra={"how": r["how"]}),
        Metric("extraction.us_per_response", "  time per response", "µs", [1e6 / x for x in r["rates"]]),
        Metric("extraction.agreement", "  agreement with the corpus's expected choice", "%", [100 * r["agreement"]],
               extra={"by_kind": r["by_kind"]}),
    ]
