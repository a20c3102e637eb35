"""metrics_summary.json from sums fed as the records come (rundir/summary.SummaryTally):
the same document, byte for byte, in whatever order and batches the records were fed;
never from sums of other records (rundir/files.GradedAhead.summary)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from medrcube.cube import load_cube
from medrcube.models.baselines import RandomAdapter
from medrcube.records import GradedRecord, Outcome
from medrcube.run.runner import run_cube
from medrcube.rundir.files import GradedAhead
from medrcube.rundir.jsontext import indented
from medrcube.rundir.summary import SummaryTally, metrics_summary
from medrcube.testing.gencube import generate_release_cube


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[GradedRecord]:
    where = tmp_path_factory.mktemp("tally")
    cube = load_cube(str(generate_release_cube(where / "cube", n_items=90, n_datasets=3, n_images=25,
                                               image_size=32, restricted_fraction=0.15, seed=11)))
    run = run_cube(cube, RandomAdapter(seed=4), variants="standard,blind,shuffled:2")
    assert {r.variant for r in run.records} == {"standard", "blind", "shuffled"}
    assert any(r.outcome is Outcome.UNAVAILABLE for r in run.records)
    return list(run.records)


def _text(doc: dict[str, object] | None) -> str:
    return indented(doc)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fed_in_any_order_and_batches_the_document_is_the_counted_one(records: list[GradedRecord],
                                                                      data: st.DataObject) -> None:
    order = data.draw(st.permutations(range(len(records))))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(records)), max_size=6)))
    tally = SummaryTally()
    edges = [0, *cuts, len(records)]
    for a, b in zip(edges, edges[1:], strict=False):
        tally.add([records[i] for i in order[a:b]])
    variants = ["standard", "blind", "shuffled:2"]
    assert _text(tally.document(records, variants)) == _text(metrics_summary(records, variants))


def test_sums_of_other_records_are_never_used(records: list[GradedRecord]) -> None:
    ahead = GradedAhead()
    ahead.add(records)
    assert _text(ahead.summary(records)) == _text(metrics_summary(records))
    # a record replaced after grading (a judge's reading): another object, so not these sums
    at = next(i for i, r in enumerate(records) if r.graded)
    judged = [*records[:at], dataclasses.replace(records[at], outcome=Outcome.WRONG), *records[at + 1:]]
    assert ahead.summary(judged) is None
    assert ahead.summary(records[1:]) is None  # one record fewer
    assert ahead.summary([*records[1:], records[-1]]) is None  # as many, one of them twice
    twice = GradedAhead()
    twice.add(records)
    twice.add(records[:1])  # one record fed twice: its sums counted it twice
    assert twice.summary(records) is None
    ahead.close()
    twice.close()
    assert _text(SummaryTally().document([])) == _text(metrics_summary([]))
