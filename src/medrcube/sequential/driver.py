"""The sequential run's loop: batches of units in the seeded order until no required check
holds units (see the package docstring), and what the run records of itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from medrcube.records import GradedRecord
from medrcube.run.order import SequentialPlan, next_batch, unit_order
from medrcube.sequential.tracks import (
    FUTILE,
    Track,
    build_tracks,
    fail_levels,
    feed_unit,
    released,
)

if TYPE_CHECKING:
    from medrcube.cube.item import Cube
    from medrcube.gate.checks import Check


@dataclass
class SequentialRun:
    """What a sequential run asked, in what order, and how each check's sequence ended."""

    plan: SequentialPlan
    records: list[GradedRecord]
    baseline: list[GradedRecord] | None
    tracks: dict[str, Track]
    units_total: int
    units_asked: int = 0
    items_total: int = 0
    items_asked: int = 0
    items_held: int = 0  # items read by required checks without a sequence: always asked
    batches: int = 0
    stop: str = ""
    order: tuple[str, ...] = field(default=(), repr=False)  # unit keys in the order asked

    def to_dict(self) -> dict[str, object]:
        return {
            "seed": self.plan.seed,
            "batch_units": self.plan.batch_units,
            "max_requests": self.plan.max_requests,
            "max_cost": self.plan.max_cost,
            "stop": self.stop,
            "batches": self.batches,
            "units_asked": self.units_asked,
            "units_total": self.units_total,
            "items_asked": self.items_asked,
            "items_total": self.items_total,
            "items_saved": self.items_total - self.items_asked,
            "items_held_by_fixed_checks": self.items_held,
            "order_head": list(self.order[:20]),
            "checks": {cid: self.check_summary(cid) for cid in self.tracks},
        }

    def check_summary(self, check_id: str) -> dict[str, object]:
        """How one check's sequence went: decision, images used of available, why it stopped."""
        t = self.tracks[check_id]
        return {
            "decision": t.test.decision, "images_used": t.used_units, "images_available": t.available_units,
            "items_used": t.used_items, "stop": t.stop, "e_pass": t.test.e_pass, "e_fail": t.test.e_fail,
            "alpha_pass": t.test.alpha_pass, "alpha_fail": t.test.alpha_fail,
            "images_still_needed": t.still_needed(),
        }


def _accuracy(records: Sequence[GradedRecord]) -> float | None:
    graded = [r.correct for r in records if r.variant == "standard" and r.graded]
    return sum(graded) / len(graded) if graded else None


AskFn = Callable[["Cube"], Awaitable[list[GradedRecord]]]


async def run_sequential(
    cube: Cube,
    checks: Sequence[Check],
    plan: SequentialPlan,
    ask: AskFn,
    *,
    ask_baseline: AskFn | None = None,
    baseline_records: Sequence[GradedRecord] | None = None,
    cost_of: Callable[[Sequence[GradedRecord]], float] | None = None,
) -> SequentialRun:
    """Ask `cube` unit by unit until every required sequential check is decided.

    `ask(sub_cube)` asks every item of a sub-cube in every requested variant and returns
    the graded records (through the response store); `ask_baseline` does the same for a
    baseline model, `baseline_records` are a baseline run's records instead.

    Budgets count what the run schedules, cached or not, so that every xdist worker
    stops at the same point: `max_requests` the asks (items x variants), `max_cost` the
    cost `cost_of(records)` of the asked records projected over the next batch."""
    units = unit_order(cube.items, plan.seed)
    position = {u.key: i for i, u in enumerate(units)}
    tracks = build_tracks(cube, checks, units)
    run = SequentialRun(plan, [], [] if ask_baseline else None, tracks, len(units), items_total=len(cube.items))
    baseline: dict[str, GradedRecord] | None = None
    if baseline_records is not None:
        baseline = {r.item_id: r for r in baseline_records if r.variant == "standard"}
    # A required check without an anytime-valid test is decided by its fixed-sample rule,
    # which needs its whole scope: its items are asked whatever the sequences decide.
    held = {it.id for c in checks if c.required and c.id not in tracks
            for it in cube.items if c.selects(it)}  # type: ignore[arg-type]
    run.items_held = len(held)
    pos = 0
    variants_per_item = 1
    pooled: float | None = None
    while True:
        levels = fail_levels(tracks)
        open_required = [t for t in tracks.values() if t.open and t.check.required and not released(t, levels)]
        if not open_required and not held:
            undecided = any(not t.decided and t.check.required for t in tracks.values())
            run.stop = ("every required check is decided or released (it could not, or at its rate would not, "
                        "decide with the images left)" if undecided else "every required check is decided")
            break
        needed = set().union(held, *(t.scope for t in open_required))
        size = plan.batch_units
        batch, new_pos = next_batch(units, pos, size, needed)
        if not batch:
            run.stop = "the cube is exhausted"
            break
        requests = run.items_asked * variants_per_item
        asks = sum(len(u.items) for u in batch) * variants_per_item
        if plan.max_requests is not None and requests + asks > plan.max_requests:
            # Shrink the batch to what the budget allows (unit by unit), or stop.
            room = plan.max_requests - requests
            while batch and sum(len(u.items) for u in batch) * variants_per_item > room:
                batch.pop()
            if not batch:
                run.stop = f"budget: --max-requests {plan.max_requests} reached"
                break
            new_pos = position[batch[-1].key] + 1
        if plan.max_cost is not None and requests and cost_of is not None:
            cost = cost_of(run.records)
            per_request = cost / requests
            if cost + per_request * asks > plan.max_cost:
                run.stop = f"budget: --max-cost {plan.max_cost} reached"
                break
        pos_before, pos = pos, new_pos
        items = tuple(it for u in batch for it in u.items)
        held.difference_update(it.id for it in items)
        sub = replace(cube, items=items)
        records = await ask(sub)
        variants_per_item = max(1, round(len(records) / max(len(items), 1)))
        run.records.extend(records)
        if ask_baseline is not None:
            base = await ask_baseline(sub)
            assert run.baseline is not None
            run.baseline.extend(base)
            baseline = {r.item_id: r for r in run.baseline if r.variant == "standard"}
        unit_of = {it.id: u.key for u in batch for it in u.items}
        by_unit: dict[str, list[GradedRecord]] = {}
        for r in records:
            by_unit.setdefault(unit_of[r.item_id], []).append(r)
        taken = {u.key: frozenset(it.id for it in u.items) for u in batch}
        for unit in units[pos_before:pos]:
            feed_unit(tracks, unit, taken.get(unit.key, frozenset()), by_unit.get(unit.key, []), baseline, pooled)
        pooled = _accuracy(run.records)  # the next batch's priors see this one's answers
        run.batches += 1
        run.units_asked += len(batch)
        run.items_asked += len(items)
        run.order += tuple(u.key for u in batch)
    for t in tracks.values():
        if t.decided or t.broken or t.stop:
            continue
        if t.futile():
            t.stop = FUTILE
        else:
            t.stop = run.stop if run.stop.startswith("budget") else (
                "the cube is exhausted" if t.used_units >= t.available_units or run.stop == "the cube is exhausted"
                else "not needed: every required check was decided first")
    return run
