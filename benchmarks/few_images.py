"""One-sided error and power of the gate's intervals with few images (RESULTS.md section 13).

    .venv/bin/python -m benchmarks.few_images [--reps 2000] [--seed 0] [--json FILE] [--candidates]

Each replicate draws item outcomes 1{sqrt(icc) u_image + sqrt(1 - icc) e_item < Phi^-1(p)}
(marginal p, latent image correlation icc). Each check's bound is set at the true value;
a "false pass" is a pass claim there (p_pass <= 0.025: the lower confidence bound above
the true accuracy, or the upper bound of a drop below the true drop), a "false fail" the
mirror claim; both are one-sided errors whose nominal rate is 0.025, target at most 0.03.

Accuracy: the grid of 48 designs (5, 10, 20, 40 images x 2, 8 items per image x p 0.7,
0.9, 0.95 x ICC 0, 0.5), three designs of unequal or large images, and the power at 40
images x 8 items, p 0.9 against a bound of 0.8. The first 50 replicates of each design go
through the gate's own evidence code (gate.evidence.collect on GradedRecords), which
confirms the interval the gate chose and that the remaining replicates' direct
computation (metrics.clustered.clustered_wilson with the few-images ICC margin) is the
same statistic. Paired drops and sensitivity as before. `--candidates` compares the
intervals considered for few images on the grid, vectorised (numpy/scipy), to say why
the gate uses the one it does.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student

from medrcube.gate.checks import Check, CheckKind
from medrcube.gate.evidence import collect
from medrcube.metrics import finite
from medrcube.metrics.clustered import FEW_IMAGES_ICC_MARGIN, clustered_wilson
from medrcube.records import GradedRecord, Outcome

ALPHA = 0.025
FINDING = "pneumothorax"
GRID = tuple((k, m, p, icc) for k in (5, 10, 20, 40) for m in (2, 8) for p in (0.7, 0.9, 0.95) for icc in (0.0, 0.5))


def _record(i: int, image: int, ok: bool, variant: str = "standard", task: str = "Disease Diagnosis") -> GradedRecord:
    return GradedRecord(
        item_id=f"i{i}", dataset="b", task=task, modality="X-Ray", part="Chest", image=f"img{image}",
        image_digest=None, variant=variant, rotation=0, answer=0, n_options=2, prompt_hash="h",
        response="A" if ok else "B", extracted=0 if ok else 1, how="bare_letter",
        outcome=Outcome.CORRECT if ok else Outcome.WRONG, options=(FINDING, "normal"))


def _check(kind: CheckKind, bound: float, **params: Any) -> Check:
    variants = ("standard", "jpeg:30") if kind is CheckKind.ROBUSTNESS else ("standard",)
    return Check(id=f"bench/{kind.value}", kind=kind, metric="m", part=None, modality=None, task=None, bound=bound,
                 rule="lower_bound", confidence=0.95, min_n=1, max_error_rate=0.05, variants=variants,
                 params=dict(params))


def _outcomes(rng: np.random.Generator, images: np.ndarray, p: float, icc: float) -> np.ndarray:
    u = rng.standard_normal(images.max() + 1)
    latent = math.sqrt(icc) * u[images] + math.sqrt(1 - icc) * rng.standard_normal(len(images))
    return np.asarray(latent < norm.ppf(p))


# Replicates that go through the gate's full evidence code (records, collect); the rest
# compute the same statistic directly (which these replicates confirm).
FULL_PATH_REPS = 50

Direct = Callable[[list[float], list[int], float], tuple[float, float]]


def _proportion_direct(sums: list[float], sizes: list[int], b: float) -> tuple[float, float]:
    ci = clustered_wilson([(round(s), m) for s, m in zip(sums, sizes, strict=True)], 0.95,
                          icc_margin=FEW_IMAGES_ICC_MARGIN)
    return ci.p_at_most(b), ci.p_at_least(b)


def _drop_direct(sums: list[float], sizes: list[int], b: float) -> tuple[float, float]:
    # A drop's pass claim is "the drop is below the margin": the [0, 1] mean below b.
    return finite.p_at_least(sums, sizes, b), finite.p_at_most(sums, sizes, b)


def _rates(check: Check, reps: int, draw: Any, truth: float, direct: Direct) -> tuple[float, float, str]:
    """(pass rate, fail rate, method) of `check` over `reps` replicates of `draw()`, which
    gives (records, image sums, sizes) with the sums in [0, 1] units; `truth` is the bound
    in those units."""
    passes = fails = 0
    method = ""
    for rep in range(reps):
        records, sums, sizes = draw()
        if rep < FULL_PATH_REPS:
            ev = collect(check, records())
            c = ev.criteria[0]
            p_pass, p_fail, method = c.p_pass, c.p_fail, ev.method
            # The same statistic (its sums taken in another order: equal to rounding).
            same = direct(sums, sizes, truth)
            assert math.isclose(p_pass, same[0], rel_tol=1e-9, abs_tol=1e-12) and math.isclose(
                p_fail, same[1], rel_tol=1e-9, abs_tol=1e-12), ("the direct computation differs from the gate",
                                                                 (p_pass, p_fail), same, ev.method)
        else:
            p_pass, p_fail = direct(sums, sizes, truth)
        passes += p_pass <= ALPHA
        fails += p_fail <= ALPHA
    return passes / reps, fails / reps, method


def proportion_rates(reps: int, seed: int, sizes: Sequence[int], p: float, icc: float, bound: float | None = None,
                     kind: CheckKind = CheckKind.OVERALL) -> tuple[float, float, str]:
    """(pass rate, fail rate, method) of an accuracy (or sensitivity) check with its
    bound at `bound` (default: the truth, where both rates are errors)."""
    rng = np.random.default_rng(seed)
    images = np.repeat(np.arange(len(sizes)), sizes)
    b = p if bound is None else bound
    params = {"finding": FINDING, "cells": ["*/*/*"]} if kind is CheckKind.FINDING else {}

    def draw() -> Any:
        ok = _outcomes(rng, images, p, icc)
        sums = np.bincount(images, weights=ok, minlength=len(sizes)).tolist()
        return (lambda: [_record(i, int(img), bool(o)) for i, (img, o) in enumerate(zip(images, ok, strict=True))],
                sums, list(sizes))

    return _rates(_check(kind, b, **params), reps, draw, b, _proportion_direct)


def drop_rates(reps: int, seed: int, sizes: Sequence[int], p: float, icc: float, drop: float) -> tuple[float, float, str]:
    """(false pass, false fail, method) of a robustness drop check with its margin at the true
    drop. The perturbation loses a right answer when a second latent variable (same icc)
    falls below Phi^-1(drop / p): lost answers come in clusters, as real ones do."""
    rng = np.random.default_rng(seed)
    images = np.repeat(np.arange(len(sizes)), sizes)

    def draw() -> Any:
        std = _outcomes(rng, images, p, icc)
        lose = _outcomes(rng, images, drop / p, icc)
        pert = std & ~lose
        u = (1.0 + std.astype(float) - pert.astype(float)) / 2.0
        sums = np.bincount(images, weights=u, minlength=len(sizes)).tolist()

        def records() -> list[GradedRecord]:
            recs = [_record(i, int(img), bool(o)) for i, (img, o) in enumerate(zip(images, std, strict=True))]
            return recs + [_record(i, int(img), bool(o), "jpeg:30")
                           for i, (img, o) in enumerate(zip(images, pert, strict=True))]
        return records, sums, list(sizes)

    check = _check(CheckKind.ROBUSTNESS, drop, variant="jpeg:30", margin=drop)
    return _rates(check, reps, draw, (1.0 + drop) / 2.0, _drop_direct)


def mc(rate: float, reps: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1.0 / reps) / reps)


OTHER_DESIGNS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("5 images x 40", (40,) * 5),
    ("30 images x 10", (10,) * 30),
    ("1 image x 12 + 20 singles", (12,) + (1,) * 20),
)


def _method(method: str) -> str:
    return "finite-sample (Hoeffding-Bentkus)" if method.startswith("Hoeffding") else (
        "clustered Wilson, ICC + 2 s.e." if "raised" in method else "cluster-robust")


def run(reps: int, seed: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(what: str, design: str, fp: float, ff: float, method: str) -> None:
        worst = max(fp, ff)
        rows.append({"figure": what, "design": design, "false_pass": fp, "false_fail": ff, "mc_se": mc(worst, reps),
                     "method": _method(method), "reps": reps, "ok": worst <= 0.03})

    s = seed
    for k, m, p, icc in GRID:
        s += 1
        add(f"accuracy p={p} icc={icc}", f"{k} images x {m}", *proportion_rates(reps, s, (m,) * k, p, icc))
    for design, sizes in OTHER_DESIGNS:
        for p in (0.5, 0.9):
            for icc in (0.2, 0.5):
                s += 1
                add(f"accuracy p={p} icc={icc}", design, *proportion_rates(reps, s, sizes, p, icc))
    for design, sizes in (("30 images x 10", (10,) * 30), ("100 images x 6", (6,) * 100)):
        for p in (0.7, 0.9):
            s += 1
            add(f"robustness drop 0.05, standard p={p} icc=0.3", design, *drop_rates(reps, s, sizes, p, 0.3, 0.05))
    for design, sizes in (("8 images x 5", (5,) * 8), ("12 images x 4", (4,) * 12)):
        for p in (0.7, 0.9):
            s += 1
            add(f"sensitivity p={p} icc=0.3", design,
                *proportion_rates(reps, s, sizes, p, 0.3, kind=CheckKind.FINDING))
    for icc in (0.0, 0.2, 0.3, 0.5):
        s += 1
        power, _, method = proportion_rates(reps, s, (8,) * 40, 0.9, icc, bound=0.8)
        rows.append({"figure": f"POWER: accuracy p=0.9 against 0.8, icc={icc}", "design": "40 images x 8",
                     "power": power, "mc_se": mc(power, reps), "method": _method(method), "reps": reps})
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    out = ["| figure | design | false pass | false fail | MC s.e. | interval | reps | |",
           "|---|---|--:|--:|--:|---|--:|---|"]
    for r in rows:
        if "power" in r:
            out.append(f"| {r['figure']} | {r['design']} | power {r['power']:.3f} | | {r['mc_se']:.3f} | "
                       f"{r['method']} | {r['reps']} | |")
            continue
        out.append(f"| {r['figure']} | {r['design']} | {r['false_pass']:.3f} | {r['false_fail']:.3f} | "
                   f"{r['mc_se']:.3f} | {r['method']} | {r['reps']} | {'ok' if r['ok'] else 'MISS'} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- candidates


def _draw_sums(rng: np.random.Generator, reps: int, k: int, m: int, p: float, icc: float) -> np.ndarray:
    u = rng.standard_normal((reps, k, 1))
    e = rng.standard_normal((reps, k, m))
    return ((math.sqrt(icc) * u + math.sqrt(1 - icc) * e) < norm.ppf(p)).sum(2).astype(float)


def _wilson_icc(sums: np.ndarray, m: int, b: float, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised clustered Wilson p-values (equal sizes), ICC raised by `margin` s.e."""
    reps, k = sums.shape
    n = k * m
    ph = sums.sum(1) / n
    means = sums / m
    msb = m * ((means - ph[:, None]) ** 2).sum(1) / (k - 1)
    msw = (m * means * (1 - means)).sum(1) / (k * (m - 1))
    den = msb + (m - 1) * msw
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.clip(np.where(den > 1e-15, (msb - msw) / den, 1.0), 0.0, 1.0)
    se = np.sqrt(2 * (1 - rho) ** 2 * (1 + (m - 1) * rho) ** 2 / (m * (m - 1) * (k - 1)))
    rho = np.where(den > 1e-15, np.clip(rho + margin * se, 0.0, 1.0), 1.0)
    z = (ph - b) / np.sqrt(b * (1 - b) * (1 + (m - 1) * rho) / n)
    return student.sf(z, k - 1), student.sf(-z, k - 1)


def _cluster_t(sums: np.ndarray, m: int, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Cluster-robust t over images (CR1, t(K-1)), variance floored at the binomial one at b."""
    reps, k = sums.shape
    n = k * m
    ph = sums.sum(1) / n
    var = np.maximum(k / (k - 1) * ((sums - ph[:, None] * m) ** 2).sum(1), b * (1 - b) * n)
    z = (sums.sum(1) - b * n) / np.sqrt(var)
    return student.sf(z, k - 1), student.sf(-z, k - 1)


def _hoeffding_bentkus(sums: np.ndarray, m: int, b: float) -> tuple[np.ndarray, np.ndarray]:
    rows = [(finite.p_at_most(r.tolist(), [m] * len(r), b), finite.p_at_least(r.tolist(), [m] * len(r), b))
            for r in sums]
    out = np.array(rows)
    return out[:, 0], out[:, 1]


def candidates(reps: int, seed: int) -> list[dict[str, Any]]:
    """Worst one-sided miss over the grid and power at 40 x 8, p 0.9 against 0.8, per candidate."""
    cands: dict[str, Callable[[np.ndarray, int, float], tuple[np.ndarray, np.ndarray]]] = {
        "Hoeffding-Bentkus over images (before)": _hoeffding_bentkus,
        "cluster-robust t, t(K-1), binomial floor": _cluster_t,
        "clustered Wilson (ICC estimated)": lambda s, m, b: _wilson_icc(s, m, b, 0.0),
        "clustered Wilson, ICC + 1 s.e.": lambda s, m, b: _wilson_icc(s, m, b, 1.0),
        "clustered Wilson, ICC + 2 s.e. (chosen)": lambda s, m, b: _wilson_icc(s, m, b, 2.0),
    }
    rng = np.random.default_rng(seed)
    worst: dict[str, tuple[float, str]] = dict.fromkeys(cands, (0.0, ""))
    for k, m, p, icc in GRID:
        sums = _draw_sums(rng, reps, k, m, p, icc)
        for name, f in cands.items():
            pp, pf = f(sums if "Hoeffding" not in name else sums[: reps // 4], m, p)
            w = max(float((pp <= ALPHA).mean()), float((pf <= ALPHA).mean()))
            if w > worst[name][0]:
                worst[name] = (w, f"{k} x {m}, p {p}, ICC {icc}")
    rows = []
    powers = {icc: _draw_sums(rng, reps, 40, 8, 0.9, icc) for icc in (0.0, 0.2, 0.3, 0.5)}
    for name, f in cands.items():
        row: dict[str, Any] = {"candidate": name, "worst_miss": worst[name][0], "where": worst[name][1],
                               "reps": reps // 4 if "Hoeffding" in name else reps}
        for icc, sums in powers.items():
            pp, _ = f(sums if "Hoeffding" not in name else sums[: reps // 4], 8, 0.8)
            row[f"power_icc{icc}"] = float((pp <= ALPHA).mean())
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.few_images", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--candidates", action="store_true", help="only the comparison of candidate intervals")
    a = ap.parse_args(argv)
    t0 = time.process_time()
    if a.candidates:
        print("| interval | worst one-sided miss (48 designs) | where | power ICC 0 | ICC 0.2 | ICC 0.3 | ICC 0.5 | reps |")
        print("|---|--:|---|--:|--:|--:|--:|--:|")
        for r in candidates(a.reps, a.seed):
            print(f"| {r['candidate']} | {r['worst_miss']:.3f} | {r['where']} | {r['power_icc0.0']:.3f} | "
                  f"{r['power_icc0.2']:.3f} | {r['power_icc0.3']:.3f} | {r['power_icc0.5']:.3f} | {r['reps']} |")
        print(f"\nCPU time {time.process_time() - t0:.0f} s")
        return 0
    rows = run(a.reps, a.seed)
    print(table(rows))
    print(f"\nCPU time {time.process_time() - t0:.0f} s")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r.get("ok", True) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
