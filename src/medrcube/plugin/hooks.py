"""pytest plugin of medrcube (registered through the pytest11 entry point).

Options and hooks only, in the style of pytest-xdist's plugin.py + dsession.py: the
per-run state is a `GateSession` (plugin/session.py) in `config.stash`; the report
files, the Allure run files and the terminal summary (plugin/summary.py) are produced
by the controller only (`not hasattr(config, "workerinput")`), in `ControllerHooks`.

The plugin is loaded by every pytest run where medrcube is installed, so it stays idle
until a qualification suite asks for it: a suite declares itself with
`MEDRCUBE_SUITE = True` in its conftest.py (medrcube/suite/conftest.py, or a site
project's). Gate options given to a run without a suite are a usage error. With a suite,
the cube, the thresholds and the model spec are loaded in `pytest_sessionstart`, before
xdist starts its workers, and one short pre-flight request checks that the endpoint
answers, so that every mistake is one `pytest.UsageError` before the run.

How a check's verdict shows up in pytest (plugin/render.py, the one table):
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

import contextlib
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from medrcube.plugin import session as gate
from medrcube.plugin.allure_overview import carry_history
from medrcube.plugin.options import check_suite_for_options, read_options, realign_setup, suite_requested
from medrcube.plugin.speed.assert_rewriting import narrow_installed
from medrcube.plugin.speed.frozen_heap import collection_paused, settle_heap_before_exit, thaw_heap_after

if TYPE_CHECKING:
    from medrcube.plugin import outcome, summary

NOT_REQUESTED = "not-requested"


def pytest_addoption(parser: pytest.Parser) -> None:
    # A pytest run inside a process that imported this plugin already (pytester) installs a
    # rewriting hook of its own, with all of medrcube marked again (plugin/speed/assert_rewriting.py).
    narrow_installed()
    # Every gate option defaults to None, so that "given" can be told from "default"
    # (options.read_options resolves the defaults stated here).
    from medrcube.models.registry import spec_help  # the grammar, written once

    group = parser.getgroup("medrcube", "medrcube qualification gate")
    group.addoption("--model", default=None, help=f"model spec to qualify: {spec_help()} (default: random)")
    group.addoption(
        "--cube",
        default=None,
        help="cube to run: a release directory, a .jsonl file, hf:NAME or a save_to_disk directory "
        "(default: the bundled mini cube shipped with medrcube)",
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
        "--variants",
        default=None,
        help="variants to ask: e.g. standard,blind,shuffled:3,jpeg:30,noise:0.03 (default: standard)",
    )
    group.addoption("--judge", default=None, help="model spec of an LLM judge for answers no rule can extract")
    group.addoption(
        "--response-store",
        default=None,
        metavar="DIR",
        help="response store shared by runs and xdist workers (default: .medrcube)",
    )
    group.addoption("--concurrency", default=None, help="requests in flight per process (default: the adapter's)")
    group.addoption("--models-file", default=None, help="models.yaml with named models (default: ./models.yaml)")
    group.addoption(
        "--medrcube-report",
        default=None,
        metavar="DIR",
        help="write results.jsonl, metrics_summary.json and gate.json under DIR/<run-id>/ (default: reports)",
    )
    group.addoption(
        "--medrcube-progress",
        default=None,
        choices=("auto", "yes", "no"),
        help="live progress line during inference: auto (an interactive terminal outside CI), yes, no",
    )
    group.addoption(
        "--sequential",
        action="store_true",
        default=None,
        help="ask images in a seeded random order, look at each check on part of its images (group-sequential "
        "levels) and stop once the gate's verdict is final (docs/guarantees.md, sequential qualification)",
    )
    group.addoption("--seed", default=None, help="seed of the sequential order (default: 0)")
    group.addoption(
        "--max-requests", default=None, help="sequential budget: asks (items x variants) the run may schedule"
    )
    group.addoption(
        "--max-cost", default=None, help="sequential budget: cost of the run in the price table's currency"
    )
    group.addoption(
        "--fresh",
        action="store_true",
        dest="fresh",
        default=None,
        help="qualification mode: ask every item live and take no answer another run stored (default in the "
        "deployment profile; docs/guarantees.md, evidence)",
    )
    group.addoption(
        "--no-fresh", action="store_false", dest="fresh", default=None,
        help="take answers earlier runs stored, in the deployment profile too (they are counted and named)",
    )
    group.addoption(
        "--ledger", default=None, metavar="DIR",
        help="directory of the ledger of attempts per cube (default: the --response-store directory); keep it "
        "with the site cube (docs/guarantees.md, attempts)",
    )
    group.addoption(
        "--new-ledger", action="store_true", default=None,
        help="start the ledger of attempts for this cube where the deployment profile needs one (the first "
        "qualification run on the cube at this site), or start a new one after a ledger was lost",
    )
    group.addoption(
        "--allure-keep",
        action="store_true",
        default=False,
        help="keep earlier results in --alluredir (default: a fresh results directory per run; "
        "keep history with `allure generate` and the previous report's history/, see docs/reports.md)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    # before pytest's own implementation reads testpaths from the ini file
    realign_setup(early_config, args)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # tryfirst: before allure-pytest's configure reads --clean-alluredir.
    config.stash[gate.OPTIONS_KEY] = read_options(config)
    # Registered first, so run last: after pytest's own end-of-run collections (plugin/speed/frozen_heap.py).
    thaw_heap_after(config)
    if gate.is_controller(config):
        if getattr(config.option, "allure_report_dir", None) and not config.option.allure_keep:
            config.option.clean_alluredir = True  # results of another model are not retries of this one
        config.pluginmanager.register(ControllerHooks(config), "medrcube-controller")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    # tryfirst: before xdist's DSession (trylast) starts the workers, so that a usage
    # error stops the run once, in the controller.
    config = session.config
    if suite_requested(config):  # every process that runs cases writes their Allure files
        from medrcube.plugin.speed.allure_files import encode_results_in_c

        encode_results_in_c()
    if not gate.is_controller(config):
        if suite_requested(config):  # a name the endpoint lists in another spelling: as the controller asks it
            gate.preflight(gate.open_session(config), quiet=True)
        return
    check_suite_for_options(config)
    if suite_requested(config):
        from medrcube.plugin.evidence import junit_properties
        from medrcube.plugin.speed import early_inference as early
        from medrcube.plugin.speed.startup_heap import collector_paused

        # Every usage error (cube, policy, model, endpoint) before the first request; then the
        # inference starts now when nothing can deselect the gate's cases (plugin/speed/early_inference.py),
        # and the rest of the session is completed once its first answer is in.
        with collector_paused():  # no full collection while the session is built (plugin/speed/startup_heap.py)
            run = gate.open_session(config, defer=True)
            gate.preflight(run)
        if early.start_if_allowed(config, run, _progress_for(config)):
            run.early.wait_first_answer()
        try:
            run.complete()
        except BaseException:
            if run.early is not None:
                run.early.stop()
            raise
        junit_properties(config, run.policy_record)


def pytest_report_header(config: pytest.Config) -> list[str]:
    options = config.stash.get(gate.OPTIONS_KEY, None)
    if options is None or options.model_given or not gate.is_controller(config) or not suite_requested(config):
        return []
    from medrcube.plugin.summary import NO_MODEL

    return [f"medrcube: {NO_MODEL}"]


@pytest.hookimpl(tryfirst=True)  # before unraisableexception's collection (plugin/speed/frozen_heap.py)
def pytest_unconfigure(config: pytest.Config) -> None:
    settle_heap_before_exit(config)
    # The model engines this process started (`vllm:PATH`) stop with the run, whatever
    # ended it: the last answer, Ctrl-C, a usage error, a failed check.
    if gate.is_controller(config) and "medrcube.models.vllm_engine" in sys.modules:
        from medrcube.models.vllm_engine import stop_engines

        stop_engines()
    run = config.stash.get(gate.SESSION_KEY, None)
    if run is not None and run.audit_child is not None:  # a leakage audit no one took (Ctrl-C, a usage error)
        from medrcube.plugin.speed.tail_ahead import stop_leak_audit

        stop_leak_audit(run)


def pytest_collection_finish(session: pytest.Session) -> None:
    # Without xdist, conftests below the arguments are loaded now: check again.
    if gate.is_controller(session.config) and session.config.stash.get(gate.SESSION_KEY, None) is None:
        check_suite_for_options(session.config, collected=True)
    if (suite_requested(session.config) and gate.is_controller(session.config)
            and not getattr(session.config.option, "collectonly", False)):
        from medrcube.plugin.speed.allure_files import hand_files_to_a_writer

        # Many cases run here: their files written on another core. Not in an xdist worker: its
        # siblings hold the other cores, and xdist may end it before its session's cleanup.
        hand_files_to_a_writer(session.config, len(session.items))


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
    else:  # deselected in pytest_collection_modifyitems; the summary says how to turn it on
        metafunc.parametrize("check", [None], ids=[NOT_REQUESTED], indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    off = [it for it in items if getattr(getattr(it, "callspec", None), "id", None) == NOT_REQUESTED]
    if off:
        items[:] = [it for it in items if it not in off]
        config.hook.pytest_deselected(items=off)


# -- fixtures: the gate's own, and those a site's tests use (docs/site-tests.md) -------------


@pytest.fixture(scope="session")
def medrcube_session(pytestconfig: pytest.Config) -> gate.GateSession:
    """The run's GateSession: cube, policy, checks, model; records on first use."""
    run = gate.open_session(pytestconfig)
    if run.progress is None:
        run.progress = _progress_for(pytestconfig)
    return run


@pytest.fixture
def check(request: pytest.FixtureRequest, medrcube_session: gate.GateSession) -> Any:
    """The Check a gate test is parametrized with (by id: see pytest_generate_tests)."""
    kind = gate.kind_of_test(request.function.__name__)
    if kind is None or not hasattr(request, "param") or request.param is None:
        pytest.fail("the `check` fixture belongs to the medrcube gate's test_<kind> functions", pytrace=False)
    return medrcube_session.check(request.param)


@pytest.fixture
def verdict(request: pytest.FixtureRequest, check: Any, medrcube_session: gate.GateSession) -> outcome.Decided:
    """The check's verdict. Runs inference on first use; an error verdict raises
    GateError here, in setup, so that pytest reports an error and not a failure."""
    from medrcube.plugin import outcome  # a case's first verdict: not needed before

    return outcome.verdict_for(request.node, check, medrcube_session, model=medrcube_session.options.model)


@pytest.fixture(scope="session")
def medrcube_model(medrcube_session: gate.GateSession) -> Any:
    """The model adapter under qualification (`--model`)."""
    return medrcube_session.adapter


@pytest.fixture(scope="session")
def medrcube_cube(medrcube_session: gate.GateSession) -> Any:
    """The cube of this run (`--cube`, else the bundled mini cube)."""
    return medrcube_session.cube


@pytest.fixture(scope="session")
def medrcube_records(medrcube_session: gate.GateSession) -> list[Any]:
    """Every graded record of this run: asked once per run and shared with the cube's
    checks through the response store. A failed inference errors the test, as it errors
    every built-in check."""
    return medrcube_session.records()


@pytest.fixture
def medrcube_verdict(request: pytest.FixtureRequest, medrcube_session: gate.GateSession) -> Any:
    """`medrcube_verdict(check_id, records, hit=..., bound=...)`: decide a site's own
    proportion over records as a gate check (interval, bound, rule, min_n), so that it
    shows in gate.json, the summary and Allure like a built-in check (plugin/site.py)."""
    from medrcube.plugin.site import SiteVerdict

    return SiteVerdict(request.node, medrcube_session)


def _progress_for(config: pytest.Config) -> Any:
    from medrcube.plugin import progress

    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        directory = workerinput.get(progress.WORKERINPUT_KEY)
        if not directory:
            return None
        return progress.GateProgress(progress.file_sink(Path(directory), str(workerinput.get("workerid", "gw"))))
    if not progress.wanted(config):  # counted all the same: Ctrl-C says how far the run got
        return progress.GateProgress(lambda counts, final: None)
    return progress.GateProgress(progress.terminal_sink(config))


# -- reports ---------------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    if call.excinfo is not None and call.when == "call" and gate.kind_of_test(getattr(item, "originalname", "")):
        from medrcube.plugin.outcome import traceback_from_the_test

        traceback_from_the_test(item, call.excinfo)  # a decided failure: the same report, made faster
    report: Any = yield
    if report.skipped and isinstance(report.longrepr, tuple) and gate.kind_of_test(getattr(item, "originalname", "")):
        # Point `-rs` at the test, not at the line of plugin/session.py that skipped.
        path, line = item.reportinfo()[:2]
        report.longrepr = (os.fspath(path), (line or 0) + 1, report.longrepr[2])
    if call.excinfo is not None and call.excinfo.errisinstance(gate.GateError):
        # One line per errored check: the cause, not the plugin's traceback.
        report.longrepr = f"medrcube: {call.excinfo.value}"
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    # tryfirst: an early inference no test waited for (interrupted, a collection error) is
    # stopped before the controller's hooks read the session's records.
    config = session.config
    if "medrcube.plugin.speed.allure_files" in sys.modules:  # the cases' last Allure files, to their writer now
        sys.modules["medrcube.plugin.speed.allure_files"].send_pending_files()
    run = config.stash.get(gate.SESSION_KEY, None)
    if run is not None and run.early is not None:
        run.early.stop()
    if run is not None and not gate.is_controller(config):
        from medrcube.plugin.summary import HANDOVER

        # A worker hands its records over; the controller writes (ControllerHooks).
        # `workeroutput` is set on a worker's config by pytest-xdist, which pytest's Config type does not declare.
        config.workeroutput[HANDOVER] = run.handover()  # type: ignore[attr-defined]
        # Its records handed over, nothing of the run waits on this process's heap: its exit
        # skips the final trace of every live object, as the controller's does once it has
        # written the run (service.exit_without_final_collection; the controller waits for
        # the workers' exits: about 0.6 s at paper scale with two workers, docs/speed.md).
        from medrcube.service import exit_without_final_collection

        exit_without_final_collection()


def set_exit_status(session: pytest.Session, report: summary.GateReport) -> None:
    """The gate's verdict as the exit status: QUALIFIED leaves pytest's own, NOT QUALIFIED
    is 10 and UNDECIDED 11, replacing pytest's 0 (all passed or skipped) or 1 (tests
    failed) only; interrupted (2), internal error (3), usage error (4) and no tests (5)
    stay. So CI cannot go green on skipped checks."""
    from medrcube.plugin.summary import run_account

    outcome = report.decided[0] if report.decided is not None else run_account(report.entries.values(), report.meta)[0]
    if outcome.exit_code and int(session.exitstatus) in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        session.exitstatus = outcome.exit_code


class ControllerHooks:
    """The controller's hooks, registered in pytest_configure; bound to their config as
    junitxml's LogXML is, since pytest_runtest_logreport carries no config."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.time()  # the controller's wall clock at configure: run.json's start
        self._report: summary.GateReport | None = None
        alluredir = getattr(config.option, "allure_report_dir", None)
        # The trend of earlier runs into this results directory, read before allure-pytest cleans it.
        self.allure_trend = carry_history(alluredir, cleaned=not config.option.allure_keep) if alluredir else []
        self.progress_dir: Path | None = None
        self.exchange_dir: Path | None = None
        self.preread: Any = None  # plugin/speed/shard_preread.ShardPreread, with xdist
        self.leaks_judged: threading.Thread | None = None  # plugin/speed/tail_ahead.judge_leaks, with xdist
        self.progress_line: Any = None
        self.interrupted: list[str] = []  # the partial account of a run stopped by Ctrl-C

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: Any) -> None:  # pytest-xdist: workers start
        from medrcube.plugin.speed.tail_ahead import start_leak_audit

        run = config.stash.get(gate.SESSION_KEY, None)
        if run is not None and suite_requested(config):  # the controller waits for the answers from now on
            if start_leak_audit(run) is not None:  # gate.json's leak entries judged while the workers start and run
                self.leaks_judged = threading.Thread(target=_judge_leaks, args=(run,), name="medrcube-leaks", daemon=True)
                self.leaks_judged.start()
            # The workers hand each other their shards' records there (service.infer); the
            # controller reads them too while the workers decide (plugin/speed/shard_preread.py).
            from medrcube.plugin.speed.shard_preread import ShardPreread

            self.exchange_dir = Path(tempfile.mkdtemp(prefix="medrcube-shards-"))
            from medrcube.plugin.run_meta import site_policy

            self.preread = ShardPreread(self.exchange_dir, len(specs), run.cube, run.variants,
                                        site_policy=lambda: site_policy(run),
                                        report_dir=Path(run.options.report_dir))
            self.preread.start()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:  # pytest-xdist: the workers' progress files
        from medrcube.plugin import progress
        from medrcube.plugin.evidence import RUN_TOKEN_KEY, run_token

        node.workerinput[RUN_TOKEN_KEY] = run_token(self.config)  # one run for the answers' provenance
        from medrcube.plugin.ledger import worker_input

        worker_input(self.config.stash.get(gate.SESSION_KEY, None), node)  # this run's attempt on its cube
        if self.exchange_dir is not None:  # made as the nodes are set up (pytest_xdist_setupnodes)
            node.workerinput[gate.EXCHANGE_KEY] = str(self.exchange_dir)
        if not progress.wanted(self.config) or not suite_requested(self.config):
            return
        if self.progress_dir is None:
            self.progress_dir = Path(tempfile.gettempdir()) / f"medrcube-progress-{uuid.uuid4().hex[:12]}"
            self.progress_dir.mkdir(parents=True, exist_ok=True)
            self.progress_line = progress.ControllerLine(self.config, self.progress_dir)
            self.progress_line.start()
        node.workerinput[progress.WORKERINPUT_KEY] = str(self.progress_dir)

    @property
    def report(self) -> summary.GateReport:
        """What the controller gathers, made once the cases are collected (or on first use):
        plugin/summary.py and the gate's account and numbers it imports are not needed before
        the first request, and collection runs while the answers come in (docs/speed.md)."""
        self.make_report()
        assert self._report is not None
        return self._report

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if suite_requested(self.config):  # now, not after the last answer (a run without the suite: never)
            self.make_report()

    def make_report(self) -> None:
        if self._report is None:
            from medrcube.plugin.summary import GateReport

            self._report = GateReport(started=self.started)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.report.add_report(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:  # pytest-xdist
        from medrcube.plugin.handover import RECORDS
        from medrcube.plugin.summary import HANDOVER

        handover = getattr(node, "workeroutput", {}).get(HANDOVER)
        self.report.add_handover(handover)
        if isinstance(handover, dict):
            # The report holds the one copy of the records it needs; the node, which xdist keeps
            # to the end, lets go of its own (a worker's lines are 25 MiB or more at paper scale:
            # eight workers' held at once made the controller's peak 682 MiB).
            handover.pop(RECORDS, None)

    @pytest.hookimpl(tryfirst=True)  # before --junitxml writes its file: the account's properties go in it
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.exchange_dir is not None:  # xdist's controller: its workers exit while the run directory is written
            from medrcube.plugin.speed.early_teardown import exit_workers_now

            exit_workers_now(self.config)
        if self.progress_line is not None:
            self.progress_line.stop()
            _remove_dir(self.progress_dir)
        if self.preread is not None:  # the workers are down: what it read, or nothing
            self.report.preread, self.preread = self.preread.take(), None
        if self.leaks_judged is not None:
            self.leaks_judged.join()
        _remove_dir(self.exchange_dir)
        run = self.config.stash.get(gate.SESSION_KEY, None)
        if run is not None and run.early is not None:
            run.early.stop()  # as the module's hook does: an inference no test waited for ends first
        if session.exitstatus == pytest.ExitCode.INTERRUPTED and not self.report.entries:
            from medrcube.plugin.progress import interrupted_lines  # Ctrl-C before any verdict

            self.interrupted = interrupted_lines(self.config, run) if suite_requested(self.config) else []
            self.report.drop_preread()
            return
        if run is not None:  # without xdist this process ran the inference itself
            self.report.add_handover(run.handover(live=True))
        if self.report.entries:
            run = gate.open_session(self.config)
            with collection_paused():  # the run directory (plugin/speed/frozen_heap.py)
                self.report.finish(run, kinds_off=run.kinds_off())
            set_exit_status(session, self.report)
            if self.report.decided is not None:
                from medrcube.plugin.evidence import junit_account

                junit_account(self.config, self.report.decided[1])
            alluredir = getattr(self.config.option, "allure_report_dir", None)
            if alluredir:
                from medrcube.plugin import allure as allure_files
                from medrcube.plugin.allure_overview import verdict_result, write_history
                from medrcube.plugin.speed.allure_files import wait_for_files

                wait_for_files()  # every case's file in place: the trend counts the result files

                allure_files.write_run_files(alluredir, self.report.meta, self.report.gate.get("verdict"),
                                             build_order=len(self.allure_trend) + 1)
                verdict_result(alluredir, self.report.gate, self.report.meta, started=self.report.started)
                write_history(alluredir, self.allure_trend, self.report.gate.get("verdict", "UNDECIDED"),
                              self.report.meta.get("model"))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, None, None]:
        # Outermost wrapper: our lines come after pytest's failure details and its short
        # test summary, so that the gate's table and verdict are the last thing read.
        try:
            return (yield)
        finally:
            lines = self.report.lines() or self.interrupted
            if lines:
                terminalreporter.write_sep("=", "medrcube gate")
                for line in lines:
                    terminalreporter.write_line(line)


def _remove_dir(directory: Path | None) -> None:
    import shutil

    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def _judge_leaks(run: Any) -> None:
    """plugin/speed/tail_ahead.judge_leaks on a thread of the xdist controller: anything amiss, and
    the same is judged at the end instead (plugin/leakage.py)."""
    from medrcube.plugin.speed.tail_ahead import judge_leaks

    with contextlib.suppress(Exception):
        judge_leaks(run)
