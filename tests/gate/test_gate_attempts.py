"""The share of alpha each attempt on a cube spends (gate/attempts.py), and the family
decision that uses it (gate/family.py): only pass claims spend."""

from __future__ import annotations

from dataclasses import replace

import pytest

from medrcube.gate.attempts import ACROSS, AttemptLevel, share, spent
from medrcube.gate.checks import Check
from medrcube.gate.evaluate import evaluate
from medrcube.records import Outcome


def test_the_shares_sum_below_one_and_a_half_and_the_first_attempt_keeps_alpha():
    assert share(1) == 1.0 and share(2) == 0.25 and share(20) == pytest.approx(1 / 760)
    for k in (1, 2, 5, 20, 1000):
        assert sum(share(i) for i in range(1, k + 1)) == pytest.approx(spent(k)) and spent(k) < ACROSS
    level = AttemptLevel(20, 0.025)
    assert level.across == pytest.approx(0.025 * (1.5 - 1 / 40)) and "attempt 20 on this cube" in level.sentence()
    with pytest.raises(ValueError, match="start at 1"):
        share(0)


def _overall(pass_share: float) -> Check:
    return Check(id="overall", kind="overall", metric="accuracy", part=None, modality=None, task=None, bound=0.5,
                 rule="lower_bound", confidence=0.95, min_n=10, max_error_rate=0.1, pass_share=pass_share)


def test_a_later_attempt_needs_stronger_evidence_to_pass_and_fails_as_before(rec):
    right = [rec(f"q{i}", Outcome.CORRECT if i < 63 else Outcome.WRONG) for i in range(100)]  # 0.63 on 100
    first = evaluate(_overall(1.0), right)
    assert first.status.value == "pass"
    later = evaluate(_overall(share(20)), right)
    assert later.status.value == "undecided" and later.details["pass_alpha"] == pytest.approx(0.025 / 760)
    wrong = [rec(f"q{i}", Outcome.CORRECT if i % 10 < 3 else Outcome.WRONG) for i in range(100)]  # 0.30 on 100
    assert evaluate(_overall(share(20)), wrong).status.value == "fail"  # fail claims keep their level
    assert replace(_overall(1.0), pass_share=0.25).pass_alpha == pytest.approx(0.00625)
