"""The qualification suite, shipped inside the package.

    pytest --model=SPEC                          # at the checkout's root (pyproject testpaths)
    pytest --pyargs medrcube.suite --model=SPEC  # anywhere medrcube is installed
    medrcube qualify --model=SPEC                # the same, as a command

`test_gate.py` holds one tiny test per kind of check (the checks are data, built by
`medrcube.gate.checks.build_checks`); `conftest.py` declares the directory a gate suite
(`MEDRCUBE_SUITE = True`), which is what wakes the medrcube pytest plugin up.
`mini/` is the bundled mini cube (the checkout's fixtures/mini, shipped as package
data), the default `--cube`. A site project (`medrcube init DIR`) imports the test
functions from `medrcube.suite.test_gate` and adds its own tests beside them
(docs/site-tests.md).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

SUITE_FLAG = "MEDRCUBE_SUITE"


def suite_dir() -> Path:
    """The directory of the packaged suite (where test_gate.py lives)."""
    return Path(__file__).resolve().parent


def bundled_cube() -> Path | None:
    """The bundled mini cube shipped with the package, or None if this install lacks it."""
    mini = Path(str(files("medrcube.suite").joinpath("mini")))
    return mini if mini.is_dir() else None
