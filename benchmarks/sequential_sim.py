"""The sequential driver's decisions on accuracy checks, vectorised, for hundreds of runs.

The real driver (medrcube.sequential) computes every check's full evidence at each look
through the gate; on a loaded 2-core machine that is seconds per run, too slow for the
hundreds of replicates the error rates need. This module makes the same run with arrays:
the same answers (`SimulatedAdapter.correct`), the same seeded image order
(`run.order.unit_order`), the same looks (`SequentialPlan.fractions_for`), the same
statistic (the clustered Wilson score p-value of metrics/clustered.py: ANOVA ICC, Kish
design effect, t on n/m_w - 1 degrees of freedom; on few effective images the
finite-sample p-values of metrics/finite.py, as gate/criteria.py decides), the same nominal levels
(`metrics.group_sequential.nominal_levels`), the same decisions (a pass at the first look
whose p is at most its level; fails by Holm at alpha / m; the run stopped at the first
required fail or when every required check passed) and the full run's verdict by the
fixed-sample family (pass at alpha, Holm-adjusted fails). Two simplifications, both
small: a decision takes effect at the look's image rather than at the end of its batch
(the real run asks up to one batch of 16 images more), and Holm's later rounds (after a
first fail) are not simulated, since the first fail already ends the run NOT QUALIFIED.
`check_against_driver` compares it with the real driver run by run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtr, stdtr

INF = math.inf


@dataclass
class CheckShape:
    """One accuracy check over the cube: its images (unit indices), items per image and
    the item indices of each image in its scope, its bound and looks."""

    check: Any
    units: np.ndarray  # unit indices (into the cube's unit list) of its images
    sizes: np.ndarray  # items in scope on each of its images
    item_unit: np.ndarray  # for each scope item: the position of its image in `units`
    items: np.ndarray  # scope item indices (into the cube's items)
    bound: float
    fractions: tuple[float, ...]
    look_n: np.ndarray  # images seen at each look
    pass_levels: np.ndarray
    fail_levels: np.ndarray


def shapes(cube: Any, checks: Sequence[Any], plan: Any,
           rho: float | None = None) -> tuple[list[CheckShape], list[str], dict[str, int]]:
    """Every required and optional accuracy check's shape, the unit keys and the item index."""
    from medrcube.gate.checks import ACCURACY_KINDS
    from medrcube.gate.evidence import effective_bound
    from medrcube.metrics.accuracy import chance_level_of_options
    from medrcube.metrics.group_sequential import nominal_levels
    from medrcube.run.order import unit_order
    from medrcube.sequential.plan import look_images

    units = unit_order(cube.items, 0)
    keys = [u.key for u in units]
    unit_index = {k: i for i, k in enumerate(keys)}
    item_index = {it.id: i for i, it in enumerate(cube.items)}
    unit_of_item = {it.id: unit_index[u.key] for u in units for it in u.items}
    required = [c for c in checks if c.required]
    if any(c.kind not in ACCURACY_KINDS for c in required):
        raise ValueError("the vectorised simulation handles cell, slice and overall checks only")
    spending = {} if rho is None else {"rho": rho}  # another spending exponent than the gate's (benchmarks only)
    out = []
    # An optional check of another kind holds no images and cannot change the gate's verdict.
    for c in (c for c in checks if c.kind in ACCURACY_KINDS):
        scope = [it for it in cube.items if c.selects(it) and cube.image_available(it)]
        if not scope:
            continue
        own = sorted({unit_of_item[it.id] for it in scope})
        where = {u: j for j, u in enumerate(own)}
        item_unit = np.array([where[unit_of_item[it.id]] for it in scope])
        sizes = np.bincount(item_unit, minlength=len(own))
        fractions = plan.fractions_for(len(own))
        bound = effective_bound(c, chance_level_of_options(len(it.options) for it in scope))[0]
        share = c.alpha / max(len(required), 1) if c.required else c.alpha
        out.append(CheckShape(c, np.array(own), sizes, item_unit, np.array([item_index[it.id] for it in scope]),
                              bound, fractions, np.array([look_images(f, len(own)) for f in fractions]),
                              np.array(nominal_levels(fractions, c.alpha, **spending)),
                              np.array(nominal_levels(fractions, share, **spending))))
    return out, keys, item_index


def score_p(k: np.ndarray, n: np.ndarray, s2: np.ndarray, smm: np.ndarray, big_k: np.ndarray,
            bound: float) -> tuple[np.ndarray, np.ndarray]:
    """The clustered Wilson score p-values (of "at most bound", of "at least bound") from
    the running sums over images: k = sum k_j, n = sum m_j, s2 = sum k_j^2 / m_j,
    smm = sum m_j^2, big_k = images (metrics/clustered.py, vectorised)."""
    m_w = smm / n
    with np.errstate(divide="ignore", invalid="ignore"):
        msb = (s2 - k * k / n) / (big_k - 1)
        msw = (k - s2) / (n - big_k)
        m0 = (n - smm / n) / (big_k - 1)
        denom = msb + (m0 - 1.0) * msw
        raw = (msb - msw) / denom
    estimable = (big_k >= 2) & (n > big_k) & (denom > 1e-15)
    rho = np.where(m_w <= 1.0, 0.0, np.where(estimable, np.clip(np.nan_to_num(raw), 0.0, 1.0), 1.0))
    n_eff = n / (1.0 + (m_w - 1.0) * rho)
    df = np.where(m_w <= 1.0, np.inf, np.maximum(n / m_w - 1.0, 0.0))
    z = (k / n - bound) / np.sqrt(bound * (1.0 - bound) / n_eff)
    finite = np.isfinite(df)
    safe_df = np.where(finite & (df >= 1), df, 1.0)
    upper = np.where(finite, stdtr(safe_df, -z), ndtr(-z))
    lower = np.where(finite, stdtr(safe_df, z), ndtr(z))
    no_evidence = finite & (df < 1)
    return np.where(no_evidence, 1.0, upper), np.where(no_evidence, 1.0, lower)


def finite_p(p_pass: np.ndarray, p_fail: np.ndarray, kk: np.ndarray, m: np.ndarray, s: CheckShape) -> None:
    """The looks on few effective images decided as the gate decides them (in place):
    with the finite-sample p-values of metrics/finite.py (gate/criteria.py with_finite)."""
    from medrcube.gate.criteria import few_images
    from medrcube.metrics import finite

    for j, need in enumerate(s.look_n):
        sizes = [int(x) for x in m[:need]]
        if few_images(sizes):
            sums = [float(x) for x in kk[:need]]
            p_pass[j], p_fail[j] = finite.p_at_most(sums, sizes, s.bound), finite.p_at_least(sums, sizes, s.bound)


def holm_fails(p_fail: np.ndarray, alpha: float) -> np.ndarray:
    """Holm's step-down rejections of one family (fixed-sample, as gate/family.py)."""
    m = len(p_fail)
    order = np.argsort(p_fail, kind="stable")
    adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p_fail[order]))
    out = np.zeros(m, dtype=bool)
    out[order] = adjusted <= alpha
    return out


def simulate(cube: Any, shape_list: list[CheckShape], keys: list[str], correct: np.ndarray,
             seed: int) -> dict[str, Any]:
    """One replicate: the full run's and the sequential run's gate verdicts on `correct`
    (item-level right answers), the fraction of the full run's asks and the passes."""
    from medrcube.run.order import unit_order

    position = {u.key: i for i, u in enumerate(unit_order(cube.items, seed))}
    pos = np.array([position[k] for k in keys])
    full_pass, full_pfail, required = [], [], []
    t_pass, t_fail, t_end, seq_pass_at = [], [], [], []
    for s in shape_list:
        kj = np.bincount(s.item_unit, weights=correct[s.items], minlength=len(s.units))
        order = np.argsort(pos[s.units], kind="stable")
        m, kk = s.sizes[order].astype(float), kj[order]
        n, k = np.cumsum(m), np.cumsum(kk)
        s2, smm, big_k = np.cumsum(kk * kk / m), np.cumsum(m * m), np.arange(1, len(m) + 1, dtype=float)
        idx = s.look_n - 1
        p_pass, p_fail = score_p(k[idx], n[idx], s2[idx], smm[idx], big_k[idx], s.bound)
        finite_p(p_pass, p_fail, kk, m, s)
        look_pos = pos[s.units][order][idx]
        required.append(s.check.required)
        full_pass.append(p_pass[-1] <= s.check.alpha)
        full_pfail.append(p_fail[-1])
        passed = np.flatnonzero(p_pass <= s.pass_levels)
        first_pass = passed[0] if passed.size else None
        failed = np.flatnonzero(p_fail <= s.fail_levels)
        failed = failed[failed < first_pass] if first_pass is not None else failed
        t_pass.append(look_pos[first_pass] if first_pass is not None else INF)
        t_fail.append(look_pos[failed[0]] if failed.size else INF)
        t_end.append(min(t_pass[-1], t_fail[-1], look_pos[-1]))
        seq_pass_at.append(t_pass[-1])
    req = np.array(required)
    fp, fpf = np.array(full_pass), np.array(full_pfail)
    alpha = shape_list[0].check.alpha
    full_fail = np.zeros(len(req), dtype=bool)
    full_fail[req] = holm_fails(fpf[req], alpha) & ~fp[req]
    full = ("NOT QUALIFIED" if full_fail[req].any() else "QUALIFIED" if fp[req].all() else "UNDECIDED")
    tp, tf = np.array(t_pass)[req], np.array(t_fail)[req]
    first_fail, all_pass = tf.min(), tp.max()
    if first_fail < all_pass:
        seq, stop = "NOT QUALIFIED", first_fail
    elif math.isfinite(all_pass):
        seq, stop = "QUALIFIED", all_pass
    else:
        seq, stop = "UNDECIDED", INF
    # An item is asked while some required check holding it is open (and the run goes on).
    item_end = np.full(len(correct), -1.0)
    for s, end, is_req in zip(shape_list, t_end, required, strict=True):
        if is_req:
            np.maximum.at(item_end, s.items, min(end, stop))
    unit_pos = np.full(len(correct), np.inf)
    for s in shape_list:
        unit_pos[s.items] = pos[s.units][s.item_unit]
    asked = int(np.sum(unit_pos <= item_end))
    available = int(sum(cube.image_available(it) for it in cube.items))
    passes = int(np.sum(np.isfinite(tp) & (tp <= stop)))
    return {"fraction": asked / available, "full": full, "sequential": seq, "passes": passes,
            "required": int(req.sum())}


def correct_of(cube: Any, spec: str) -> np.ndarray:
    from medrcube.models.registry import load_adapter

    sim = load_adapter(spec, cube=cube)
    return np.array([sim.correct(it.id, it.image, it.task) for it in cube.items], dtype=float)  # type: ignore[attr-defined]


def check_against_driver(cube: Any, checks: Sequence[Any], specs: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    """Run the real driver (benchmarks.sequential.one) and this simulation on the same
    answers and seeds: their gate verdicts and fractions side by side."""
    from benchmarks.sequential import one
    from medrcube.sequential import SequentialPlan

    shape_list, keys, _ = shapes(cube, checks, SequentialPlan())
    rows = []
    for spec, seed in specs:
        real = one(cube, checks, spec, seed)
        sim = simulate(cube, shape_list, keys, correct_of(cube, spec), seed)
        rows.append({"spec": spec, "seed": seed, "real": real, "sim": sim})
    return rows
