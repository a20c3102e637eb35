"""Sequential qualification: ask the cube image by image in a seeded random order, look at
every check a few times on the way, and stop once the gate's verdict is final.

How a run goes:
1. The cube's units (the items of one image, or an imageless item) are put in the seeded
   order of `run.order` (a hash permutation: every process and every restart computes
   the same order).
2. Every check gets a track (`tracks.py`): its scope, the images of it fed so far, and
   its looks at planned fractions of its images (`plan.py`: 10%, 20%, ..., 50%, then 100%,
   the final analysis). At a look the check's own fixed-sample rule is computed on its
   images so far; gate/sequential.py decides what the looks decide (alpha spent by an
   alpha-spending function, pass claims intersection-union, fail claims by Holm at the
   spent levels). Every kind of check is handled alike: cells, slices, credibility,
   robustness, regression, site checks.
3. Batch after batch (`driver.py`), the next units holding an item some holding required
   check reads are asked, each cut down to those items (all requested variants, through
   the caller's `ask`, which goes through the response store).
4. A required check holds images until it is decided, has had its final analysis, or is
   stopped for futility (gate/sequential.py: its images can no longer change the gate's
   verdict; it stays undecided, never a pass). An optional check is fed while its stream is
   whole (an image of its scope left unasked ends it: its stream would no longer be a
   random sample).
5. The run stops when the gate's verdict is final (a required check failed: NOT
   QUALIFIED; every required check passed: QUALIFIED), when no required check holds
   images, or when a budget (`max_requests`, `max_cost`) would be passed by the next
   batch; the checks still open are reported as not asked.

The choice between this and a full run is made once, at build time (`decider.py`).

xdist: every worker runs this same loop. Decisions are a function of the records only,
and the records of a key are one stored response for every process, so the workers take
the same decisions batch by batch; within a batch each worker asks its shard first (the
caller's `ask` does that), so the requests are split, not repeated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as the type checker sees them
    from medrcube.sequential.decider import Decider, FixedDecider, SequentialDecider, decider_for
    from medrcube.sequential.driver import SequentialRun, run_sequential
    from medrcube.sequential.plan import SequentialPlan

# Imported on first use (PEP 562): `medrcube.sequential.plan` is read by the pytest
# plugin's options at every pytest start, and the decider pulls the gate's evaluation
# (numpy; scipy.special for a sequential run's looks) that a run needs only once it decides.
_WHERE = {"Decider": "decider", "FixedDecider": "decider", "SequentialDecider": "decider", "decider_for": "decider",
          "SequentialRun": "driver", "run_sequential": "driver", "SequentialPlan": "plan"}

__all__ = ["Decider", "FixedDecider", "SequentialDecider", "SequentialPlan", "SequentialRun", "decider_for",
           "run_sequential"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'medrcube.sequential' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"medrcube.sequential.{_WHERE[name]}"), name)
