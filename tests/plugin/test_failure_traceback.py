"""plugin/outcome.traceback_from_the_test: a decided failure's traceback cut at the case's own
function before pytest formats it gives the very report pytest makes from the whole traceback.

A real pytest item, run through pytest's own runner hook (so that the traceback holds the
runner's and pluggy's frames above the test, as in a gate run), failed as `enforce` fails a
case: `pytest.fail(..., pytrace=False)` from a helper below the test function."""

from __future__ import annotations

import pytest

from medrcube.plugin.outcome import traceback_from_the_test

SOURCE = """
import pytest

def enforce(text, pytrace):
    pytest.fail(text, pytrace=pytrace)

def test_case():
    enforce("cell/Chest/X-Ray/Disease Diagnosis: accuracy 0.412 below 0.6\\n  worst items: q1, q2", PYTRACE)
"""


def _reports(pytester: pytest.Pytester, pytrace: bool) -> tuple[object, object, int, int]:
    pytester.makeini("[pytest]\naddopts = -p no:medrcube\n")  # a plain pytest item: the gate has no part in it
    item = pytester.getitem(SOURCE.replace("PYTRACE", str(pytrace)), funcname="test_case")
    item.ihook.pytest_runtest_setup(item=item)
    try:
        whole = pytest.CallInfo.from_call(lambda: item.ihook.pytest_runtest_call(item=item), when="call")
        cut = pytest.CallInfo.from_call(lambda: item.ihook.pytest_runtest_call(item=item), when="call")
    finally:
        item.ihook.pytest_runtest_teardown(item=item, nextitem=None)
    traceback_from_the_test(item, cut.excinfo)
    assert whole.excinfo is not None and cut.excinfo is not None
    return (item.repr_failure(whole.excinfo), item.repr_failure(cut.excinfo), len(whole.excinfo.traceback),
            len(cut.excinfo.traceback))


def test_the_cut_failure_is_reported_as_the_whole_one(pytester: pytest.Pytester) -> None:
    whole, cut, before, after = _reports(pytester, pytrace=False)
    assert after < before  # the runner's frames above the test are gone
    assert str(cut) == str(whole)
    crash = (cut.reprcrash.path, cut.reprcrash.lineno, cut.reprcrash.message)
    assert crash == (whole.reprcrash.path, whole.reprcrash.lineno, whole.reprcrash.message)  # JUnit's message reads it
    assert "accuracy 0.412 below 0.6" in str(cut)


def test_a_failure_with_its_traceback_is_left_as_it_is(pytester: pytest.Pytester) -> None:
    """Only the message-only failures `enforce` raises are cut: a full traceback is pytest's to cut."""
    _, _, before, after = _reports(pytester, pytrace=True)
    assert after == before
