"""The one choice between a full and a sequential run, made once when the session is built:
a `Decider` says how the cube is asked and how the checks are decided, behind one
interface, so that no other place asks "is this run sequential".

    FixedDecider       asks the whole cube once; the fixed-sample family (gate/evaluate.py)
    SequentialDecider  asks it batch by batch (driver.py); group-sequential looks
                       (gate/sequential.py)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from medrcube.sequential.plan import SequentialPlan

# The evaluation (gate.evaluate) and the looks (gate.sequential, whose levels import
# scipy.special) are imported where a verdict is taken, after the last answer: the session
# builds its decider before the first request, and start-up should not pay for them.
if TYPE_CHECKING:
    from medrcube.cube.item import Cube
    from medrcube.gate.checks import Check
    from medrcube.gate.verdict import Verdict
    from medrcube.records import GradedRecord
    from medrcube.sequential.driver import AskFn, SequentialRun, SpendFn


class Decider(Protocol):
    """How a run asks its cube and decides its checks."""

    async def ask(self, cube: Cube, checks: Sequence[Check], ask: AskFn, *, ask_baseline: AskFn | None = None,
                  baseline_records: Sequence[GradedRecord] | None = None, spend: SpendFn | None = None) -> None:
        """Ask the cube through `ask` (and a baseline model through `ask_baseline`)."""

    def verdicts(self, checks: Sequence[Check], records: Sequence[GradedRecord],
                 baseline: Sequence[GradedRecord] | None, *, baseline_error: str | None = None) -> dict[str, Verdict]:
        """Every check's verdict, by check id."""

    def family(self) -> tuple[Any, ...]:
        """The evidence of the fixed-sample family the last `verdicts` decided (gate.evaluate:
        a site check joins it, decide_joining); empty when no check was decided that way."""

    def guarantee_note(self) -> str:
        """What this way of deciding adds to the gate's guarantee sentence."""

    def sampling(self) -> dict[str, Any] | None:
        """How the run sampled the cube (gate.json `sampling`), or None for a full run."""


class FixedDecider:
    """The full run: every item asked, every check decided by its fixed-sample rule.
    `collect_family`: how the family's evidence is collected (gate.evaluate.collect_each when None)."""

    def __init__(self, collect_family: Any = None) -> None:
        self._family: tuple[Any, ...] = ()
        self.collect_family = collect_family

    async def ask(self, cube: Cube, checks: Sequence[Check], ask: AskFn, *, ask_baseline: AskFn | None = None,
                  baseline_records: Sequence[GradedRecord] | None = None, spend: SpendFn | None = None) -> None:
        await ask(cube)
        if ask_baseline is not None:
            await ask_baseline(cube)

    def verdicts(self, checks: Sequence[Check], records: Sequence[GradedRecord],
                 baseline: Sequence[GradedRecord] | None, *, baseline_error: str | None = None) -> dict[str, Verdict]:
        from medrcube.gate.evaluate import collect_each, evaluate_gate

        result = evaluate_gate(checks, records, baseline, baseline_error=baseline_error,
                               collect_family=self.collect_family or collect_each)
        self._family = result.evidences
        return result.by_id()

    def family(self) -> tuple[Any, ...]:
        return self._family

    def guarantee_note(self) -> str:
        return ""

    def sampling(self) -> dict[str, Any] | None:
        return None


@dataclass
class SequentialDecider:
    """`--sequential`: images in a seeded order, each check looked at a few times and
    analysed on all its images unless the gate's verdict is final first."""

    plan: SequentialPlan
    collect_family: Any = field(default=None, repr=False)  # as FixedDecider's, for the checks decided at the end
    run: SequentialRun | None = field(default=None, repr=False)
    _family: tuple[Any, ...] = field(default=(), repr=False)

    async def ask(self, cube: Cube, checks: Sequence[Check], ask: AskFn, *, ask_baseline: AskFn | None = None,
                  baseline_records: Sequence[GradedRecord] | None = None, spend: SpendFn | None = None) -> None:
        from medrcube.sequential.driver import run_sequential

        self.run = await run_sequential(cube, checks, self.plan, ask, ask_baseline=ask_baseline,
                                        baseline_records=baseline_records, spend=spend)

    def verdicts(self, checks: Sequence[Check], records: Sequence[GradedRecord],
                 baseline: Sequence[GradedRecord] | None, *, baseline_error: str | None = None) -> dict[str, Verdict]:
        """The looks' verdicts; a check without a track (nothing answerable in its scope)
        and a regression check whose baseline is missing are decided as in a full run."""
        from medrcube.gate.evaluate import collect_each, evaluate_gate
        from medrcube.gate.kinds import needs_baseline
        from medrcube.gate.sequential import sequential_verdicts

        if self.run is None:
            raise RuntimeError("SequentialDecider.verdicts before ask")
        out = sequential_verdicts((t.looks for t in self.run.tracks.values()), self.run.notes())
        rest = [c for c in checks if c.id not in out or (baseline_error and needs_baseline(c.kind))]
        if rest:
            result = evaluate_gate(rest, records, baseline, baseline_error=baseline_error,
                                   collect_family=self.collect_family or collect_each)
            self._family = result.evidences
            out.update(result.by_id())
        return {c.id: out[c.id] for c in checks}

    def family(self) -> tuple[Any, ...]:
        # A site check in a sequential run joins only the checks decided at the end by the
        # fixed-sample rule (most are decided by their looks): its own level is unchanged.
        return self._family

    def guarantee_note(self) -> str:
        return ("; sequential run: every check looked at on a few planned fractions of its images and analysed on "
                "all of them, its levels from an alpha-spending function (docs/guarantees.md)")

    def sampling(self) -> dict[str, Any] | None:
        return self.run.to_dict() if self.run is not None else None


def decider_for(plan: SequentialPlan | None, collect_family: Any = None) -> Decider:
    """The run's decider: sequential when a plan is given (--sequential), else the full run.
    `collect_family` (gate.evaluate.CollectFamily): how the family's evidence is collected at the
    end; each check's in turn when None."""
    return SequentialDecider(plan, collect_family) if plan is not None else FixedDecider(collect_family)
