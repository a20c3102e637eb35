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
