"""The betting tests behind sequential qualification: valid at any stopping time, decisive
on clear evidence, frozen once decided; the vectorised path equals the scalar one."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from medrcube.metrics.sequential import (
    BetState,
    Prior,
    SequentialTest,
    accuracy_test,
    accuracy_test_start,
    closed_levels,
    closed_rejections,
    drop_test,
    images_needed,
    log_wealth_paths,
    projected_log_wealth,
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


# ------------------------------------------------------------------ the bet's cap and prior


def test_the_cap_is_relative_to_the_largest_loss() -> None:
    # Outcomes scaled by the largest image (3 items) but mostly one-item images: with the
    # cap on l * (largest loss) the test still bets boldly and decides early.
    clusters = [(1, 1)] * 9 + [(0, 1)] * 3
    clusters = clusters * 10
    test = accuracy_test(clusters, bound=0.5, alpha_pass=0.025, alpha_fail=0.025, max_size=3)
    assert test.up.cap == pytest.approx(0.8 / 0.5)
    assert test.decision == "pass" and test.decided_at is not None and test.decided_at < 60


def test_the_worst_image_leaves_a_fifth_of_the_wealth() -> None:
    state = BetState(max_loss=0.5, total=10.0, total_sq=1.0)  # a bet far above the cap
    assert state.bet() == pytest.approx(state.cap)
    assert math.exp(state.update(-0.5).log_wealth) == pytest.approx(0.2)


def test_a_misleading_prior_keeps_the_level() -> None:
    # A prior that says "far above" at every step, for a model exactly at the bound: the
    # bet is predictable, so Ville still holds (the prior only changes the bets).
    rng = np.random.default_rng(11)
    reps, t, alpha = 400, 200, 0.05
    prior = Prior(mean=0.4, second=0.25, weight=8.0)
    hits = 0
    for _ in range(reps):
        state = BetState(max_loss=0.5)
        for c in rng.random(t) < 0.5:
            state = state.update(float(c) - 0.5, prior)
            if state.log_wealth >= math.log(1 / alpha):
                hits += 1
                break
    assert hits / reps <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)


def test_a_good_prior_decides_sooner() -> None:
    clusters = [(1, 1)] * 3 + [(0, 1)]
    clusters = clusters * 30
    plain = accuracy_test_start(0.5, 0.025, 0.025, 1).extend(c - 0.5 * m for c, m in clusters)
    seeded = accuracy_test_start(0.5, 0.025, 0.025, 1)
    prior = Prior(mean=0.25, second=0.25, weight=8.0)
    for c, m in clusters:
        seeded = seeded.update(c - 0.5 * m, prior)
        if seeded.decision:
            break
    assert plain.decided_at is not None and seeded.decided_at is not None
    assert seeded.decided_at < plain.decided_at


# ------------------------------------------------------------------ the family of fail claims


def _brute_force(e: list[float], alphas: list[float], w: list[float]) -> list[bool]:
    idx = [j for j in range(len(e)) if w[j] > 0]
    out = []
    for i in range(len(e)):
        if w[i] <= 0:
            out.append(False)
            continue
        others = [j for j in idx if j != i]
        ok = True
        for r in range(len(others) + 1):
            for sub in itertools.combinations(others, r):
                s = (i, *sub)
                if sum(w[j] * e[j] for j in s) / sum(w[j] for j in s) < 1 / alphas[i]:
                    ok = False
        out.append(ok)
    return out


@given(
    st.lists(st.tuples(st.floats(0.0, 200.0), st.sampled_from([0.0, 1.0, 3.0, 10.0])), min_size=1, max_size=7),
    st.sampled_from([0.025, 0.05]),
)
def test_closed_rejections_equal_the_closure_over_every_subset(pairs, alpha) -> None:
    e = [p[0] for p in pairs]
    w = [p[1] for p in pairs]
    alphas = [alpha] * len(e)
    assert closed_rejections(e, alphas, w) == _brute_force(e, alphas, w)


@given(st.lists(st.floats(0.0, 500.0), min_size=2, max_size=8), st.integers(0, 7))
def test_the_level_a_claim_needs_is_the_one_that_rejects_it(e, i) -> None:
    i %= len(e)
    alphas, w = [0.025] * len(e), [1.0 + j for j in range(len(e))]
    need = closed_levels(e, alphas, w)[i]
    at = list(e)
    at[i] = need * (1 + 1e-9) + 1e-9
    assert closed_rejections(at, alphas, w)[i]
    if need > 1e-6:
        at[i] = need * (1 - 1e-6) - 1e-6
        assert not closed_rejections(at, alphas, w)[i]


def test_the_closure_rejects_what_bonferroni_rejects_and_more_when_all_fail() -> None:
    k, alpha = 20, 0.025
    lone = [1.0] * (k - 1) + [k / alpha]
    assert closed_rejections(lone, [alpha] * k)[-1]  # Bonferroni's level suffices alone
    together = [2.0 / alpha] * k  # each far below K/alpha
    assert all(closed_rejections(together, [alpha] * k))


def test_the_family_error_stays_within_alpha_when_every_null_is_true() -> None:
    # Twenty checks all exactly at their bound, with item-sharing images (a slice and its
    # cells see the same answers): the closure's family-wise error over 300 runs.
    rng = np.random.default_rng(5)
    reps, t, k, alpha = 300, 150, 12, 0.05
    errors = 0
    for _ in range(reps):
        c = (rng.random((t, k)) < 0.5).astype(float)
        tests = [accuracy_test_start(0.5, alpha, alpha, 1, fail_by_family=True) for _ in range(k)]
        rejected = False
        for row in c:
            tests = [x.update(row[j] - 0.5) for j, x in enumerate(tests)]
            if any(closed_rejections([x.e_fail for x in tests], [alpha] * k)):
                rejected = True
                break
        errors += rejected
    assert errors / reps <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)


def test_projection_says_a_clear_effect_gets_there_and_none_does_not() -> None:
    clear = accuracy_test_start(0.5, 0.025, 0.025, 1).extend([0.5, 0.5, 0.5, -0.5] * 5)
    flat = accuracy_test_start(0.5, 0.025, 0.025, 1).extend([0.5, -0.5] * 10)
    assert projected_log_wealth(clear.up, 40) >= math.log(40)
    assert projected_log_wealth(flat.up, 40) < math.log(40)
