"""Group-sequential levels: a single look is the fixed-sample level, the early looks spend
little, and under the null the looks together reject at most alpha (Brownian motion in
information time, simulated)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtri

from medrcube.metrics.group_sequential import nominal_levels, spent

LOOKS = (0.1, 0.2, 0.3, 0.4, 0.5, 1.0)


def test_one_look_is_the_fixed_sample_level() -> None:
    assert nominal_levels((1.0,), 0.025) == pytest.approx((0.025,))


def test_early_looks_spend_little_and_the_final_look_keeps_almost_all() -> None:
    levels = nominal_levels(LOOKS, 0.025)
    assert all(a < b for a, b in zip(levels, levels[1:], strict=False))
    assert levels[0] < 1e-5 and 0.024 < levels[-1] < 0.025
    assert spent(0.5, 0.025) == pytest.approx(0.025 / 16)


@pytest.mark.parametrize("alpha", [0.025, 0.025 / 20])
def test_the_looks_together_reject_at_most_alpha_under_the_null(alpha: float) -> None:
    rng = np.random.default_rng(7)
    paths = 400_000
    t = np.array(LOOKS)
    increments = rng.standard_normal((paths, len(t))) * np.sqrt(np.diff(t, prepend=0.0))
    z = np.cumsum(increments, axis=1) / np.sqrt(t)
    bounds = -ndtri(np.array(nominal_levels(LOOKS, alpha)))
    rate = float(np.mean((z >= bounds).any(axis=1)))
    se = np.sqrt(alpha * (1 - alpha) / paths)
    assert abs(rate - alpha) < 4 * se, (rate, alpha)


def test_looks_must_increase_to_at_most_one() -> None:
    with pytest.raises(ValueError, match="increase"):
        nominal_levels((0.5, 0.3, 1.0), 0.025)
    with pytest.raises(ValueError, match="alpha"):
        nominal_levels((1.0,), 0.0)


def test_predictive_power_is_a_half_on_the_boundary_and_moves_with_the_evidence() -> None:
    import math

    from scipy.special import ndtr, ndtri

    from medrcube.metrics.group_sequential import predictive_power

    final = 0.025
    c = float(ndtri(1 - final))
    # A look whose z, projected to the end (z / sqrt(t)), sits on the final boundary.
    for t in (0.2, 0.5, 0.8):
        p = float(ndtr(-c * math.sqrt(t)))
        assert abs(predictive_power(p, t, final) - 0.5) < 1e-9
    # Stronger evidence, more power; the same z later in the run, a surer projection.
    assert predictive_power(0.001, 0.5, final) > predictive_power(0.01, 0.5, final) > predictive_power(0.3, 0.5, final)
    assert predictive_power(0.7, 0.8, final) < predictive_power(0.7, 0.2, final) < 0.5
    # Its spread is (1 - t) / t: at t = 0.5 and z = 0 the final statistic is N(0, 1).
    assert abs(predictive_power(0.5, 0.5, final) - final) < 1e-9
    with pytest.raises(ValueError, match="fraction"):
        predictive_power(0.1, 1.0, final)
