"""The qualification gate: one tiny test per kind of check (the kind registry,
medrcube.gate.kinds); the checks are data.

A site project runs these beside its own tests with `from medrcube.suite.test_gate import *`.

Each function is parametrized by the medrcube plugin with the checks that
`medrcube.gate.checks.build_checks` derives from the cube's cells, thresholds.yaml and
the options (`--variants`, `--baseline`), one case per check with a readable id, e.g.
`test_cell[Chest/X-Ray/Disease Diagnosis]`. The `verdict` fixture runs inference once per
process and decides the check; `enforce` turns the verdict into the outcome:

    pass                    -> passed
    fail                    -> failed, with observed value, interval, bound, n, worst items
                               (an optional check: xfailed, never blocking)
    undecided               -> skipped "UNDECIDED", with the n that would decide
    error                   -> error (in setup): too many API errors, never a failed gate

The gate's verdict sets the exit status: QUALIFIED 0, NOT QUALIFIED 10, UNDECIDED 11
(docs/guarantees.md).
"""

from collections.abc import Callable
from typing import Any

from medrcube.gate.kinds import KindEntry, registered
from medrcube.plugin.outcome import enforce


def _gate_test(entry: KindEntry) -> Callable[[Any, Any], None]:
    def test(check: Any, verdict: Any) -> None:
        enforce(verdict)

    test.__name__ = test.__qualname__ = entry.test
    test.__doc__ = entry.doc
    return test


# One function per registered kind of check (gate/kinds.py: its `test` and `doc`), made when
# pytest imports this module: a kind registered before (a site's conftest.py) has its test too.
__all__ = [e.test for e in registered() if e.test]
globals().update({e.test: _gate_test(e) for e in registered() if e.test})
