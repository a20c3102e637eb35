"""Coverage of the perturbation drop's interval and the non-inferiority decision, by simulation.

    .venv/bin/python -m benchmarks.robustness_coverage [--reps 2000] [--seed 0]

A simulated cube: K images with m items each. Image c has a clean accuracy u_c ~
Beta(4, 1.5) (items of one image are right or wrong together more often than chance:
the intra-image correlation the clustered interval is for). A perturbation "breaks" an
image with probability pi (then each right item turns wrong with probability 0.7),
otherwise it turns a right item wrong with probability 0.02; a wrong item turns right
with probability 0.02. So the lost answers come in clusters, as they do when a
perturbation defeats a model on some images and not others.

For each design it prints, for three 95% intervals of the drop, the coverage (the share
of replicates whose interval holds the true drop) and the upper miss (the share whose
upper bound is below the true drop: what makes a non-inferiority decision pass too
often; 2.5% is nominal): the one in use (Tango's score interval with the images' design
effect, metrics/perturbation.py), Tango's without the design effect, and Newcombe's
hybrid (method 10, as metrics/comparison.py uses for regression) without it. Then the
rate at which the decision passes a model whose true drop is exactly the margin.
"""

from __future__ import annotations

import argparse

import numpy as np

from medrcube.metrics.comparison import newcombe_paired_interval
from medrcube.metrics.perturbation import clustered_paired_interval, tango_interval

P_BREAK_LOSS, P_LOSS, P_GAIN = 0.7, 0.02, 0.02


def simulate(rng: np.random.Generator, k: int, m: int, pi: float) -> list[tuple[str, bool, bool]]:
    u = rng.beta(4.0, 1.5, size=k)
    broken = rng.random(k) < pi
    s = rng.random((k, m)) < u[:, None]
    loss = np.where(broken, P_BREAK_LOSS, P_LOSS)[:, None]
    r = rng.random((k, m))
    p = np.where(s, r >= loss, r < P_GAIN)
    return [(f"img{c}", bool(s[c, j]), bool(p[c, j])) for c in range(k) for j in range(m)]


def true_drop(pi: float) -> float:
    """E[s (lost)] - E[(1 - s) gained], with E[u] = 4 / 5.5 for Beta(4, 1.5)."""
    eu = 4.0 / 5.5
    return eu * (pi * P_BREAK_LOSS + (1 - pi) * P_LOSS) - (1 - eu) * P_GAIN


def pi_for_drop(drop: float) -> float:
    eu = 4.0 / 5.5
    return ((drop + (1 - eu) * P_GAIN) / eu - P_LOSS) / (P_BREAK_LOSS - P_LOSS)


def run(reps: int, seed: int) -> list[dict[str, float | str]]:
    rng = np.random.default_rng(seed)
    rows: list[dict[str, float | str]] = []
    margin = 0.05
    for k, m in ((250, 1), (100, 3), (50, 6), (30, 10)):
        for label, pi in (("drop 0.10", pi_for_drop(0.10)), ("drop = margin", pi_for_drop(margin))):
            truth = true_drop(pi)
            hits = {"clustered": [0, 0], "tango": [0, 0], "newcombe": [0, 0]}
            passed = 0
            deffs = []
            for _ in range(reps):
                d = clustered_paired_interval(simulate(rng, k, m, pi))
                deffs.append(d.deff)
                for name, (lo, hi) in (("clustered", (d.lo, d.hi)), ("tango", tango_interval(d.b, d.c, d.n)),
                                       ("newcombe", newcombe_paired_interval(d.a, d.b, d.c, d.d))):
                    hits[name][0] += lo <= truth <= hi
                    hits[name][1] += hi < truth
                passed += d.n > 0 and d.hi <= margin  # a pass claim: the drop's whole interval within the margin
            row: dict[str, float | str] = {"images": k, "items": m, "case": label, "truth": truth,
                                           "deff": float(np.median(deffs)), "pass": passed / reps}
            for name, (cov, up) in hits.items():
                row[name] = cov / reps
                row[name + "_up"] = up / reps
            rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = run(args.reps, args.seed)
    print(f"{args.reps} replicates per design, seed {args.seed}; 95% intervals (coverage / upper miss), margin 0.05")
    print("| images x items | case | true drop | median deff | clustered Tango (in use) | Tango | Newcombe | P(pass) |")
    print("|:--|:--|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        pass_rate = f"{r['pass']:.3f}" if "margin" in str(r["case"]) else "–"
        cells = " | ".join(f"{r[n]:.3f} / {r[n + '_up']:.3f}" for n in ("clustered", "tango", "newcombe"))
        print(f"| {r['images']} x {r['items']} | {r['case']} | {r['truth']:.3f} | {r['deff']:.2f} | {cells} "
              f"| {pass_rate} |")


if __name__ == "__main__":
    main()
