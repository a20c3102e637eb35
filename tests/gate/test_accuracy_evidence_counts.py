"""The accuracy checks' evidence is counted in one pass over the records (gate/evidence.py
`_accuracy`); these tests hold it to the metrics' own definitions, computed separately from
the standard records: accuracy(), clustered_accuracy(), chance_level(), the API error rate
and the few-images interval (with_finite over per-record units)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from medrcube.gate.checks import Check, CheckKind
from medrcube.gate.criteria import api_errors, prop_criterion, with_finite
from medrcube.gate.evidence import ByScope, collect
from medrcube.metrics.accuracy import accuracy, chance_level
from medrcube.metrics.clustered import METHOD as PROPORTION_METHOD
from medrcube.metrics.clustered import clustered_accuracy, image_key
from medrcube.records import Outcome

_OUTCOMES = list(Outcome)


def _check(max_error_rate: float, above_chance: float) -> Check:
    return Check(id="cell/Chest/X-Ray/Disease Diagnosis", kind=CheckKind.CELL, metric="accuracy", part="Chest",
                 modality="X-Ray", task="Disease Diagnosis", bound=0.6, rule="lower_bound", confidence=0.95,
                 min_n=1, max_error_rate=max_error_rate, above_chance=above_chance)


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(_OUTCOMES), st.integers(0, 12), st.sampled_from([2, 3, 4, 5]),
                               st.sampled_from(["standard", "standard", "blind", "shuffled"])), max_size=80),
       max_error_rate=st.sampled_from([0.0, 0.2, 1.0]), above_chance=st.sampled_from([0.0, 0.3]))
def test_one_pass_evidence_is_the_metrics_of_the_standard_records(rec, rows, max_error_rate, above_chance) -> None:
    records = [rec(f"q{i:03d}", outcome, image=f"img/{image}.png", n_options=n, variant=variant)
               for i, (outcome, image, n, variant) in enumerate(rows)]
    check = _check(max_error_rate, above_chance)
    ev = collect(check, records)
    std = [r for r in records if r.variant == "standard"]
    rate, error = api_errors(check, std)
    assert ev.error_rate == rate
    if error is not None:
        assert ev.error == error.error
        return
    a, ci = accuracy(std, check.confidence), clustered_accuracy(std, check.confidence)
    assert ev.n == a.n
    assert ev.chance == chance_level(std)
    if a.acc is None:
        assert ev.observed is None and not ev.criteria
        return
    assert ev.observed == a.acc
    assert ev.details["clustered"] == ci.to_dict()
    assert (ev.details["correct"], ev.details["unparsed"], ev.details["refused"], ev.details["errors"],
            ev.details["unavailable"]) == (a.correct, a.unparsed, a.refused, a.errors, a.unavailable)
    assert ev.details["wilson_unclustered"] == [a.lo, a.hi]
    # The criterion and the few-images interval from per-record units, as every other kind gives them.
    base = replace(ev, criteria=(prop_criterion("accuracy", ci, ev.bound),), interval=(ci.lo, ci.hi), details={},
                   facts="", method=PROPORTION_METHOD)
    again = with_finite(base, ((image_key(r), float(r.correct)) for r in std if r.graded))
    assert again.criteria == ev.criteria
    assert again.interval == ev.interval
    assert again.method == ev.method


_CELLS = [("Chest", "X-Ray", "Disease Diagnosis"), ("Chest", "X-Ray", "Modality Recognition"),
          ("Chest", "CT", "Disease Diagnosis"), ("Brain", "MRI", "Disease Diagnosis")]


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(_OUTCOMES), st.sampled_from(_CELLS), st.integers(0, 8),
                               st.sampled_from([2, 4]), st.sampled_from(["standard", "standard", "blind"])),
                     max_size=90),
       max_error_rate=st.sampled_from([0.0, 1.0]))
def test_the_familys_counts_per_cell_give_each_checks_own_evidence(rec, rows, max_error_rate) -> None:
    """Grouped by scope (ByScope), a family's accuracy checks read their counts summed from
    each cell's; each check's evidence is the one it collects from its own records alone,
    for the whole cube, a part, a task and a cell, whatever the errors."""
    records = [rec(f"q{i:03d}", outcome, part=cell[0], modality=cell[1], task=cell[2], image=f"img/{image}.png",
                   n_options=n, variant=variant)
               for i, (outcome, cell, image, n, variant) in enumerate(rows)]
    scoped = ByScope(records)
    for kind, part, modality, task in [(CheckKind.OVERALL, None, None, None), (CheckKind.SLICE, "Chest", None, None),
                                       (CheckKind.SLICE, None, None, "Disease Diagnosis"),
                                       (CheckKind.CELL, "Chest", "X-Ray", "Disease Diagnosis")]:
        check = replace(_check(max_error_rate, 0.0), id=f"{kind}/{part}/{task}", kind=kind, part=part,
                        modality=modality, task=task)
        assert collect(check, scoped) == collect(check, records)
