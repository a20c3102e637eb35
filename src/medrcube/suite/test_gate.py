"""The qualification gate: one tiny test per kind of check; the checks are data.

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

from medrcube.plugin.session import enforce

__all__ = [
    "test_cell",
    "test_slice",
    "test_overall",
    "test_credibility",
    "test_image_dependence",
    "test_position",
    "test_regression",
    "test_robustness",
    "test_robustness_agreement",
    "test_finding",
    "test_calibration",
    "test_selective",
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
    """A right diagnosis goes with a right perception of the same image (grounding)."""
    enforce(verdict)


def test_image_dependence(check, verdict):
    """Accuracy drops enough without the image (the blind variant): the model looks at it."""
    enforce(verdict)


def test_position(check, verdict):
    """Answers survive cyclic rotations of the options (circular accuracy and its gap)."""
    enforce(verdict)


def test_regression(check, verdict):
    """The candidate is not worse than the baseline by more than the margin (non-inferiority)."""
    enforce(verdict)


def test_robustness(check, verdict):
    """Accuracy under an image perturbation is not worse than standard by more than the margin."""
    enforce(verdict)


def test_robustness_agreement(check, verdict):
    """The answers under an image perturbation name the same option as on the standard image."""
    enforce(verdict)


def test_finding(check, verdict):
    """The sensitivity for a named finding reaches its bound (how many of them the model misses)."""
    enforce(verdict)


def test_calibration(check, verdict):
    """The model's stated confidence matches how often it is right (calibration error at most the bound)."""
    enforce(verdict)


def test_selective(check, verdict):
    """Deferring when unsure pays: the utility under the deferral cost, or accuracy at a coverage, reaches its bound."""
    enforce(verdict)
