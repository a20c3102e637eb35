"""pytest plugin of medrcube (registered through the pytest11 entry point).

Options and hooks only, in the style of pytest-xdist and _pytest's own plugins: the
per-run state is a `GateSession` (gate/session.py) in `config.stash`; the report files
and the terminal summary (gate/summary.py) are produced by the controller only
(`not hasattr(config, "workerinput")`).

The plugin is loaded by every pytest run where medrcube is installed, so it stays idle
until a qualification suite asks for it: a suite declares itself with
`MEDRCUBE_SUITE = True` in its conftest.py (tests_benchmark/conftest.py). Then the cube,
the thresholds and the model spec are loaded in `pytest_sessionstart`, before xdist
starts its workers, so that every mistake is one `pytest.UsageError` before any model
call. Option syntax is checked in `pytest_configure` on every run (it is cheap).

How a check's verdict shows up in pytest:
- pass: passed;
- fail: failed, with the numbers and the worst items in the message;
- fail of an optional check: xfailed (reported, never blocking);
- undecided (insufficient evidence): skipped with the reason "UNDECIDED" and the n that
  would decide; not passed in the terminal, JUnit and Allure;
- error (API-error rate above the bound, or inference itself broke): an *error* in the
  test's setup (the `verdict` fixture raises `GateError`), counted by pytest under
  "errors", never as a failed gate.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

from medrcube.plugin import session as gate
from medrcube.plugin import summary

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("medrcube", "medrcube qualification gate")
    group.addoption(
        "--model",
        default="random",
        help="model spec to qualify: random[:SEED], prior, replay:FILE, openai:NAME[@URL], hf:PATH, "
        "or a name from models.yaml (default: random)",
    )
    group.addoption(
        "--cube",
        default=None,
        help="cube to run: a release directory, a .jsonl file, hf:NAME or a save_to_disk directory "
        "(default: the bundled mini cube fixtures/mini under the rootdir)",
    )
    group.addoption(
        "--thresholds", default=None, help="gate policy file (default: ./thresholds.yaml, else the packaged one)"
    )
    group.addoption("--profile", default=None, help="a named profile of the thresholds file, e.g. deployment")
    group.addoption(
        "--baseline",
        default=None,
        help="run the regression checks against a previous run directory (reports/<run-id>) or a model spec",
    )
    group.addoption(
        "--variants", default="standard", help="variants to ask: e.g. standard,blind,shuffled:3,jpeg:30,noise:0.03 (default: standard)"
    )
    group.addoption("--judge", default=None, help="model spec of an LLM judge for answers no rule can extract")
    group.addoption(
        "--response-store",
        default=".medrcube",
        metavar="DIR",
        help="response store shared by runs and xdist workers (default: .medrcube)",
    )
    group.addoption("--concurrency", default=None, help="requests in flight per process (default: the adapter's)")
    group.addoption("--models-file", default=None, help="models.yaml with named models (default: ./models.yaml)")
    group.addoption(
        "--medrcube-report",
        default="reports",
        metavar="DIR",
        help="write results.jsonl, metrics_summary.json and gate.json under DIR/<run-id>/ (default: reports)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[gate.OPTIONS_KEY] = gate.read_options(config)
    if gate.is_controller(config):
        config.pluginmanager.register(ControllerHooks(config), "medrcube-controller")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    # tryfirst: before xdist's DSession (trylast) starts the workers, so that a usage
    # error stops the run once, in the controller.
    if gate.suite_requested(session.config):
        gate.open_session(session.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    kind = gate.kind_of_test(metafunc.function.__name__)
    if kind is None or "check" not in metafunc.fixturenames:
        return
    run = gate.open_session(metafunc.config)
    ids = [c.id for c in run.checks_of(kind)]
    if ids:
        # Indirect, by id: the parameter is a plain string, so pytest ids, xdist
        # scheduling and Allure's history id stay stable when a bound changes.
        metafunc.parametrize("check", ids, ids=ids, indirect=True)
    else:  # one case that says why (the `check` fixture skips it), rather than silence
        metafunc.parametrize("check", [None], ids=["not-requested"], indirect=True)


@pytest.fixture(scope="session")
def medrcube_session(pytestconfig: pytest.Config) -> gate.GateSession:
    """The run's GateSession: cube, policy, checks, model; records on first use."""
    return gate.open_session(pytestconfig)


@pytest.fixture
def check(request: pytest.FixtureRequest, medrcube_session: gate.GateSession):
    """The Check a gate test is parametrized with (by id: see pytest_generate_tests)."""
    kind = gate.kind_of_test(request.function.__name__)
    if kind is None or not hasattr(request, "param"):
        pytest.fail("the `check` fixture belongs to the medrcube gate's test_<kind> functions", pytrace=False)
    if request.param is None:
        gate.skip_absent(kind, medrcube_session)
    return medrcube_session.check(request.param)


@pytest.fixture
def verdict(request: pytest.FixtureRequest, check, medrcube_session: gate.GateSession):
    """The check's verdict. Runs inference on first use; an error verdict raises
    GateError here, in setup, so that pytest reports an error and not a failure."""
    return gate.verdict_for(request.node, check, medrcube_session)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and gate.kind_of_test(getattr(item, "originalname", "")):
        # Point `-rs` at the test, not at the line of gate/session.py that skipped.
        path, line = item.reportinfo()[:2]
        report.longrepr = (os.fspath(path), (line or 0) + 1, report.longrepr[2])
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    run = config.stash.get(gate.SESSION_KEY, None)
    if run is not None and not gate.is_controller(config):
        # A worker hands its records over; the controller writes (ControllerHooks).
        config.workeroutput[summary.HANDOVER] = run.handover()


def set_exit_status(session: pytest.Session, report: summary.GateReport) -> None:
    """The gate's verdict as the exit status: QUALIFIED leaves pytest's own, NOT QUALIFIED
    is 10 and UNDECIDED 11, replacing pytest's 0 (all passed or skipped) or 1 (tests
    failed) only; interrupted (2), internal error (3), usage error (4) and no tests (5)
    stay. So CI cannot go green on skipped checks."""
    outcome = summary.gate_outcome(report.entries.values(), "", report.meta.get("not_run", ()))
    if outcome.exit_code and int(session.exitstatus) in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        session.exitstatus = outcome.exit_code


class ControllerHooks:
    """The controller's hooks, registered in pytest_configure; bound to their config as
    junitxml's LogXML is, since pytest_runtest_logreport carries no config."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.report = summary.GateReport()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.report.add_report(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:  # pytest-xdist
        self.report.add_handover(getattr(node, "workeroutput", {}).get(summary.HANDOVER))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        run = self.config.stash.get(gate.SESSION_KEY, None)
        if run is not None:  # without xdist this process ran the inference itself
            self.report.add_handover(run.handover())
        if self.report.entries:
            self.report.finish(gate.open_session(self.config))
            set_exit_status(session, self.report)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        lines = self.report.lines()
        if lines:
            terminalreporter.write_sep("=", "medrcube gate")
            for line in lines:
                terminalreporter.write_line(line)
