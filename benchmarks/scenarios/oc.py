"""Scenario 8: operating characteristics of the gate's decisions (benchmarks/oc.py).

By repeated simulated runs through the gate's real decision core: the false-QUALIFIED
rate for a model at one bound, the false-NOT-QUALIFIED rate for models at and above
every bound, power at the margin, the regression checks' family-wise false-fail rate
for a candidate equal to its baseline, and the one- and two-sided coverage of the
clustered interval over a grid (unequal cluster sizes, few images, degenerate ICC).
A target is the stated level plus (or minus) two Monte Carlo standard errors.
"""

from __future__ import annotations

from benchmarks import oc
from benchmarks.context import Context
from benchmarks.harness import Metric, Target

NAME = "oc"
TITLE = "9. Operating characteristics of the gate (simulated models, repeated runs)"


def run(ctx: Context) -> list[Metric]:
    reps = 40 if ctx.profile == "quick" else 200
    metrics = []
    for r in oc.run(reps=reps, seed=1):
        target = None
        if r["level"] is not None:
            slack = 2 * r["mc_se"]
            if r["op"] == "<=":
                target = Target("<", r["level"] + slack + 1e-12, f"<= {r['level']:g} (+2 MC s.e.)")
            else:
                target = Target(">", r["level"] - slack - 1e-12, f">= {r['level']:g} (-2 MC s.e.)")
        metrics.append(Metric(r["id"], r["label"], "rate", [r["value"]], target,
                              note=f"{r['reps']} simulated runs; Monte Carlo s.e. {r['mc_se']:.3f}"))
    return metrics
