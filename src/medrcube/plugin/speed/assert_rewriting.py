"""pytest's assertion rewriting narrowed to the modules that need it (docs/speed.md).

pytest marks every top-level package of a distribution that provides a `pytest11` entry
point for assertion rewriting, so in a pytest process every medrcube module would be
loaded by pytest's import hook: read, parsed, rewritten and compiled, instead of loaded
from the bytecode pip wrote at install. pytest caches its rewritten bytecode beside the
source, which it cannot do where bytecode is not written (`PYTHONDONTWRITEBYTECODE=1`,
common in CI containers, or a read-only site-packages): there every start paid for every
module again (~0.9 s of CPU for the ~110 modules of a collect-only gate run from a
wheel). A `PYTEST_DONT_REWRITE` docstring would not help: pytest parses a module to read
it, then compiles the unchanged tree.

What needs rewriting: the assertions a user reads. Those are in test files and conftest.py
files, which pytest rewrites by their names (`python_files`, conftest) whatever is marked,
and in the packaged suite (`medrcube.suite`), which stays marked as a whole. Every other
`assert` in medrcube states an internal invariant (a value is not None, a length matches):
it fails, if ever, as a plain AssertionError with its traceback, as it does outside pytest.

`narrow` removes the package's mark from a rewriting hook and marks the suite instead; it
is called when `medrcube.plugin` is first imported (the entry point imports it right after
`medrcube` itself, so only those two and this module are rewritten) and again from the
plugin's `pytest_addoption`, for a pytest run made inside a process that imported the
plugin already (pytester). The mark is pytest's private state (`_must_rewrite`, read by
its hook at each import since pytest 3); a pytest without it is left as it is, and the
run is only slower.
"""

from __future__ import annotations

import sys

PACKAGE = "medrcube"
KEEP = ("medrcube.suite",)


def narrow(hook: object) -> bool:
    """Unmark medrcube (all but the suite) in one pytest rewriting hook; True if it was marked."""
    must = getattr(hook, "_must_rewrite", None)
    if not isinstance(must, set) or PACKAGE not in must:
        return False
    must.discard(PACKAGE)
    must.update(KEEP)
    cache = getattr(hook, "_marked_for_rewrite_cache", None)
    if isinstance(cache, dict):
        cache.clear()  # its answers were computed with the package marked
    return True


def narrow_installed() -> int:
    """`narrow` every pytest rewriting hook installed in this process; how many were changed."""
    return sum(narrow(f) for f in list(sys.meta_path) if type(f).__name__ == "AssertionRewritingHook")
