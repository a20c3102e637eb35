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


# -- the files handed to a writer interpreter (`hand_files_to_a_writer`) -----------------------

MANY_CASES = '''
import allure
import pytest


@pytest.fixture
def resource():
    yield {"name": "r\\u00e9sum\\u00e9"}


@pytest.mark.parametrize("n", range(24))
def test_many(resource, n):
    allure.dynamic.epic("Chest")
    allure.attach('{"n": %d, "bound": "\\u2264 0.6"}' % n, name="check and verdict",
                  attachment_type=allure.attachment_type.JSON)
    allure.attach(b"id,score\\ncx%d,0.1\\n" % n, name="worst items", attachment_type=allure.attachment_type.CSV)
    if n % 5 == 0:
        pytest.fail("FAIL: accuracy 0.41 < 0.6", pytrace=False)
'''

WRITER = '''
import json
import os

from medrcube.plugin.speed import allure_files


def pytest_sessionstart(session):
    allure_files.encode_results_in_c()


def pytest_collection_finish(session):
    handed = allure_files.hand_files_to_a_writer(session.config, len(session.items))
    writers = [w.process.pid for w in allure_files._WRITERS if w.process is not None]
    with open(os.environ["GIVEN_FILE"], "w") as fh:
        json.dump({"handed": handed, "writers": writers}, fh)


def pytest_runtest_logfinish(nodeid):
    # The writer killed after the tenth case (WRITER_KILL): what it was given is written by the process.
    if os.environ.get("WRITER_KILL") and nodeid.endswith("[10]"):
        allure_files.send_pending_files()
        for w in allure_files._WRITERS:
            w.process.kill()
            w.process.wait()
            with open(os.environ["WRITER_KILL"], "w") as fh:
                fh.write(str(len(w.handed)))
'''


def _attachments(directory: Path) -> list[bytes]:
    return sorted(p.read_bytes() for p in directory.glob("*-attachment.*"))


@pytest.mark.parametrize("kill", [False, True], ids=["writer", "writer-killed"])
def test_files_handed_to_a_writer_are_allures_own(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                  kill: bool) -> None:
    """Every result, container and attachment file as allure writes it itself, byte for byte
    (uuids and times aside), when they go through the writer interpreter; and when the writer is
    killed midway, the process writes what it handed over: nothing is missing, nothing half-written."""
    monkeypatch.delenv("ALLURE_INDENT_OUTPUT", raising=False)
    pytester.makepyfile(test_many=MANY_CASES)
    plain_dir, handed_dir = pytester.path / "plain", pytester.path / "handed"
    pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--alluredir={plain_dir}").assert_outcomes(
        passed=19, failed=5)
    pytester.makeconftest(WRITER)
    given_file = pytester.path / "given.json"
    monkeypatch.setenv("GIVEN_FILE", str(given_file))
    killed_file = pytester.path / "killed.txt"
    if kill:
        monkeypatch.setenv("WRITER_KILL", str(killed_file))
    pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--alluredir={handed_dir}").assert_outcomes(
        passed=19, failed=5)
    given = json.loads(given_file.read_text())
    assert given["handed"] is True and len(given["writers"]) == 1
    if kill:  # killed with files handed over, and more handed after it died
        assert int(killed_file.read_text()) >= 10 * 5
    plain, handed = _results(plain_dir), _results(handed_dir)
    assert len(plain) == 24 * 4  # each case's result, its two fixtures' containers and its JSON attachment
    assert handed == plain
    assert len(_attachments(plain_dir)) == 48
    assert _attachments(handed_dir) == _attachments(plain_dir)
    assert not list(handed_dir.glob("*.tmp"))


def test_a_few_cases_are_written_by_the_process(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below WRITER_MIN_CASES no writer is started (its start would cost what it saves)."""
    from medrcube.plugin.speed.allure_files import WRITER_MIN_CASES

    monkeypatch.delenv("ALLURE_INDENT_OUTPUT", raising=False)
    pytester.makepyfile(test_many=MANY_CASES.replace("range(24)", f"range({WRITER_MIN_CASES - 1})"))
    pytester.makeconftest(WRITER)
    given_file = pytester.path / "given.json"
    monkeypatch.setenv("GIVEN_FILE", str(given_file))
    pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--alluredir={pytester.path / 'out'}")
    assert json.loads(given_file.read_text()) == {"handed": False, "writers": []}
    assert len(_results(pytester.path / "out")) == (WRITER_MIN_CASES - 1) * 4


def test_a_writer_refusing_a_name_leaves_every_file_to_the_process(tmp_path: Path) -> None:
    """A name with a directory in it ends the writer (status 3) before it writes anything outside the
    results directory; every file handed over is then written by the process, the refused one included
    where the process puts it (allure's own names never hold a directory)."""
    from medrcube.plugin.speed.allure_files import FileWriter

    results = tmp_path / "results"
    results.mkdir()
    writer = FileWriter(str(results))
    assert writer.process is not None
    writer.put("a-result.json", b'{"name": "a"}')
    writer.put("../outside-result.json", b'{"name": "outside"}')
    writer.put("b-result.json", b'{"name": "b"}')
    writer.close()
    assert (results / "a-result.json").read_bytes() == b'{"name": "a"}'
    assert (results / "b-result.json").read_bytes() == b'{"name": "b"}'
    assert writer.process is None and not list(results.glob("*.tmp"))


def test_a_writer_that_cannot_start_leaves_the_files_to_the_process(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from medrcube.plugin.speed.allure_files import FileWriter

    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python-here"))
    writer = FileWriter(str(tmp_path))
    assert writer.process is None and writer.failed
    writer.put("c-result.json", b"{}")
    assert (tmp_path / "c-result.json").read_bytes() == b"{}"  # written at once
    writer.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c-result.json"]


def test_the_writer_ends_at_the_end_mark_while_a_forked_child_holds_its_pipe(tmp_path: Path) -> None:
    """A child forked while the writer runs (a test's own process that outlives its case) holds a copy
    of the pipe: the writer still ends at the process's end mark, having written every file (status 0,
    not killed after WRITER_PATIENCE_S)."""
    import os
    import signal

    from medrcube.plugin.speed.allure_files import FileWriter

    writer = FileWriter(str(tmp_path))
    process = writer.process
    assert process is not None
    writer.put("d-result.json", b'{"name": "d"}')
    child = os.fork()
    if child == 0:  # holds the pipe's write end, as inherited, until killed
        signal.pause()
        os._exit(0)
    try:
        writer.close()
        assert process.returncode == 0
        assert (tmp_path / "d-result.json").read_bytes() == b'{"name": "d"}'
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
