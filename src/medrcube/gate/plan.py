"""Planning: how many items each accuracy check needs for the gate to decide.

For a cube (its items' cells and images) and a policy, per accuracy check (overall,
slices, cells): the items it has, the design effect they carry (Kish, from the cube's
own items per image and an assumed intra-image correlation), and the items it would
need so that, with 80% power,
- a model `distance` above the effective bound passes it (one-sided level alpha:
  intersection-union needs no adjustment per check), and
- a model `distance` below the bound fails it (level alpha / m: Holm's first step over
  the m required checks, the worst case).
The gate is QUALIFIED only when every required check passes, so the per-check power
that gives the whole gate 80% is 0.8^(1/m): `need_all` is planned with it.

Items per image grow with the cube in the same proportion (the design effect is kept).
Chance level and above_chance are applied as the gate applies them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from medrcube.gate.checks import ACCURACY_KINDS, Check
from medrcube.gate.power import DEFAULT_POWER, score_required_n


@dataclass(frozen=True, slots=True)
class PlanUnit:
    """What planning needs of one item: its cell, image key and number of options."""

    cell: tuple[str, str, str]
    image: str
    n_options: int


@dataclass(frozen=True, slots=True)
class CheckPlan:
    check_id: str
    required: bool
    bound: float  # effective (after above_chance)
    have: int
    mean_cluster_size: float  # m_w = sum m^2 / n in the check's scope
    design_effect: float
    need_pass: int | None  # a model `distance` above the bound passes with 80% power
    need_fail: int | None  # a model `distance` below fails with 80% power (Holm worst case)
    need_all: int | None  # per-check power 0.8^(1/m): the whole gate QUALIFIES with 80%

    @property
    def enough(self) -> bool:
        return self.need_all is not None and self.have >= self.need_all

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "enough": self.enough}


def plan_checks(
    checks: Sequence[Check], units: Iterable[PlanUnit], *, distance: float = 0.1, icc: float = 0.3,
    power: float = DEFAULT_POWER,
) -> list[CheckPlan]:
    units = list(units)
    acc = [c for c in checks if c.kind in ACCURACY_KINDS and c.bound is not None]
    m = max(1, sum(c.required for c in checks))
    per_check_power = power ** (1.0 / m)
    out: list[CheckPlan] = []
    for c in acc:
        scope = [u for u in units if all(s is None or s == v for s, v in zip(c.selector, u.cell, strict=True))]
        n = len(scope)
        sizes = Counter(u.image for u in scope)
        m_w = sum(v * v for v in sizes.values()) / n if n else 1.0
        deff = 1.0 + (m_w - 1.0) * icc
        chance = sum(1.0 / u.n_options for u in scope if u.n_options) / n if n else 0.0
        bound = c.bound if c.bound is not None else 0.0
        if c.above_chance > 0 and n:
            bound = max(bound, min(1.0, chance + c.above_chance))
        alpha = c.alpha

        def need(target: float, a: float, pw: float, b: float = bound, d: float = deff) -> int | None:
            if not 0.0 < target < 1.0:
                return None
            return score_required_n(b, target, a, deff=d, power=pw)

        out.append(CheckPlan(
            c.id, c.required, bound, n, m_w, deff,
            need(min(0.999, bound + distance), alpha, power),
            need(max(0.001, bound - distance), alpha / m, power),
            need(min(0.999, bound + distance), alpha, per_check_power),
        ))
    return out


def units_by_cell(units: Iterable[PlanUnit]) -> dict[tuple[str, str, str], int]:
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    for u in units:
        counts[u.cell] += 1
    return dict(counts)
