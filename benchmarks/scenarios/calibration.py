"""Scenario 9: calibration error recovers the truth, and the calibration check separates
a calibrated scorer from an overconfident one (issue 16).

The simulated scorers of `medrcube.testing.calibrated`: a confidence c ~ U[0.3, 1], the
answer right with probability c (calibrated: true calibration error 0) or c - 0.15
(overconfident: true ECE = true CE = 0.15 at any binning); 1 to 3 items per image. Each
of R repeated runs draws fresh records (seeded), computes `metrics.calibration` (10
equal-mass bins, a cluster bootstrap over images) and the check "calibration error at
most 0.10" (the gate's calibration check). Figures, per scorer and cube size n:

- the mean of the reported ECE and of the debiased CE over the runs (the truth: 0, 0.15);
- how often the 95% interval contains the truth (ECE's and CE's), target >= 90% for CE;
- how often the check passes, fails, is undecided; targets: the calibrated scorer never
  fails and the overconfident one never passes (a wrong-direction verdict), and at
  n = 2,000 each is decided the right way in >= 90% of runs.

Selective prediction on the calibrated scorer, whose truths follow from c ~ U[0.3, 1]:
accuracy of the most confident half 0.825, coverage at risk 0.20 4/7, AURC 0.175; how
often the intervals of metrics.selective hold the first two, and the mean AURC.

Pure computation in this process (no model, no server): the figures are deterministic
for the seeds used.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.context import Context
from benchmarks.harness import Metric, Target

NAME = "calibration"
TITLE = "10. Calibration: ECE recovers the truth, the check separates calibrated from overconfident"
BOUND = 0.10
SIZES = (500, 2000)


def _one(gap: float, n: int, runs: int, n_boot: int) -> dict[str, float]:
    from medrcube.gate.checks import Check, CheckKind
    from medrcube.gate.evaluate import evaluate
    from medrcube.metrics.calibration import calibration, scored
    from medrcube.testing.calibrated import SimulatedScorer

    # The gate's own calibration check decides (gate/evidence_clinical.py).
    check = Check(id="calibration/overall", kind=CheckKind.CALIBRATION, metric="calibration_ce", part=None,
                  modality=None, task=None, bound=BOUND, rule="lower_bound", confidence=0.95, min_n=1,
                  max_error_rate=0.05, params={"statistic": "ce", "n_bins": 10, "n_boot": n_boot})

    sim = SimulatedScorer(gap=gap)
    ece, ce, cov_ece, cov_ce = [], [], [], []
    outcomes = {"pass": 0, "fail": 0, "undecided": 0}
    for seed in range(runs):
        records = sim.records(n, seed)
        cal = calibration(scored(records), n_boot=n_boot, seed=seed)
        assert cal.ece is not None and cal.ce is not None
        ece.append(cal.ece)
        ce.append(cal.ce)
        cov_ece.append(cal.ece_ci95[0] <= gap <= cal.ece_ci95[1])
        cov_ce.append(cal.ce_ci95[0] <= gap <= cal.ce_ci95[1])
        status = evaluate(check, records).status.value
        outcomes[status] = outcomes.get(status, 0) + 1
    return {"ece": float(np.mean(ece)), "ece_sd": float(np.std(ece)), "ce": float(np.mean(ce)),
            "ce_sd": float(np.std(ce)), "cov_ece": 100 * float(np.mean(cov_ece)),
            "cov_ce": 100 * float(np.mean(cov_ce)), **{k: 100 * v / runs for k, v in outcomes.items()}}


def run(ctx: Context) -> list[Metric]:
    quick = ctx.profile == "quick"
    runs, n_boot = (10, 100) if quick else (200, 400)
    judge = ctx.sizes.judge_targets
    metrics: list[Metric] = []
    t0 = time.perf_counter()
    for name, gap in (("calibrated", 0.0), ("overconfident", 0.15)):
        for n in SIZES:
            r = _one(gap, n, runs, n_boot)
            ctx.log(f"calibration: {name} n={n}: {r}")
            key = f"calibration.{name}.n{n}"
            head = f"{name} (true CE {gap:.2f}), n = {n}, {runs} runs"
            right, wrong = ("pass", "fail") if gap < BOUND else ("fail", "pass")
            metrics += [
                Metric(f"{key}.ece_mean", f"{head}: mean ECE", "", [r["ece"]],
                       note=f"sd over runs {r['ece_sd']:.4f}; ECE is biased upward on finite samples"),
                Metric(f"{key}.ce_mean", "  mean debiased CE", "", [r["ce"]], note=f"sd over runs {r['ce_sd']:.4f}"),
                Metric(f"{key}.ece_coverage", "  95% interval of ECE contains the truth", "%", [r["cov_ece"]]),
                Metric(f"{key}.ce_coverage", "  95% interval of CE contains the truth", "%", [r["cov_ce"]],
                       Target(">", 90.0, ">= 90 %") if judge else None),
                Metric(f"{key}.check_{wrong}", f"  check CE <= {BOUND:.2f}: {wrong} (wrong direction)", "%",
                       [r[wrong]], Target("<", 1.0, "0 %") if judge else None),
                Metric(f"{key}.check_{right}", f"  check CE <= {BOUND:.2f}: {right} (right direction)", "%",
                       [r[right]], Target(">", 90.0, ">= 90 %") if judge and n >= 2000 else None),
                Metric(f"{key}.check_undecided", "  check: undecided", "%", [r["undecided"]]),
            ]
    metrics += _clustered(ctx, 50 if quick else 200, n_boot)
    metrics += _selective(ctx, 20 if quick else 200, n_boot)
    metrics.append(Metric("calibration.wall_s", "wall time of the scenario (all runs, bootstrap included)", "s",
                          [time.perf_counter() - t0], note=f"{n_boot} bootstrap replicates per run"))
    return metrics


def _clustered(ctx: Context, runs: int, n_boot: int) -> list[Metric]:
    """Items that share an image (up to 6, 80% sharing one correctness draw): the cluster
    bootstrap keeps CE's coverage; an item bootstrap (every record its own cluster) does not."""
    import dataclasses

    from medrcube.metrics.calibration import calibration, scored
    from medrcube.testing.calibrated import SimulatedScorer

    out: list[Metric] = []
    for name, gap in (("calibrated", 0.0), ("overconfident", 0.15)):
        sim = SimulatedScorer(gap=gap, shared=0.8)
        by_cluster, by_item = [], []
        for seed in range(runs):
            s = scored(sim.records(2000, seed, max_per_image=6))
            a = calibration(s, n_boot=n_boot, seed=seed)
            b = calibration(dataclasses.replace(s, cluster=np.arange(s.n)), n_boot=n_boot, seed=seed)
            by_cluster.append(a.ce_ci95[0] <= gap <= a.ce_ci95[1])
            by_item.append(b.ce_ci95[0] <= gap <= b.ce_ci95[1])
        ctx.log(f"calibration: clustered {name}: cluster {np.mean(by_cluster):.3f}, item {np.mean(by_item):.3f}")
        key = f"calibration.clustered.{name}"
        out += [
            Metric(f"{key}.ce_coverage_cluster_bootstrap",
                   f"{name}, clustered items (<= 6 per image, 80% share a draw), n = 2000, {runs} runs: "
                   "CE interval holds the truth, cluster bootstrap over images", "%", [100 * float(np.mean(by_cluster))],
                   Target(">", 90.0, ">= 90 %") if ctx.sizes.judge_targets else None),
            Metric(f"{key}.ce_coverage_item_bootstrap", "  the same with an item bootstrap (images ignored)", "%",
                   [100 * float(np.mean(by_item))]),
        ]
    return out


def _selective(ctx: Context, runs: int, n_boot: int) -> list[Metric]:
    """The calibrated scorer's risk-coverage readings against their closed-form truths."""
    from medrcube.metrics.selective import accuracy_at_coverage, aurc, coverage_at_risk, ranked
    from medrcube.testing.calibrated import CALIBRATED

    acc_hits, cov_hits, areas = [], [], []
    for seed in range(runs):
        r = ranked(CALIBRATED.records(2000, seed))
        p = accuracy_at_coverage(r, 0.5)
        acc_hits.append(p.lo <= 0.825 <= p.hi)
        c = coverage_at_risk(r, 0.2, n_boot=n_boot, seed=seed)
        cov_hits.append(c["ci95"][0] <= 4 / 7 <= c["ci95"][1])
        areas.append(aurc(r.correct) or 0.0)
    judge = ctx.sizes.judge_targets
    head = f"selective prediction, calibrated scorer, n = 2000, {runs} runs"
    return [
        Metric("calibration.selective.acc_at_50_coverage", f"{head}: interval of accuracy at coverage 0.5 holds 0.825",
               "%", [100 * float(np.mean(acc_hits))], Target(">", 90.0, ">= 90 %") if judge else None),
        Metric("calibration.selective.coverage_at_risk_20", "  interval of coverage at risk 0.20 holds 4/7", "%",
               [100 * float(np.mean(cov_hits))], Target(">", 90.0, ">= 90 %") if judge else None),
        Metric("calibration.selective.aurc_mean", "  mean AURC (truth 0.175)", "", [float(np.mean(areas))],
               note=f"sd over runs {float(np.std(areas)):.4f}"),
    ]
