"""Attempts on one cube: the share of a check's pass level each attempt may spend.

A vendor who reruns a model at its bounds (new seeds, or one checkpoint after another)
gets more than one chance at a false QUALIFIED. The ledger of attempts (run/ledger.py)
numbers every gate run on a cube; the k-th attempt makes its pass claims at the one-sided
level alpha * share(k), with

    share(1) = 1,   share(k) = 1 / (2 (k - 1) k)  for k >= 2,

so that the shares of the first k attempts sum to 1.5 - 1/(2k) < 1.5. Whatever the
dependence between attempts (the same cube, the same model, checkpoints of one training
run), the chance that any of them says QUALIFIED for a model whose true value is below a
required bound is at most alpha * (1.5 - 1/(2k)) (a union bound over the attempts, each of
which is an intersection-union test at its own level): below 0.0375 with the shipped
confidence, however many attempts. The first attempt decides exactly as a gate without a
ledger does. Why 1.5 and not 2: the clustered interval's one-sided error is near, not
under, its nominal level on some designs (0.028 for 0.025 on the benchmark's cube,
benchmarks/RESULTS.md section 22), and the target is 5% over twenty attempts, so the later
attempts together spend half of alpha, not all of it.

Only pass claims spend: a fail claim of a later attempt keeps its level (rerunning buys a
vendor no wrong NOT QUALIFIED of a competitor, and the hospital's own reruns of a good
model should not get harder to fail a bad one). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

ACROSS = 1.5  # the shares of all attempts sum to less than this: the bound across attempts is ACROSS * alpha


def share(attempt: int) -> float:
    """The share of a check's pass level that attempt number `attempt` (1, 2, ...) spends."""
    if attempt < 1:
        raise ValueError(f"attempt numbers start at 1, got {attempt}")
    return 1.0 if attempt == 1 else 1.0 / (2 * (attempt - 1) * attempt)


def spent(attempts: int) -> float:
    """The shares of attempts 1..`attempts` together: 1.5 - 1/(2 attempts) (0 for none)."""
    return 0.0 if attempts < 1 else ACROSS - 1.0 / (2 * attempts)


@dataclass(frozen=True, slots=True)
class AttemptLevel:
    """What attempt `number` on a cube may claim, at a check's one-sided level `alpha`."""

    number: int
    alpha: float

    @property
    def pass_level(self) -> float:
        return self.alpha * share(self.number)

    @property
    def across(self) -> float:
        """The bound on a false QUALIFIED in any of the attempts 1..number."""
        return self.alpha * spent(self.number)

    def sentence(self) -> str:
        """One sentence for the verdict block, gate.json and report.html."""
        return (f"attempt {self.number} on this cube: pass claims at one-sided level {self.pass_level:.3g} "
                f"(share {share(self.number):.3g} of {self.alpha:.3g}); a QUALIFIED on any of these {self.number} "
                f"attempt(s) for a model below a required bound has probability at most {self.across:.3g} "
                f"(at most {ACROSS * self.alpha:.3g} over any number of attempts; docs/guarantees.md)")
