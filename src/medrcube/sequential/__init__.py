"""Sequential qualification: ask the cube image by image in a seeded random order and stop
each check as soon as its anytime-valid test decides.

How a run goes:
1. The cube's units (the items of one image, or an imageless item) are put in the seeded
   order of `run.order` (a hash permutation: every process and every restart computes
   the same order).
2. Every check that can stop early (accuracy of a cell, a slice or the whole cube;
   regression against a baseline) gets a `metrics.sequential.SequentialTest`: betting
   tests of "the bound is met" and "the bound is missed" over the check's images.
3. Batch after batch, the next units holding an item some open *required* check reads
   are asked, each cut down to the items such checks read (all requested variants,
   through the caller's `ask`, which goes through the response store: cached answers are
   free and come first), and every open check is fed the new units in order. A required
   check without a sequence (credibility, image dependence, position, robustness, site
   checks) is decided by its fixed-sample rule, which needs its whole scope: its items
   are always read.
4. A required check stops holding units when it is decided, when no outcome of the
   images left could decide it (`futile`), or when, growing as it has so far, it would
   not decide by its last image (`hopeless`: a planning projection; it decides nothing).
   A check one of whose images went unasked stops there (`broken`): fed only the images
   other checks wanted, its stream would no longer be a random sample of its scope.
5. The run stops when no required check holds units, the cube is exhausted, or a budget
   (`max_requests`, `max_cost`) would be passed by the next batch; a check still
   undecided then is UNDECIDED, with the images it would still need.

Family: every pass claim is tested at its own level (an intersection-union argument: the
gate claims QUALIFIED only when all of them hold, which needs no adjustment); the fail
claims of the required sequential checks are decided together by closed testing with
image-weighted averaged e-values (`metrics.sequential.closed_rejections`), whose
family-wise error is at most alpha at any stopping time, where Holm's step-down would
need the p-values of a fixed sample.

xdist: every worker runs this same loop. Decisions are a function of the records only,
and the records of a key are one stored response for every process, so the workers take
the same decisions batch by batch; within a batch each worker asks its shard first (the
caller's `ask` does that), so the requests are split, not repeated.
"""

from medrcube.sequential.driver import SequentialRun, run_sequential
from medrcube.sequential.verdicts import SEQUENTIAL_GUARANTEE, guarantee_note, sequential_verdicts

__all__ = ["SEQUENTIAL_GUARANTEE", "SequentialRun", "guarantee_note", "run_sequential", "sequential_verdicts"]
