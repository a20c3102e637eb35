"""Scenario 10: the clustered interval of a per-finding sensitivity holds its level when
items share an image (issue 16).

A simulated cell: 80 images whose item counts are skewed as in a real cube (1, 1, 1, 2,
3 or 10 items, equally likely), every item a positive for the finding, detected with
true sensitivity 0.70. With `shared` = s each item, with probability s, takes its image's
one draw instead of its own (a subtle finding is missed on every question about that
image): the marginal sensitivity stays 0.70 but items of an image are correlated.
Over 2,000 seeded cells, how often the 95% interval contains 0.70, and its mean width,
for three intervals:

- plain Wilson on the items (ignores the images);
- Wilson on n / deff with Kish's deff = 1 + (m - 1) rho and the plain mean size m = n/K
  (metrics.clustered, the accuracy checks' interval at the time of writing);
- the same with the size-weighted mean m = sum m_i^2 / n (metrics.findings), the
  correction for unequal cluster sizes, with the image-count fallback when rho cannot
  be estimated.

Target: >= 93% coverage for the size-weighted design effect, clustered or not (and no
wider than needed when items are independent). Pure computation in this process.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.context import Context
from benchmarks.harness import Metric, Target

NAME = "findings"
TITLE = "11. Per-finding sensitivity: the image-clustered interval keeps its coverage"
TRUE_SE = 0.70
IMAGES = 80
SIZES = (1, 1, 1, 2, 3, 10)


def _coverage(shared: float, runs: int, seed: int = 0) -> dict[str, tuple[float, float]]:
    from medrcube.metrics.accuracy import wilson_interval
    from medrcube.metrics.clustered import clustered_wilson
    from medrcube.metrics.findings import kish_proportion

    rng = np.random.default_rng(seed)
    hits = {"wilson": 0, "mean_m": 0, "kish": 0}
    width = {"wilson": 0.0, "mean_m": 0.0, "kish": 0.0}
    for _ in range(runs):
        sizes = rng.choice(SIZES, size=IMAGES)
        image_draw = rng.random(IMAGES)
        clusters = []
        for i, m in enumerate(sizes):
            draw = np.where(rng.random(m) < shared, image_draw[i], rng.random(m))
            clusters.append((int((draw < TRUE_SE).sum()), int(m)))
        k, n = sum(c for c, _ in clusters), sum(m for _, m in clusters)
        mean_m = clustered_wilson(clusters)
        kish = kish_proportion(clusters)
        for name, (lo, hi) in (("wilson", wilson_interval(k, n)), ("mean_m", (mean_m.lo, mean_m.hi)),
                               ("kish", (kish.lo, kish.hi))):
            hits[name] += lo <= TRUE_SE <= hi
            width[name] += hi - lo
    return {k: (100 * hits[k] / runs, width[k] / runs) for k in hits}


def run(ctx: Context) -> list[Metric]:
    runs = 200 if ctx.profile == "quick" else 2000
    judge = ctx.sizes.judge_targets
    t0 = time.perf_counter()
    metrics: list[Metric] = []
    labels = {"wilson": "plain Wilson (items independent)", "mean_m": "Kish deff, mean cluster size n/K",
              "kish": "Kish deff, size-weighted sum m^2/n (metrics.findings)"}
    for shared in (0.0, 0.7):
        r = _coverage(shared, runs)
        ctx.log(f"findings: shared={shared}: {r}")
        head = f"{'independent items' if shared == 0 else f'{shared:.0%} of items share their image draw'}"
        for name in ("wilson", "mean_m", "kish"):
            cov, w = r[name]
            target = Target(">", 93.0, ">= 93 %") if judge and name == "kish" else None
            metrics.append(Metric(f"findings.shared{int(100 * shared)}.{name}.coverage",
                                  f"{head}: 95% interval of sensitivity holds 0.70, {labels[name]}", "%", [cov],
                                  target, note=f"mean width {w:.3f}; {runs} cells of {IMAGES} images"))
    metrics.append(Metric("findings.wall_s", "wall time of the scenario", "s", [time.perf_counter() - t0]))
    return metrics
