"""pytest's assertion rewriting narrowed to what needs it (plugin/speed/assert_rewriting.py).

A real pytest process (this venv's, medrcube from this checkout first on the path, bytecode
not written as in many CI containers) runs a user's test file: its assertions and its
conftest's are rewritten (pytest's explanations in the failure), the packaged suite is
rewritten, and the rest of medrcube is loaded by the ordinary loader, not pytest's hook.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import medrcube

SRC = Path(medrcube.__file__).resolve().parents[1]

CONFTEST = '''
import json, sys

def loaders():
    return {name: type(getattr(mod, "__loader__", None)).__name__
            for name, mod in list(sys.modules.items()) if name == "medrcube" or name.startswith("medrcube.")}

def helper_check(values):
    assert sum(values) == 10

def pytest_sessionfinish(session):
    with open("loaders.json", "w") as f:
        json.dump(loaders(), f)
'''

TEST = '''
import medrcube.run.runner  # noqa: F401  (a module of medrcube a user's test may import)
import medrcube.suite.test_gate  # noqa: F401  (what a site project imports, docs/site-tests.md)
from conftest import helper_check

def test_plain_assert():
    readings = {"A": 3, "B": 4}
    assert readings["A"] == readings["B"], "letters differ"

def test_conftest_helper():
    helper_check([1, 2, 3])
'''


def _run(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    (tmp_path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tmp_path / "test_user.py").write_text(TEST, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    env.update(PYTHONPATH=os.pathsep.join([str(SRC), str(tmp_path)]), PYTHONDONTWRITEBYTECODE="1",
               MEDRCUBE_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                           "-q", "test_user.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    loaders = json.loads((tmp_path / "loaders.json").read_text(encoding="utf-8"))
    return proc, loaders


def test_only_the_suite_and_the_users_files_are_rewritten(tmp_path: Path) -> None:
    proc, loaders = _run(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # both tests fail, nothing else goes wrong
    assert loaders["medrcube.suite.test_gate"] == "AssertionRewritingHook"
    assert loaders["medrcube.suite"] == "AssertionRewritingHook"
    # the rest of medrcube: the ordinary loader (from bytecode where there is some)
    ordinary = {name for name, loader in loaders.items() if loader != "AssertionRewritingHook"}
    assert {"medrcube.run.runner", "medrcube.plugin.session", "medrcube.plugin.hooks", "medrcube.gate.kinds"} <= ordinary
    rewritten = sorted(set(loaders) - ordinary)
    # the entry point's first two imports, the package and module that narrow, before they act; the suite
    assert rewritten == ["medrcube", "medrcube.plugin", "medrcube.plugin.speed", "medrcube.plugin.speed.assert_rewriting",
                         "medrcube.suite",
                         "medrcube.suite.test_gate"], rewritten


def test_a_users_assertions_keep_pytests_explanations(tmp_path: Path) -> None:
    proc, _ = _run(tmp_path)
    out = proc.stdout
    # the user's test file: the compared values and the message
    assert "AssertionError: letters differ" in out, out
    assert "assert 3 == 4" in out, out
    # a helper in the user's conftest.py: the intermediate value pytest shows
    assert "assert 6 == 10" in out, out
    assert "where 6 = sum([1, 2, 3])" in out, out
