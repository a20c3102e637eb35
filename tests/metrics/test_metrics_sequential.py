"""The betting tests behind sequential qualification: valid at any stopping time, decisive
on clear evidence, frozen once decided; the vectorised path equals the scalar one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medrcube.metrics.sequential import (
    BetState,
    SequentialTest,
    accuracy_test,
    drop_test,
    images_needed,
    log_wealth_paths,
)


def test_a_model_at_the_bound_rarely_ever_passes() -> None:
    # Ville: P(sup_t K_t >= 1/alpha) <= alpha under the null, whenever one looks.
    rng = np.random.default_rng(7)
    reps, t, alpha = 600, 300, 0.05
    y = (rng.random((reps, t)) < 0.6) - 0.6
    ever = (log_wealth_paths(y) >= math.log(1 / alpha)).any(axis=1).mean()
    se = math.sqrt(alpha * (1 - alpha) / reps)
    assert ever <= alpha + 3 * se


def test_a_model_far_above_the_bound_passes_within_a_few_dozen_images() -> None:
    clusters = [(1, 1) if i % 20 else (0, 1) for i in range(200)]  # 95% right, bound 0.5
    test = accuracy_test(clusters, bound=0.5, alpha_pass=0.05, alpha_fail=0.05, max_size=1)
    assert test.decision == "pass"
    assert test.decided_at is not None and test.decided_at < 40


def test_a_model_far_below_the_bound_fails_and_stays_failed() -> None:
    clusters = [(0, 2)] * 30 + [(2, 2)] * 200
    test = accuracy_test(clusters, bound=0.6, alpha_pass=0.05, alpha_fail=0.01, max_size=2)
    assert test.decision == "fail"
    assert test.decided_at is not None and test.decided_at <= 30  # decided before the good streak
    assert test.update(2.0) is test


def test_unclear_evidence_stays_undecided() -> None:
    clusters = [(1, 1), (0, 1)] * 20
    test = accuracy_test(clusters, bound=0.5, alpha_pass=0.05, alpha_fail=0.05, max_size=1)
    assert test.decision is None and test.n == 40


def test_the_vectorised_path_equals_the_scalar_one() -> None:
    rng = np.random.default_rng(3)
    y = rng.uniform(-1, 1, size=(1, 50)) * 0.5 + 0.2
    state = BetState()
    for v in y[0]:
        state = state.update(float(v))
    assert log_wealth_paths(y)[0, -1] == pytest.approx(state.log_wealth)


def test_non_inferiority_passes_equal_models_and_fails_a_clear_drop() -> None:
    same = [(1, 1, 1)] * 150 + [(0, 0, 1)] * 50
    assert drop_test(same, margin=0.1, alpha_pass=0.05, alpha_fail=0.05, max_size=1).decision == "pass"
    dropped = [(1, 0, 1)] * 60 + [(1, 1, 1)] * 40
    assert drop_test(dropped, margin=0.1, alpha_pass=0.05, alpha_fail=0.05, max_size=1).decision == "fail"


def test_outcomes_outside_the_scale_are_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        SequentialTest(0.05, 0.05, scale=1.0).update(3.0)


def test_planning_figure_grows_as_the_distance_shrinks() -> None:
    assert images_needed(0.0, 0.05) == 0
    assert images_needed(0.35, 0.05) < images_needed(0.1, 0.05)
