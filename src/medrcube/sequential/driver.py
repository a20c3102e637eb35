"""The sequential run's loop: batches of units in the seeded order until the gate's verdict
is final or no required check holds units (see the package docstring), and what the run
records of itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from medrcube.gate.sequential import decide_looks, verdict_is_final
from medrcube.records import GradedRecord
from medrcube.run.order import next_batch, unit_order
from medrcube.sequential.plan import SequentialPlan
from medrcube.sequential.tracks import Track, build_tracks, feed_unit, futility_note, tracks_by_item

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
    batches: int = 0
    stop: str = ""
    cost: float | None = None  # the run's cost as --max-cost counts it, when priced
    order: tuple[str, ...] = field(default=(), repr=False)  # unit keys in the order asked

    def notes(self) -> dict[str, str]:
        """Why each check's sequence ended before its decision or final analysis."""
        return {cid: t.stop for cid, t in self.tracks.items() if t.stop}

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.plan.to_dict(),
            "stop": self.stop,
            "batches": self.batches,
            "units_asked": self.units_asked,
            "units_total": self.units_total,
            "items_asked": self.items_asked,
            "items_total": self.items_total,
            "items_saved": self.items_total - self.items_asked,
            "cost": self.cost,
            "order_head": list(self.order[:20]),
            "checks": {cid: self.check_summary(cid) for cid in self.tracks},
        }

    def check_summary(self, check_id: str) -> dict[str, Any]:
        """How one check's sequence went: decision, images used of available, its looks."""
        t = self.tracks[check_id]
        return {
            "decision": t.looks.status.value if t.looks.status else None, "images_used": t.used_units,
            "images_available": t.available_units, "looks_taken": len(t.looks.looks),
            "looks_planned": list(t.looks.fractions), "stop": t.stop,
            "futile_at_look": None if t.looks.futile_at is None else t.looks.futile_at + 1,
        }


AskFn = Callable[["Cube"], Awaitable[list[GradedRecord]]]
SpendFn = Callable[[], tuple[float, int]]  # (cost so far, candidate requests sent so far), metered


def final_verdict(tracks: dict[str, Track]) -> str | None:
    """Why the gate's verdict can no longer change (gate/sequential.py), or None."""
    return verdict_is_final([t.looks for t in tracks.values()])


async def run_sequential(
    cube: Cube,
    checks: Sequence[Check],
    plan: SequentialPlan,
    ask: AskFn,
    *,
    ask_baseline: AskFn | None = None,
    baseline_records: Sequence[GradedRecord] | None = None,
    spend: SpendFn | None = None,
) -> SequentialRun:
    """Ask `cube` unit by unit until the gate's verdict is final or every required check is
    decided or has had its final analysis.

    `ask(sub_cube)` asks every item of a sub-cube in every requested variant and returns
    the graded records (through the response store); `ask_baseline` does the same for a
    baseline model, `baseline_records` are a baseline run's records instead.

    Budgets: `max_requests` counts the asks the run schedules (items x variants, cached or
    not), so that every xdist worker stops at the same point; `max_cost` the cost of those
    asks at this process's metered cost per request sent (`spend`: usage x price), which
    is what the run spent when nothing was cached, and more when some was."""
    units = unit_order(cube.items, plan.seed, cube.image_of)
    position = {u.key: i for i, u in enumerate(units)}
    tracks = build_tracks(cube, checks, units, plan)
    by_item = tracks_by_item(tracks)
    run = SequentialRun(plan, [], [] if ask_baseline else None, tracks, len(units), items_total=len(cube.items))
    baseline: list[GradedRecord] | None = list(baseline_records) if baseline_records is not None else None
    pos = 0
    variants_per_item = 1
    while True:
        if (final := final_verdict(tracks)) is not None:
            run.stop = final.removeprefix("not asked: ")
            break
        holding = [t for t in tracks.values() if t.holding and t.check.required]
        if not holding:
            run.stop = "every required check is decided or has had its final analysis"
            break
        needed: set[str] = set().union(*(t.scope for t in holding))
        batch, new_pos = next_batch(units, pos, plan.batch_units, needed)
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
            asks = sum(len(u.items) for u in batch) * variants_per_item
        if plan.max_cost is not None and spend is not None:
            cost, sent = spend()
            if sent:
                per_request = cost / sent
                run.cost = per_request * requests
                if per_request * (requests + asks) > plan.max_cost:
                    run.stop = f"budget: --max-cost {plan.max_cost} reached"
                    break
        pos_before, pos = pos, new_pos
        items = tuple(it for u in batch for it in u.items)
        sub = replace(cube, items=items)
        records = await ask(sub)
        variants_per_item = max(1, round(len(records) / max(len(items), 1)))
        run.records.extend(records)
        if ask_baseline is not None:
            assert run.baseline is not None
            run.baseline.extend(await ask_baseline(sub))
            baseline = run.baseline
        unit_of = {it.id: u.key for u in batch for it in u.items}
        by_unit: dict[str, list[GradedRecord]] = {}
        for r in records:
            by_unit.setdefault(unit_of[r.item_id], []).append(r)
        taken = {u.key: frozenset(it.id for it in u.items) for u in batch}
        for unit in units[pos_before:pos]:
            feed_unit(by_item, unit, taken.get(unit.key, frozenset()), by_unit.get(unit.key, []))
        if any([t.take_looks(baseline) for t in tracks.values() if t.looks.status is None]):
            decide_looks([t.looks for t in tracks.values()])
        run.batches += 1
        run.units_asked += len(batch)
        run.items_asked += len(items)
        run.order += tuple(u.key for u in batch)
    if plan.max_cost is not None and spend is not None and (sent := spend()[1]):
        run.cost = spend()[0] / sent * run.items_asked * variants_per_item
    _note_unfinished(run)
    for t in tracks.values():
        t.settle(baseline)
    return run


def _note_unfinished(run: SequentialRun) -> None:
    """Say why each check that is neither decided nor fully analysed stopped."""
    final = final_verdict(run.tracks)
    for t in run.tracks.values():
        if t.looks.status is not None or t.looks.final or t.stop:
            continue
        if t.looks.futile_at is not None:
            t.stop = futility_note(t)
        elif final is not None:
            t.stop = final
        elif run.stop.startswith("budget"):
            t.stop = f"not asked in full: {run.stop}"
        else:
            t.stop = "not asked in full: no required check needed the rest of its images"
