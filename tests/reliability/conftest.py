"""Fixtures and hooks of the reliability suite.

- `tally(klass)`: the Tally (reliability_recorder.py) a test counts into; handed to pytest
  as a user property of the test's teardown report, so that it reaches the xdist
  controller with the report.
- `rel_cube`: a small release-layout cube with distinct questions (module scope).
- `MEDRCUBE_WRITE_RELIABILITY=1`: the controller merges the tallies at session finish and
  writes RELIABILITY.md at the rootdir, but only when the suite ran in full (every class
  tallied, no -k/-m selection, no test failed). A normal CI run leaves the tree alone.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the helper modules beside this file, under any import mode

import reliability_recorder as recorder  # noqa: E402

WRITE_ENV = "MEDRCUBE_WRITE_RELIABILITY"
OUTPUT = "RELIABILITY.md"


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Iterator[Callable[[str], recorder.Tally]]:
    made: list[recorder.Tally] = []

    def make(klass: str) -> recorder.Tally:
        t = recorder.Tally(klass)
        made.append(t)
        return t

    yield make
    for t in made:
        request.node.user_properties.append((recorder.PROPERTY, t.to_dict()))


@pytest.fixture(scope="module")
def rel_cube(tmp_path_factory: pytest.TempPathFactory):
    from reliability_kit import make_cube

    return make_cube(tmp_path_factory.mktemp("relcube"))


# ---------------------------------------------------------------------------- RELIABILITY.md


def _in_suite(nodeid: str) -> bool:
    return "tests/reliability/" in nodeid.replace("\\", "/")


class _Writer:
    """Controller-side collector of the suite's reports (see the module docstring)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.outcomes: dict[str, str] = {}
        self.tallies: list[tuple[str, dict]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not _in_suite(report.nodeid):
            return
        for name, value in report.user_properties:
            if name == recorder.PROPERTY:
                self.tallies.append((report.nodeid, value))
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if hasattr(report, "wasxfail"):
                outcome = "xfailed" if report.skipped else "failed"  # strict: an XPASS fails
            elif report.when == "setup" and report.failed:
                outcome = "error"
            else:
                outcome = report.outcome
            self.outcomes[report.nodeid] = outcome
        elif report.when == "teardown" and report.failed:
            self.outcomes[report.nodeid] = "error"

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        reasons = self.why_not_full(exitstatus)
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        say = tr.write_line if tr is not None else print
        if reasons:
            say(f"{OUTPUT} not written: " + "; ".join(reasons))
            return
        rows = recorder.merge((nodeid, self.outcomes.get(nodeid, "passed"), raw) for nodeid, raw in self.tallies)
        env = f"{platform.system()} {platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} CPUs"
        path = Path(self.config.rootpath) / OUTPUT
        path.write_text(recorder.render(rows, environment=env), encoding="utf-8")
        say(f"{OUTPUT} written: {path}")

    def why_not_full(self, exitstatus: int) -> list[str]:
        reasons = []
        opt = self.config.option
        if getattr(opt, "keyword", "") or getattr(opt, "markexpr", ""):
            reasons.append("tests were selected with -k or -m")
        if exitstatus != 0:
            reasons.append(f"pytest exit status {exitstatus}")
        bad = sorted(n for n, o in self.outcomes.items() if o not in ("passed", "xfailed"))
        if bad:
            reasons.append(f"{len(bad)} reliability tests did not pass (first: {bad[0]})")
        seen = {raw["klass"] for _, raw in self.tallies}
        missing = [c.key for c in recorder.CLASSES if c.key not in seen]
        if missing:
            reasons.append(f"classes without a tally: {', '.join(missing)}")
        return reasons


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(WRITE_ENV) == "1" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Writer(config), "medrcube-reliability-writer")
