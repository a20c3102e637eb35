"""Sequential qualification: ask the cube image by image in a seeded random order and stop
each check as soon as its anytime-valid test decides.

How a run goes:
1. The cube's units (an image with all its items, or an imageless item) are put in the
   seeded order of `run.order` (a hash permutation: every process and every restart
   computes the same order).
2. Every check that can stop early (accuracy of a cell, a slice or the whole cube;
   regression against a baseline) gets a `metrics.sequential.SequentialTest`: betting
   tests of "the bound is met" and "the bound is missed" over the check's images.
3. Batch after batch, the next units holding an item some undecided *required* check
   still reads are asked (all requested variants, through the caller's `ask`, which goes
   through the response store: cached answers are free and come first), and every
   undecided check is fed the new units in order.
4. The run stops when every required check is decided, the cube is exhausted, or a
   budget (`max_requests`, `max_cost`) would be passed by the next batch; a check still
   undecided then is UNDECIDED, with the images it would still need.

Family: every pass claim is tested at its own level (an intersection-union argument: the
gate claims QUALIFIED only when all of them hold, which needs no adjustment); the fail
claims of the required sequential checks are Bonferroni-adjusted (alpha / K), which stays
valid at any stopping time, where Holm's step-down would need the p-values of a fixed
sample. Checks that cannot stop early (credibility, image dependence, position, site
checks) do not hold units back: they are evaluated with their own fixed-sample rule on
the units the run asked, and their verdicts say so.

xdist: every worker runs this same loop. Decisions are a function of the records only,
and the records of a key are one stored response for every process, so the workers take
the same decisions batch by batch; within a batch each worker asks its shard first (the
caller's `ask` does that), so the requests are split, not repeated.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from medrcube.gate.checks import ACCURACY_KINDS, Check, CheckKind
from medrcube.gate.evidence import effective_bound
from medrcube.gate.verdict import Status, Verdict
from medrcube.metrics.accuracy import chance_level_of_options
from medrcube.metrics.sequential import MAX_BET, SequentialTest, images_needed
from medrcube.records import GradedRecord, Outcome
from medrcube.run.order import SequentialPlan, Unit, next_batch, unit_order

if TYPE_CHECKING:
    from medrcube.cube.item import Cube

SEQUENTIAL_KINDS = ACCURACY_KINDS | {CheckKind.REGRESSION}


@dataclass
class Track:
    """One check's sequence: its test, its scope and why it stopped."""

    check: Check
    scope: frozenset[str]  # item ids the check reads
    max_size: int  # the largest number of scope items on one image
    available_units: int  # images (units) of the cube in the check's scope
    test: SequentialTest
    centre: float  # the bound on the test's scale (effective accuracy bound, or the margin)
    used_units: int = 0
    used_items: int = 0
    errors: int = 0
    asked: int = 0
    stop: str = ""  # why the sequence ended

    @property
    def decided(self) -> bool:
        return self.test.decision is not None

    def futile(self) -> bool:
        """Whether neither claim can be reached any more, even if every image left in the
        check's scope came out as well (or as badly) as possible: the bet per image is at
        most MAX_BET and an outcome at most its largest value, so the wealth can grow by
        at most log(1 + MAX_BET * y_max) per image. Such a check stops holding images; it
        ends undecided, which it would have been anyway (no decision is made by this)."""
        if self.decided:
            return False
        left = self.available_units - self.used_units
        if self.check.kind is CheckKind.REGRESSION:
            up_max, down_max = 1.0, (1.0 - self.centre) / (1.0 + self.centre)
        else:
            up_max, down_max = 1.0 - self.centre, self.centre
        reach_pass = self.test.up.log_wealth + left * math.log1p(MAX_BET * up_max)
        reach_fail = self.test.down.log_wealth + left * math.log1p(MAX_BET * down_max)
        return reach_pass < math.log(1.0 / self.test.alpha_pass) and reach_fail < math.log(1.0 / self.test.alpha_fail)

    def still_needed(self) -> int | None:
        """Images this check would still need, about, to decide (a planning figure from
        the outcomes so far; None when they sit at the bound and no number would do)."""
        if self.decided:
            return 0
        up = self.test.up
        if up.n < 2:
            return None
        mean = up.total / up.n
        spread = math.sqrt(max(up.total_sq / up.n - mean * mean, 1e-6))
        alpha = self.test.alpha_pass if mean > 0 else self.test.alpha_fail
        need = images_needed(abs(mean), alpha, spread)
        return max(need - self.used_units, 1) if need else None


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


def _tracks(cube: Cube, checks: Sequence[Check], units: Sequence[Unit]) -> dict[str, Track]:
    seq = [c for c in checks if c.kind in SEQUENTIAL_KINDS and (c.kind is not CheckKind.REGRESSION or
                                                                 c.params.get("margin") is not None)]
    required = [c for c in seq if c.required]
    k_fail = max(len(required), 1)
    unit_of = {it.id: u.key for u in units for it in u.items}
    tracks: dict[str, Track] = {}
    for c in seq:
        # Check.selects is typed for a GradedRecord but reads only part, modality and task,
        # which an Item carries too (a protocol for both belongs in gate/checks.py).
        in_scope = [it for it in cube.items if c.selects(it)]  # type: ignore[arg-type]
        if not in_scope:
            continue
        per_unit: dict[str, int] = {}
        for it in in_scope:
            per_unit[unit_of[it.id]] = per_unit.get(unit_of[it.id], 0) + 1
        max_size = max(per_unit.values())
        alpha = c.alpha  # the fixed-sample rule's one-sided level, kept by the sequential test
        alpha_fail = alpha / k_fail if c.required else alpha
        if c.kind is CheckKind.REGRESSION:
            margin = float(c.params["margin"])
            test = SequentialTest(alpha, alpha_fail, max_size * (1.0 + margin))
            centre = margin
        else:
            # The gate's own rule (bound raised to chance + above_chance), on the items in scope.
            centre = effective_bound(c, chance_level_of_options(len(it.options) for it in in_scope))[0]
            test = SequentialTest(alpha, alpha_fail, float(max_size))
        tracks[c.id] = Track(c, frozenset(it.id for it in in_scope), max_size, len(per_unit), test, centre)
    return tracks


def _feed(track: Track, unit: Unit, records: Sequence[GradedRecord], baseline: dict[str, GradedRecord] | None) -> None:
    """Add one asked unit to an undecided track."""
    mine = [r for r in records if r.item_id in track.scope and r.variant == "standard"]
    if not mine:
        return
    track.asked += sum(r.outcome is not Outcome.UNAVAILABLE for r in mine)
    track.errors += sum(r.outcome is Outcome.ERROR for r in mine)
    graded = [r for r in mine if r.graded]
    if track.check.kind is CheckKind.REGRESSION:
        if baseline is None:
            return
        both = [(baseline[r.item_id], r) for r in graded if r.item_id in baseline and baseline[r.item_id].graded]
        if not both:
            return
        base_c = sum(b.correct for b, _ in both)
        cand_c = sum(r.correct for _, r in both)
        m = len(both)
        centred = track.centre * m - (base_c - cand_c)
    else:
        if not graded:
            return
        m = len(graded)
        centred = sum(r.correct for r in graded) - track.centre * m
    track.used_units += 1
    track.used_items += m
    track.test = track.test.update(centred)
    if track.decided:
        track.stop = f"decided ({track.test.decision}) after {track.used_units} images"


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
    tracks = _tracks(cube, checks, units)
    run = SequentialRun(plan, [], [] if ask_baseline else None, tracks, len(units), items_total=len(cube.items))
    baseline: dict[str, GradedRecord] | None = None
    if baseline_records is not None:
        baseline = {r.item_id: r for r in baseline_records if r.variant == "standard"}
    pos = 0
    variants_per_item = 1
    while True:
        open_required = [t for t in tracks.values() if not t.decided and t.check.required and not t.futile()]
        if not open_required:
            futile = any(not t.decided and t.check.required for t in tracks.values())
            run.stop = ("every required check is decided or can no longer be decided" if futile
                        else "every required check is decided")
            break
        needed = set().union(*(t.scope for t in open_required))
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
            new_pos = units.index(batch[-1]) + 1
        if plan.max_cost is not None and requests and cost_of is not None:
            cost = cost_of(run.records)
            per_request = cost / requests
            if cost + per_request * asks > plan.max_cost:
                run.stop = f"budget: --max-cost {plan.max_cost} reached"
                break
        pos = new_pos
        items = tuple(it for u in batch for it in u.items)
        sub = replace(cube, items=items)
        records = await ask(sub)
        variants_per_item = max(1, round(len(records) / max(len(items), 1)))
        run.records.extend(records)
        if ask_baseline is not None:
            base = await ask_baseline(sub)
            assert run.baseline is not None
            run.baseline.extend(base)
            baseline = {r.item_id: r for r in run.baseline if r.variant == "standard"}
        by_unit: dict[str, list[GradedRecord]] = {}
        unit_of = {it.id: u.key for u in batch for it in u.items}
        for r in records:
            by_unit.setdefault(unit_of[r.item_id], []).append(r)
        for u in batch:
            for t in tracks.values():
                if not t.decided:
                    _feed(t, u, by_unit.get(u.key, []), baseline)
        run.batches += 1
        run.units_asked += len(batch)
        run.items_asked += len(items)
        run.order += tuple(u.key for u in batch)
    for t in tracks.values():
        if not t.decided and t.futile():
            t.stop = "cannot decide: too few images left in its scope for either claim"
        elif not t.decided:
            t.stop = run.stop if run.stop.startswith("budget") else (
                "the cube is exhausted" if t.used_units >= t.available_units or run.stop == "the cube is exhausted"
                else "not needed: every required check was decided first")
    return run


SEQUENTIAL_GUARANTEE = (
    "anytime-valid: the pass claim holds at one-sided level {a:.3g} and the fail claim at {f:.3g} "
    "(Bonferroni over {k} required sequential checks) whenever the run stopped (betting test, Ville's inequality)"
)


def guarantee_note(plan: SequentialPlan | None) -> str:
    """What a sequential run adds to the gate's guarantee sentence ("" for a full run)."""
    if plan is None:
        return ""
    return ("; sequential run: cell, slice, overall and regression checks decided by anytime-valid betting "
            "tests, their fail claims Bonferroni-adjusted (docs/guarantees.md)")


def sequential_verdicts(
    checks: Sequence[Check],
    run: SequentialRun,
    baseline: Sequence[GradedRecord] | None = None,
    *,
    baseline_error: str | None = None,
) -> dict[str, Verdict]:
    """Every check's verdict after a sequential run.

    A check with a sequence is decided by its betting test (its fixed-sample numbers on the
    images it used are kept as information: observed value, interval, worst items); an
    API-error verdict stays an error. Every other check is decided by its own fixed-sample
    rule on the items the run asked, and its message says so."""
    from medrcube.gate.evaluate import evaluate_gate

    fixed = evaluate_gate(checks, run.records, baseline, baseline_error=baseline_error).by_id()
    k = max(sum(1 for t in run.tracks.values() if t.check.required), 1)
    out: dict[str, Verdict] = {}
    for c in checks:
        v = fixed[c.id]
        track = run.tracks.get(c.id)
        if track is None:
            note = (f"\n  sequential run: decided by its fixed-sample rule on the {run.items_asked} of "
                    f"{run.items_total} items the run asked")
            out[c.id] = replace(v, message=v.message + note)
            continue
        if v.status is Status.ERROR:
            out[c.id] = v
            continue
        decision = track.test.decision
        status = Status.PASS if decision == "pass" else Status.FAIL if decision == "fail" else Status.UNDECIDED
        need = track.still_needed()
        per_image = track.used_items / track.used_units if track.used_units else 1.0
        head = (f"sequential ({track.stop}): e-value for passing {track.test.e_pass:.3g} "
                f"(decides at {1 / track.test.alpha_pass:.3g}), for failing {track.test.e_fail:.3g} "
                f"(decides at {1 / track.test.alpha_fail:.3g}); {track.used_units} of {track.available_units} "
                f"images used ({track.used_items} items)")
        if status is Status.UNDECIDED:
            head += (f"; about {need} more images would decide" if need else
                     "; the estimate sits at the bound: no number of images is sure to decide")
        out[c.id] = replace(
            v,
            status=status,
            message=f"{head}\n  {v.message}",
            decided_by="anytime-valid betting test" if decision else "",
            guarantee=SEQUENTIAL_GUARANTEE.format(a=track.test.alpha_pass, f=track.test.alpha_fail, k=k),
            needed_n=None if status is not Status.UNDECIDED or need is None else round(need * per_image),
            details={**v.details, "sequential": run.check_summary(c.id)},
        )
    return out
