"""One check's sequence in a sequential run (`Track`): its test, its scope, when it stops
holding images, how an asked unit feeds it, and how the family decides the fail claims."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from medrcube.gate.checks import ACCURACY_KINDS, Check, CheckKind
from medrcube.gate.evidence import effective_bound
from medrcube.metrics.accuracy import chance_level_of_options
from medrcube.metrics.sequential import (
    Prior,
    SequentialTest,
    accuracy_test_start,
    closed_levels,
    drop_test_start,
    images_needed,
    projected_log_wealth,
)
from medrcube.records import NOT_ANSWERED, GradedRecord, Outcome
from medrcube.run.order import Unit

if TYPE_CHECKING:
    from medrcube.cube.item import Cube

SEQUENTIAL_KINDS = ACCURACY_KINDS | {CheckKind.REGRESSION}
PROJECTION_AFTER = 10  # images a check must have before its projection may stop it
PRIOR_IMAGES = 8.0  # pseudo-images of the pooled accuracy in a bet


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
    broken: bool = False  # an image of its scope went unasked: its stream ends there
    family_weight: float = 0.0  # its weight in the fail claims' family (0: outside it)

    @property
    def decided(self) -> bool:
        return self.test.decision is not None

    @property
    def open(self) -> bool:
        """Still fed: undecided, and its stream unbroken."""
        return not self.decided and not self.broken

    def reach(self) -> tuple[float, float]:
        """The largest log wealth each test (pass, fail) could still reach if every image
        left in the check's scope came out as well for it as possible: a bet is at most its
        test's cap and an outcome at most its largest value, so a wealth grows by at most
        log(1 + cap * y_max) per image."""
        left = self.available_units - self.used_units
        up, down = self.test.up, self.test.down
        # The largest outcome of each side is 1 - (its largest loss) on the accuracy scale
        # ([-b, 1 - b] and [-(1 - b), b]) and on the drop scale ([-(1-m)/(1+m), 1], [-1, (1-m)/(1+m)]).
        if self.check.kind is CheckKind.REGRESSION:
            up_max, down_max = 1.0, up.max_loss
        else:
            up_max, down_max = down.max_loss, up.max_loss
        return (up.log_wealth + left * math.log1p(up.cap * up_max),
                down.log_wealth + left * math.log1p(down.cap * down_max))

    def futile(self) -> bool:
        """Whether neither claim can be reached any more (`reach`; the fail claim at best
        when its own e-value reaches 1/alpha). Such a check stops holding images; it ends
        undecided, which it would have been anyway (no decision is made by this)."""
        if self.decided:
            return False
        reach_pass, reach_fail = self.reach()
        return reach_pass < math.log(1.0 / self.test.alpha_pass) and reach_fail < math.log(1.0 / self.test.alpha_fail)

    def prior(self, pooled: float | None) -> Prior | None:
        """Pseudo-images for the bets of an accuracy check, from the accuracy `pooled` of
        every item asked so far: an image of this check holds m items on average (m
        independent items right with probability p, centred at the bound b, scaled by the
        largest image M): mean m (p - b) / M, second moment (m p (1 - p) + m^2 (p - b)^2) / M^2."""
        if pooled is None or self.check.kind is CheckKind.REGRESSION:
            return None
        m = len(self.scope) / max(self.available_units, 1)
        p, b, big = pooled, self.centre, float(self.max_size)
        return Prior(m * (p - b) / big, (m * p * (1 - p) + m * m * (p - b) ** 2) / (big * big), PRIOR_IMAGES)

    def hopeless(self, fail_level: float) -> bool:
        """Whether, growing as it has so far (a standard error optimistic), neither test
        would reach its level by the check's last image: the pass test 1/alpha, the fail
        test `fail_level` (what its family demands now). Such a check stops holding images
        (it is still fed until an image of its scope goes unasked); like `futile`, this
        decides nothing."""
        if self.decided or self.used_units < PROJECTION_AFTER:
            return False
        left = self.available_units - self.used_units
        return (projected_log_wealth(self.test.up, left) < math.log(1.0 / self.test.alpha_pass)
                and projected_log_wealth(self.test.down, left) < math.log(fail_level))

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


def build_tracks(cube: Cube, checks: Sequence[Check], units: Sequence[Unit]) -> dict[str, Track]:
    seq = [c for c in checks if c.kind in SEQUENTIAL_KINDS and (c.kind is not CheckKind.REGRESSION or
                                                                 c.params.get("margin") is not None)]
    unit_of = {it.id: u.key for u in units for it in u.items}
    tracks: dict[str, Track] = {}
    for c in seq:
        # Check.selects is typed for a GradedRecord but reads only part, modality and task,
        # which an Item carries too (a protocol for both belongs in gate/checks.py).
        # Items whose image is restricted are never graded in the standard variant: they are
        # no part of a check's stream and no reason to hold a unit.
        in_scope = [it for it in cube.items if c.selects(it) and cube.image_available(it)]  # type: ignore[arg-type]
        if not in_scope:
            continue
        per_unit: dict[str, int] = {}
        for it in in_scope:
            per_unit[unit_of[it.id]] = per_unit.get(unit_of[it.id], 0) + 1
        max_size = max(per_unit.values())
        alpha = c.alpha  # the fixed-sample rule's one-sided level, kept by the sequential test
        test: SequentialTest
        if c.kind is CheckKind.REGRESSION:
            centre = float(c.params["margin"])
            test = drop_test_start(centre, alpha, alpha, max_size, fail_by_family=c.required)
        else:
            # The gate's own rule (bound raised to chance + above_chance), on the items in scope.
            centre = effective_bound(c, chance_level_of_options(len(it.options) for it in in_scope))[0]
            test = accuracy_test_start(centre, alpha, alpha, max_size, fail_by_family=c.required)
        track = Track(c, frozenset(it.id for it in in_scope), max_size, len(per_unit), test, centre)
        if c.required and track.reach()[1] >= math.log(1.0 / alpha):
            # Weighed by its images, fixed before any answer; a fail claim that perfect
            # evidence on every image could not reach is left out of the family.
            track.family_weight = float(len(per_unit))
        tracks[c.id] = track
    return tracks


def _feed(track: Track, records: Sequence[GradedRecord], baseline: dict[str, GradedRecord] | None,
          pooled: float | None) -> None:
    """Add the records of one asked unit (all its items in the track's scope) to an open track."""
    mine = [r for r in records if r.item_id in track.scope and r.variant == "standard"]
    if not mine:
        return
    track.asked += sum(r.outcome is not Outcome.UNAVAILABLE for r in mine)
    track.errors += sum(r.outcome in NOT_ANSWERED for r in mine)
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
    track.test = track.test.update(centred, track.prior(pooled))
    if track.decided:
        track.stop = f"decided ({track.test.decision}) after {track.used_units} images"


def feed_unit(tracks: dict[str, Track], unit: Unit, asked: frozenset[str], records: Sequence[GradedRecord],
               baseline: dict[str, GradedRecord] | None, pooled: float | None) -> None:
    """Walk one unit of the order past every open track, then let the family decide.

    A track whose scope items on this unit were all asked takes the unit; one with an item
    of its scope left unasked (no open required check needed it) ends its stream here: fed
    from then on with only the images other checks wanted, its stream would no longer be a
    random sample of its scope (images kept for a hard cell would bias a slice), so it
    stops, undecided unless it was decided before. Checks that hold units are never cut,
    since every item of their scope is needed while they are open."""
    ids = {it.id for it in unit.items}
    fed = False
    for t in tracks.values():
        if not t.open:
            continue
        mine = t.scope & ids
        if not mine:
            continue
        if mine <= asked:
            _feed(t, records, baseline, pooled)
            fed = True
        else:
            t.broken = True
            t.stop = t.stop or STREAM_ENDED
    if fed:  # only a fed unit moves a wealth
        family_decides(tracks)


STREAM_ENDED = "its stream ended: an image of its scope was not asked in full (no open required check needed it)"
FUTILE = "cannot decide: too few images left in its scope for either claim"
HOPELESS = "released: at its rate so far it would not decide by the last image of its scope"


def released(t: Track, levels: dict[str, float]) -> bool:
    """Whether an open required track no longer holds images (`futile` or `hopeless`);
    the first time, its stop reason says which."""
    if t.futile():
        t.stop = t.stop or FUTILE
        return True
    if t.hopeless(levels.get(t.check.id, 1.0 / t.test.alpha_fail)):
        t.stop = t.stop or HOPELESS
        return True
    return False


def fail_levels(tracks: dict[str, Track]) -> dict[str, float]:
    """The e-value each fail claim of the family needs now (`closed_levels`)."""
    family = [t for t in tracks.values() if t.family_weight > 0]
    levels = closed_levels([t.test.e_fail for t in family], [t.test.alpha_fail for t in family],
                           [t.family_weight for t in family])
    return {t.check.id: lv for t, lv in zip(family, levels, strict=True)}


def family_decides(tracks: dict[str, Track]) -> None:
    """Decide the fail claims of the required tracks together: closed testing with
    averaged e-values rejects a claim whose e-value reaches its level (`fail_levels`)."""
    family = [t for t in tracks.values() if t.family_weight > 0]
    if not any(t.test.e_fail >= 1.0 / t.test.alpha_fail and not t.decided for t in family):
        return  # no undecided fail claim has reached its own level: none can be rejected
    levels = fail_levels(tracks)
    for t in family:
        if not t.decided and t.test.e_fail >= levels[t.check.id]:
            t.test = t.test.decide_fail()
            t.stop = f"decided (fail) after {t.used_units} images"
