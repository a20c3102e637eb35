"""The qualification gate: one tiny test per kind of check; the checks are data.

A site project runs these beside its own tests with `from medrcube.suite.test_gate import *`.

Each function is parametrized by the medrcube plugin with the checks that
`medrcube.gate.checks.build_checks` derives from the cube's cells, thresholds.yaml and
the options (`--variants`, `--baseline`), one case per check with a readable id, e.g.
`test_cell[Chest/X-Ray/Disease Diagnosis]`. The `verdict` fixture runs inference once per
process and decides the check; `enforce` turns the verdict into the outcome:

    pass                    -> passed
    fail                    -> failed, with observed value, interval, bound, n, worst items
    undecided               -> skipped (insufficient evidence), with the n that would be needed
    error                   -> error (in setup): too many API errors, never a failed gate
"""

from medrcube.plugin.session import enforce

__all__ = [
    "test_cell",
    "test_slice",
    "test_overall",
    "test_credibility",
    "test_image_dependence",
    "test_position",
    "test_regression",
]


def test_cell(check, verdict):
    """Accuracy of one cube cell (part x modality x task) reaches its bound."""
    enforce(verdict)


def test_slice(check, verdict):
    """Accuracy over one axis slice (a part, a modality or a task) reaches its bound."""
    enforce(verdict)


def test_overall(check, verdict):
    """Accuracy over the whole cube reaches its bound."""
    enforce(verdict)


def test_credibility(check, verdict):
    """High-level answers rest on correct low-level perception (rationality, shortcut probability)."""
    enforce(verdict)


def test_image_dependence(check, verdict):
    """Accuracy drops enough without the image (the blind variant): the model looks at it."""
    enforce(verdict)


def test_position(check, verdict):
    """Answers survive cyclic rotations of the options (circular accuracy and its gap)."""
    enforce(verdict)


def test_regression(check, verdict):
    """The candidate is not significantly worse than the baseline (paired exact McNemar)."""
    enforce(verdict)
