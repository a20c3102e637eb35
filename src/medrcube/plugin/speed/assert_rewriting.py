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

The same holds for the other pytest plugins' distributions, which pytest marks whole too: a
plugin's fixtures and hooks are in its entry-point module, which stays marked, while the library
around it (anyio's 30-odd modules behind `anyio.pytest_plugin`, xdist's, allure-pytest's) was
rewritten at every start where bytecode is not written: 0.61 -> 0.52 s for a collect-only gate
run with their rewritten bytecode absent, as in a fresh CI container (docs/speed.md, "Fourteenth
pass"). `narrow` replaces the mark of such a package by its entry-point modules; it acts on the
plugins pytest loads after medrcube's (their order is the installation's), and leaves every
other mark (a module a plugin or conftest registered with `pytest.register_assert_rewrite`).

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
    """Unmark medrcube (all but the suite), and every other plugin's package but its entry-point
    modules, in one pytest rewriting hook; True if medrcube was marked."""
    must = getattr(hook, "_must_rewrite", None)
    if not isinstance(must, set) or PACKAGE not in must:
        return False
    must.discard(PACKAGE)
    must.update(KEEP)
    for package, modules in plugin_modules(must).items():
        must.discard(package)
        must.update(modules)
    for package, modules in _plugin_modules(must).items():
        must.discard(package)
        must.update(modules)
    cache = getattr(hook, "_marked_for_rewrite_cache", None)
    if isinstance(cache, dict):
        cache.clear()  # its answers were computed with the package marked
    return True


def narrow_installed() -> int:
    """`narrow` every pytest rewriting hook installed in this process; how many were changed."""
    return sum(narrow(f) for f in list(sys.meta_path) if type(f).__name__ == "AssertionRewritingHook")


def _plugin_modules(marked: set[str]) -> dict[str, set[str]]:
    """Each marked package whose pytest11 entry point is a module inside it -> those modules."""
    from importlib.metadata import entry_points

    out: dict[str, set[str]] = {}
    for ep in entry_points(group="pytest11"):
        top = ep.module.partition(".")[0]
        if top in marked and top != ep.module:
            out.setdefault(top, set()).add(ep.module)
    return out


def plugin_modules(marked: set[str]) -> dict[str, set[str]]:
    """Each marked package holding a pytest11 entry point's module (not that module itself) -> those modules."""
    from importlib.metadata import entry_points

    out: dict[str, set[str]] = {}
    for ep in entry_points(group="pytest11"):
        top = ep.module.partition(".")[0]
        if top in marked and top != ep.module and top != PACKAGE:
            out.setdefault(top, set()).add(ep.module)
    return out
