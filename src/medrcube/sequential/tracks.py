"""One check's sequence in a sequential run (`Track`): its scope, the images it has been
fed in the run's order, and its looks (taken here, decided by gate/sequential.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from medrcube.gate.checks import Check, CheckKind
from medrcube.gate.evidence import collect
from medrcube.gate.sequential import CheckLooks, Look
from medrcube.records import GradedRecord
from medrcube.run.order import Unit
from medrcube.sequential.plan import SequentialPlan, look_images

if TYPE_CHECKING:
    from medrcube.cube.item import Cube, Item

STREAM_ENDED = "its stream ended: an image of its scope was not asked in full (no open required check needed it)"


@dataclass
class Track:
    """One check's sequence: its scope, what it was fed, its looks and why it stopped."""

    check: Check
    scope: frozenset[str]  # item ids the check reads
    available_units: int  # images (units) of the cube in the check's scope
    looks: CheckLooks
    fed: list[list[GradedRecord]] = field(default_factory=list)  # per image fed, in order: its records
    broken: bool = False  # an image of its scope went unasked: its stream ends there
    stop: str = ""  # why the sequence ended, when it ended before its decision or final look

    @property
    def used_units(self) -> int:
        return len(self.fed)

    @property
    def holding(self) -> bool:
        """Still asking for its images: undecided, before its final analysis, not stopped for
        futility, stream whole."""
        return (self.looks.status is None and not self.looks.final and not self.broken
                and self.looks.futile_at is None)

    def due(self) -> int | None:
        """The images its next look needs (None once every look is taken)."""
        if self.looks.final:
            return None
        return look_images(self.looks.fractions[len(self.looks.looks)], self.available_units)

    def take_looks(self, baseline: Sequence[GradedRecord] | None) -> bool:
        """Take every look its fed images allow; whether one was taken. A look sees exactly
        the images its planned fraction names (the first ones in the order)."""
        taken = False
        while (need := self.due()) is not None and self.used_units >= need:
            records = [r for unit in self.fed[:need] for r in unit]
            evidence = collect(self.check, records, baseline if self.check.kind is CheckKind.REGRESSION else None)
            self.looks.looks.append(Look.of(evidence, need, self.available_units))
            self.looks.evidence = evidence
            taken = True
        return taken

    def settle(self, baseline: Sequence[GradedRecord] | None) -> None:
        """At the end of the run: a check that took no look gets its evidence on what it
        was fed (for its numbers; it stays undecided)."""
        if self.looks.evidence is None:
            records = [r for unit in self.fed for r in unit]
            self.looks.evidence = collect(self.check, records,
                                          baseline if self.check.kind is CheckKind.REGRESSION else None)


def build_tracks(cube: Cube, checks: Sequence[Check], units: Sequence[Unit], plan: SequentialPlan) -> dict[str, Track]:
    """A track for every check whose scope holds an answerable item."""
    unit_of = {it.id: u.key for u in units for it in u.items}
    # Items whose image is restricted are never graded in the standard variant: they hold
    # no unit. A check selects by part, modality and task, so it is matched against cells.
    by_cell: dict[tuple[str, str, str], list[Item]] = {}
    for it in cube.items:
        if cube.image_available(it):
            by_cell.setdefault(it.cell, []).append(it)
    tracks: dict[str, Track] = {}
    for c in checks:
        in_scope = [it for cell, items in by_cell.items() if _selects(c, cell) for it in items]
        if not in_scope:
            continue
        n_units = len({unit_of[it.id] for it in in_scope})
        looks = CheckLooks(c, plan.fractions_for(n_units), futility=plan.futility)
        tracks[c.id] = Track(c, frozenset(it.id for it in in_scope), n_units, looks)
    return tracks


def _selects(check: Check, cell: tuple[str, str, str]) -> bool:
    part, modality, task = cell
    return ((check.part is None or check.part == part) and (check.modality is None or check.modality == modality)
            and (check.task is None or check.task == task))


def tracks_by_item(tracks: dict[str, Track]) -> dict[str, list[Track]]:
    """The tracks whose scope holds each item (to walk a unit past only the tracks it feeds)."""
    out: dict[str, list[Track]] = {}
    for t in tracks.values():
        for item_id in t.scope:
            out.setdefault(item_id, []).append(t)
    return out


def feed_unit(by_item: dict[str, list[Track]], unit: Unit, asked: frozenset[str],
              records: Sequence[GradedRecord]) -> None:
    """Walk one unit of the order past every track of its items that is still fed.

    A track whose scope items on this unit were all asked takes the unit (all its records
    in scope, every variant); one with an item of its scope left unasked (no holding
    check needed it) ends its stream here: fed from then on with only the images other
    checks wanted, its stream would no longer be a random sample of its scope. Holding
    checks are never cut, since every item of their scope is needed while they hold."""
    ids = {it.id for it in unit.items}
    touched = {id(t): t for item_id in ids for t in by_item.get(item_id, ())}
    for t in touched.values():
        if t.broken or t.looks.status is not None or t.looks.final:
            continue
        if t.scope & ids <= asked:
            t.fed.append([r for r in records if r.item_id in t.scope])
        else:
            t.broken = True
            t.stop = t.stop or (futility_note(t) if t.looks.futile_at is not None else STREAM_ENDED)


def futility_note(t: Track) -> str:
    """Why a check stopped for futility (gate/sequential.py `_futility`), for its verdict."""
    lk = t.looks
    at = lk.looks[lk.futile_at] if lk.futile_at is not None else None
    p_pass, p_fail = lk.power_left or (float("nan"), float("nan"))
    return (f"futility stop at look {(lk.futile_at or 0) + 1} ({at.images if at else 0} images): its final analysis "
            f"would, as far as its images so far tell, pass it with probability {p_pass:.2g} and fail it with "
            f"{p_fail:.2g} (futility threshold {lk.futility:g}; a pass that can no longer make the gate QUALIFIED "
            "counts for nothing); it stopped asking for images: no claim made, undecided, never a pass")
