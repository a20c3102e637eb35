"""Sample sizes for the subgroup checks: how many images of each stratum decide them.

For a subgroup policy (gate/subgroups.py) and the attribute mix of the images (the site's
archive, a target mix, or the cube itself), per stratum of each attribute of `by`:

- the accuracy check (>= min_accuracy) is planned as gate/plan.py plans an accuracy
  check: the items for a score test to decide with `power` for a model `distance` above
  the bound (a pass claim at one-sided level alpha) and for one `distance` below it (a
  fail claim at alpha / m, Holm's first step over the m checks of the family, required
  and reported alike: the worst case);
- the gap check (accuracy(rest) - accuracy(stratum) <= max_gap) by the normal test of two
  independent proportions (the gate's Newcombe interval behaves like it), with the rest as
  large as the mix makes it and the rest's accuracy `accuracy` (the planning accuracy):
  under `gap: detect` (the default: a harm detector, never required to pass) for a gap
  `distance` above max_gap to be shown (a fail claim at alpha / m) only; under
  `gap: prove` also for a gap `distance` below it to be shown (a pass claim at alpha);

then items are images (the cube's items per image, with the design effect of an assumed
intra-image correlation `icc`), a stratum's images are what it needs, and the images
the whole collection needs follow from the mix: N = max over strata of need / share.
Per joint cell of the attributes (women, 70-79, GE) the target is N times the cell's
share; `lacking` says what the cube lacks of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrcube.gate.power import DEFAULT_POWER, _z_isf, _z_ppf, score_required_n
from medrcube.records import UNKNOWN


@dataclass(frozen=True, slots=True)
class StratumPlan:
    attribute: str
    value: str
    share: float  # of the images, in the mix
    have: int  # images of the cube in the stratum
    need_accuracy: int | None  # images the accuracy check needs (None: not planned)
    need_gap: int | None  # images the gap check needs (detect: to fail a gap above; prove: to decide both ways)
    need: int  # the larger
    lacking: int  # need - have, at least 0


@dataclass(frozen=True, slots=True)
class CellTarget:
    values: tuple[tuple[str, str], ...]  # ((attribute, value), ...)
    share: float
    target: int
    have: int

    @property
    def lacking(self) -> int:
        return max(0, self.target - self.have)

    def label(self) -> str:
        return ", ".join(f"{a} = {v}" for a, v in self.values)


@dataclass(frozen=True, slots=True)
class SubgroupPlan:
    strata: tuple[StratumPlan, ...]
    total_images: int  # the images the mix needs so that every stratum has its need
    cells: tuple[CellTarget, ...] = field(default=())
    items_per_image: float = 1.0
    design_effect: float = 1.0
    notes: tuple[str, ...] = ()
    gap_rule: str = "detect"  # the policy's subgroups.gap
    family_size: int = 1  # m: the checks a fail claim is Holm-adjusted over

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_images": self.total_images, "gap_rule": self.gap_rule, "family_size": self.family_size, "items_per_image": self.items_per_image,
            "design_effect": self.design_effect, "notes": list(self.notes),
            "strata": [{"attribute": s.attribute, "value": s.value, "share": s.share, "have": s.have,
                        "need_accuracy": s.need_accuracy, "need_gap": s.need_gap, "need": s.need,
                        "lacking": s.lacking} for s in self.strata],
            "cells": [{"cell": dict(c.values), "share": c.share, "target": c.target, "have": c.have,
                       "lacking": c.lacking} for c in self.cells],
        }


def gap_required_n(p_rest: float, gap: float, bound: float, alpha: float, rest_per_stratum: float, *,
                   deff: float = 1.0, power: float = DEFAULT_POWER) -> int | None:
    """Stratum items for the normal test of accuracy(rest) - accuracy(stratum) against
    `bound` to decide with `power` when the true gap is `gap`, the rest holding
    `rest_per_stratum` times the stratum's items, at one-sided level alpha."""
    p_s = p_rest - gap
    if not 0.0 < p_s < 1.0 or not 0.0 < p_rest < 1.0 or gap == bound:
        return None
    v = p_s * (1 - p_s) + p_rest * (1 - p_rest) / max(rest_per_stratum, 1e-9)
    n = ((_z_isf(alpha) + _z_ppf(power)) / abs(gap - bound)) ** 2 * v * max(1.0, deff)
    return max(1, math.ceil(n))


def plan_strata(
    policy: Any,
    mix: Mapping[tuple[tuple[str, str], ...], float],
    have: Mapping[tuple[tuple[str, str], ...], int],
    *,
    distance: float = 0.1,
    accuracy: float = 0.85,
    power: float = DEFAULT_POWER,
    items_per_image: float = 1.0,
    icc: float = 0.3,
    family_size: int | None = None,
) -> SubgroupPlan:
    """The plan (module docstring). `mix` and `have`: joint cells of the `by` attributes
    (tuples of (attribute, value)) -> share of the images, and images the cube holds;
    `family_size`: the checks of the gate's family (default: the subgroup checks alone)."""
    by = tuple(policy.by)
    alpha = (1.0 - policy.confidence) / 2.0
    total_mix = sum(mix.values()) or 1.0
    shares: dict[tuple[str, str], float] = {}
    have_marg: dict[tuple[str, str], int] = {}
    for cell, w in mix.items():
        for av in cell:
            shares[av] = shares.get(av, 0.0) + w / total_mix
    for cell, n in have.items():
        for av in cell:
            have_marg[av] = have_marg.get(av, 0) + n
    strata_keys = sorted(set(shares) | set(have_marg), key=lambda av: (by.index(av[0]) if av[0] in by else 99, av[1]))
    m = family_size or max(1, sum(1 for a, v in strata_keys if v != UNKNOWN)
                               * ((policy.min_accuracy is not None) + (policy.max_gap is not None)))
    deff = 1.0 + (max(1.0, items_per_image) - 1.0) * icc
    plans: list[StratumPlan] = []
    notes: list[str] = []
    for attribute, value in strata_keys:
        w = shares.get((attribute, value), 0.0)
        if value == UNKNOWN:
            continue
        need_acc = need_gap = None
        if policy.min_accuracy is not None:
            b = policy.min_accuracy
            ups = [score_required_n(b, min(0.999, b + distance), alpha, deff=deff, power=power),
                   score_required_n(b, max(0.001, b - distance), alpha / m, deff=deff, power=power)]
            need_acc = _images(max((u for u in ups if u is not None), default=0), items_per_image)
        if policy.max_gap is not None and 0.0 < w < 1.0:
            ratio = (1.0 - w) / w
            g = policy.max_gap
            ups = [gap_required_n(accuracy, g + distance, g, alpha / m, ratio, deff=deff, power=power)]
            if policy.gap == "prove":
                ups.append(gap_required_n(accuracy, max(g - distance, -0.5), g, alpha, ratio, deff=deff, power=power))
            need_gap = _images(max((u for u in ups if u is not None), default=0), items_per_image)
        need = max(need_acc or 0, need_gap or 0, policy.min_images)
        plans.append(StratumPlan(attribute, value, w, have_marg.get((attribute, value), 0), need_acc, need_gap, need,
                                 max(0, need - have_marg.get((attribute, value), 0))))
        if w == 0.0:
            notes.append(f"{attribute} = {value} is in the cube but not in the mix: it is planned on its own")
    total = max((math.ceil(p.need / p.share) for p in plans if p.share > 0), default=0)
    cells = tuple(sorted(
        (CellTarget(cell, w / total_mix, math.ceil(total * w / total_mix), have.get(cell, 0)) for cell, w in mix.items()
         if not any(v == UNKNOWN for _, v in cell)),
        key=lambda c: (-c.lacking, c.label())))
    return SubgroupPlan(tuple(plans), total, cells, items_per_image, deff, tuple(notes), policy.gap, m)


def _images(items: int, items_per_image: float) -> int:
    return max(1, math.ceil(items / max(1.0, items_per_image)))


def joint_counts(rows: Sequence[Mapping[str, str]], by: Sequence[str],
                 weights: Sequence[float] | None = None) -> dict[tuple[tuple[str, str], ...], float]:
    """Joint cells of `by` -> summed weight (1 per row unless weights are given)."""
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for i, r in enumerate(rows):
        cell = tuple((a, str(r.get(a) or UNKNOWN)) for a in by)
        out[cell] = out.get(cell, 0.0) + (weights[i] if weights is not None else 1.0)
    return out
