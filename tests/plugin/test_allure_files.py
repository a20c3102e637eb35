"""plugin/speed/allure_files.py: Allure's result and container files written by the C-encoding
writer are the files allure-python-commons writes itself, byte for byte once the case's own
uuids and times are set aside. Both runs are real pytest sessions with allure-pytest, in
subprocesses (allure-commons keeps its loggers in one process-wide plugin manager)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

CASES = '''
import allure
import pytest


@pytest.fixture
def resource():
    yield {"name": "r\\u00e9sum\\u00e9"}


@pytest.mark.parametrize("n", [1, 2])
def test_passes(resource, n):
    allure.dynamic.epic("Brain")
    allure.dynamic.parameter("observed", 0.4125, excluded=True)
    allure.dynamic.description("accuracy of cell/Brain/CT \\u2264 its bound")
    allure.attach('{"verdict": "pass"}', name="check and verdict", attachment_type=allure.attachment_type.JSON)


def test_fails():
    allure.dynamic.tag("cell")
    pytest.fail("FAIL: accuracy 0.41 < 0.6\\n  worst items: cx1, cx2", pytrace=False)


def test_skips():
    pytest.skip("UNDECIDED: too few items")


def test_raises():
    raise ValueError("an error's traceback, kept as allure keeps it")
'''

FAST = '''
import json
import os

from medrcube.plugin.speed.allure_files import encode_results_in_c


def pytest_sessionstart(session):
    given = encode_results_in_c()
    with open(os.environ["GIVEN_FILE"], "w") as fh:
        json.dump(given, fh)
'''

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r'"(start|stop)": \d+')
_THREAD = re.compile(r'("name": "thread",\s*"value": )"[^"]*"')  # the process's thread id: differs between runs


def _results(directory: Path) -> list[str]:
    """Each result and container file's text, its uuids and times set aside, in a stable order."""
    texts = []
    for path in directory.glob("*-*.json"):
        text = path.read_text(encoding="utf-8")
        texts.append(_TIME.sub(r'"\1": 0', _UUID.sub("U", text)))
    return sorted(_THREAD.sub(r'\1"T"', t) for t in texts)


@pytest.mark.parametrize("indent", ["", "1"])
def test_the_files_are_allures_own(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, indent: str) -> None:
    monkeypatch.setenv("ALLURE_INDENT_OUTPUT", indent)
    pytester.makepyfile(test_cases=CASES)
    plain_dir, fast_dir = pytester.path / "plain", pytester.path / "fast"
    pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--alluredir={plain_dir}").assert_outcomes(
        passed=2, failed=2, skipped=1)
    pytester.makeconftest(FAST)
    given_file = pytester.path / "given.json"
    monkeypatch.setenv("GIVEN_FILE", str(given_file))
    pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--alluredir={fast_dir}").assert_outcomes(
        passed=2, failed=2, skipped=1)
    # Given to allure's one file logger, unless indented output is asked for (allure's writer then).
    assert json.loads(given_file.read_text()) == (0 if indent else 1)
    plain, fast = _results(plain_dir), _results(fast_dir)
    assert len(plain) >= 5 * 2  # every case's result and its fixtures' containers
    assert fast == plain
    # The JSON is allure's: compact unless indented, non-ASCII text written as it is.
    sample = next(t for t in fast if "Brain" in t)
    assert ("\n" in sample) == bool(indent)
    assert "\u2264" in sample
    assert json.loads(sample)["status"] == "passed"
