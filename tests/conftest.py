"""Shared fixtures of the project's own tests.

- `scripted_server`: a running in-process `ScriptedServer` (medrcube.testing.server) with
  the default script (every answer "A"); call `.set_script({...})` to script it. Point the
  `openai` client or an adapter at `scripted_server.base_url` (ends in /v1).
- `scripted_server_factory(script=None, *, reply=None)`: start more in-process servers;
  each is stopped at the end of the test.
- `scripted_server_process(script=None, *, port=0)`: a `ServerProcess`, the server in a
  child process (`.base_url`, `.stats()`, `.reset_stats()`, `.kill()` (SIGKILL),
  `.restart()` on the same port, `.pid`); killed at the end of the test.
- `rec`: a factory of real GradedRecords built field by field (metrics and gate tests).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

# PyYAML imported by the test session itself, before any in-process gate run (pytester's
# inline runs): the gate imports it only when it reads a YAML file, and a module first
# imported inside an inline run is dropped from sys.modules after it. Imported again, PyYAML's
# Python modules are new but its C loader keeps the first import's node classes, so a later
# CSafeLoader resolves no tag ("could not determine a constructor for the tag None": the OCR's
# OmegaConf config in tests/plugin/test_plugin_subgroups.py, run after a gate in the same process).
import yaml  # noqa: F401

from medrcube.records import GradedRecord, Outcome
from medrcube.testing.server import ScriptedServer, ServerProcess


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def scripted_server_factory() -> Iterator[Callable[..., ScriptedServer]]:
    started: list[ScriptedServer] = []

    def make(script: Mapping[str, Any] | None = None, *, reply: Callable[..., Any] | None = None) -> ScriptedServer:
        server = ScriptedServer(script, reply=reply).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def scripted_server_process() -> Iterator[Callable[..., ServerProcess]]:
    started: list[ServerProcess] = []

    def make(script: Mapping[str, Any] | None = None, *, port: int = 0) -> ServerProcess:
        proc = ServerProcess(script, port=port).start()
        started.append(proc)
        return proc

    yield make
    for proc in started:
        proc.close()


def make_record(
    item_id: str,
    outcome: Outcome | str = Outcome.CORRECT,
    *,
    task: str = "Disease Diagnosis",
    modality: str = "X-Ray",
    part: str = "Chest",
    image: str | None = None,
    variant: str = "standard",
    rotation: int = 0,
    answer: int = 0,
    n_options: int = 4,
    extracted: int | None = None,
    response: str | None = None,
) -> GradedRecord:
    outcome = Outcome(outcome)
    if extracted is None and outcome in (Outcome.CORRECT, Outcome.WRONG):
        extracted = answer if outcome is Outcome.CORRECT else (answer + 1) % n_options
    return GradedRecord(
        item_id=item_id,
        dataset="test",
        task=task,
        modality=modality,
        part=part,
        image=image if image is not None else f"img/{item_id}.png",
        image_digest=None,
        variant=variant,
        rotation=rotation,
        answer=answer,
        n_options=n_options,
        prompt_hash="h",
        response=response if response is not None else f"answer for {item_id}",
        extracted=extracted,
        how="bare_letter",
        outcome=outcome,
        error="boom" if outcome is Outcome.ERROR else None,
    )


@pytest.fixture(scope="session")
def rec():
    """The record factory (session-scoped so that hypothesis tests may use it)."""
    return make_record


@pytest.fixture
def pneumothorax_table() -> list[GradedRecord]:
    """Pneumothorax or normal, one item per image: of 12 with pneumothorax, 8 named, 3
    called normal, 1 unparsed (a miss); 28 normal, 24 called normal (the findings metrics'
    and the sensitivity check's shared example)."""
    from dataclasses import replace

    out, i = [], 0
    for truth, chosen, count in [(1, 1, 8), (1, 0, 3), (1, None, 1), (0, 1, 4), (0, 0, 24)]:
        for _ in range(count):
            if chosen is None:
                r = make_record(f"q{i}", Outcome.UNPARSED, answer=truth, n_options=2)
            else:
                r = make_record(f"q{i}", Outcome.CORRECT if chosen == truth else Outcome.WRONG, answer=truth,
                                extracted=chosen, n_options=2)
            out.append(replace(r, options=("No abnormality", "Pneumothorax")))
            i += 1
    return out


@pytest.fixture(autouse=True, scope="session")
def _start_up_cache_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The start-up cache (cube/derived_cache.py: the leakage audit, the feasibility pass, a
    cube's checked records and image checks) of every run in the tests, and of the runs they
    start in child processes, lives in the session's temporary directory, not in the
    developer's ~/.cache. Tests of the cache itself set MEDRCUBE_CACHE_DIR their own way."""
    if "MEDRCUBE_CACHE_DIR" in os.environ:  # chosen by whoever runs the tests
        yield
        return
    os.environ["MEDRCUBE_CACHE_DIR"] = str(tmp_path_factory.mktemp("medrcube-cache"))
    try:
        yield
    finally:
        os.environ.pop("MEDRCUBE_CACHE_DIR", None)


# -- every run document written in a test validates against its shipped schema ----------------

@pytest.fixture(autouse=True)
def _report_html_before_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """report.html is drawn by a detached child after a run's exit status by default
    (medrcube/report/after_exit.py); a test that reads, copies or scans a run directory
    right after its run would race with that child. Tests draw it before the exit; the
    tests of the child itself set `after` (tests/plugin/test_plugin_report_after_exit.py,
    the toy kind's panel in test_plugin_kind_registry.py)."""
    monkeypatch.setenv("MEDRCUBE_REPORT_HTML", "now")


# The documents whose schemas ship in the package (medrcube/rundir/schemas/).
_SCHEMA_OF = {"gate.json": "gate", "run.json": "run"}


@pytest.fixture(autouse=True)
def _written_documents_validate(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test, every gate.json and run.json that a medrcube writer left in the
    test's directory (tmp_path, or pytester's) is checked against its JSON Schema.

    "Left by a writer" is what the seal says: the document is listed in its directory's
    manifest.json with the digest it still has. A test that edits a document on purpose
    (to see it refused) changes that digest, and its edit is not held against the schema.
    The writers validate before writing as well (rundir/documents.py): this proves it on
    every run directory the tests produce, through the gate, `medrcube run` and the rest."""
    roots = []  # taken now: the test's own fixtures are torn down before this one
    if "tmp_path" in request.fixturenames:
        roots.append(request.getfixturevalue("tmp_path"))
    if "pytester" in request.fixturenames:
        roots.append(request.getfixturevalue("pytester").path)
    yield
    if not roots:
        return
    import json

    from medrcube.rundir.documents import validate
    from medrcube.rundir.seal import MANIFEST, file_digest

    for root in roots:
        for manifest in root.rglob(MANIFEST):
            try:
                files = json.loads(manifest.read_text(encoding="utf-8")).get("files") or {}
            except (OSError, ValueError):
                continue
            for name, schema in _SCHEMA_OF.items():
                path = manifest.parent / name
                if name in files and path.is_file() and file_digest(path) == files[name]:
                    validate(json.loads(path.read_text(encoding="utf-8")), schema, str(path))


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_as_a_terminal_sends_it() -> Iterator[None]:
    """SIGINT handled as Python's default in the test processes, even when the suite was
    started as a background job of a shell without job control, which starts it with
    SIGINT ignored: every process the tests spawn would inherit that, and the tests of
    Ctrl-C (a gate interrupted mid-run; a collection interrupted) would see no interrupt."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
