"""Group-sequential levels: how much of a one-sided alpha each look of a check may spend.

Why this method. A sequential run looks at a check's evidence a few times, at planned
fractions of its images, with the check's own fixed-sample statistic (the p-value its
rule computes on the images seen so far), and makes the final analysis on all its images.
An alpha-spending function (Lan & DeMets 1983, Biometrika 70:659) fixes the part of
alpha spent by information fraction t; the nominal level of each look is the one whose
crossing probability under the null, given that no earlier look crossed, is what the
function adds at that look. The joint law of the looks' statistics is the canonical one
(Jennison & Turnbull 2000, ch. 3 and 11): Z_k = S(t_k) / sqrt(t_k) with S a Brownian motion
in information time. It holds, for large samples, for every statistic the gate decides
on (a clustered proportion, a paired difference, a credibility contrast: smooth
functions of per-image means over images in a random order; Scharfstein, Tsiatis &
Robins 1997), and benchmarks/sequential.py measures the error rates it gives.

The spending function is Kim & DeMets's power family alpha * t**rho with rho = 4, close to
O'Brien & Fleming's (in Lan & DeMets's form 0.0015 of 0.025 is spent by t = 0.5, here
0.0016; Lan & DeMets's Pocock-type spending 0.0155): the early
looks spend little (the evidence must be overwhelming to stop there) and the final look
keeps almost the whole level, so that a check that runs to its end is decided as the full
run decides it (at the shipped looks the final look's nominal one-sided level is 0.0244
for alpha = 0.025; 0.0236 with rho = 3, 0.0214 with rho = 2). Why 4 and not an earlier
spending: on the generated full-size cube the requests are well within their targets at
rho = 3 and 4 alike, while the gap between the final level and the full run's alpha is
the one way a sequential run's verdict differs from the full run's (benchmarks/RESULTS.md
section 12); a larger rho narrows that gap.

The nominal levels are computed by the recursive numerical integration of Armitage,
McPherson & Rowe (1969) over the continuation region on a grid; they depend only on the
looks' fractions and alpha, so they are cached.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from scipy.special import ndtr, ndtri

RHO = 4.0  # the power family's exponent: alpha * t**RHO spent by information fraction t
GRID = 401  # points of the continuation region's grid
LOWEST_Z = -8.0  # the grid's lower end (the density below is negligible)


def spent(t: float, alpha: float, rho: float = RHO) -> float:
    """The part of `alpha` spent by information fraction t (0 <= t <= 1)."""
    return alpha * math.pow(min(max(t, 0.0), 1.0), rho)


def nominal_levels(fractions: Sequence[float], alpha: float, rho: float = RHO) -> tuple[float, ...]:
    """The one-sided nominal level of each look: reject at look k when its p-value is at
    most the k-th value. `fractions` increase to 1 (the final look); the probability
    under the null that some look rejects is `alpha`."""
    key = tuple(round(float(t), 6) for t in fractions)
    if not key or any(b <= a for a, b in zip(key, key[1:], strict=False)) or key[0] <= 0 or key[-1] > 1:
        raise ValueError(f"look fractions must increase within (0, 1]: {fractions}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1): {alpha}")
    return _levels(key, round(float(alpha), 12), float(rho))


@functools.lru_cache(maxsize=4096)
def _levels(fractions: tuple[float, ...], alpha: float, rho: float) -> tuple[float, ...]:
    bounds: list[float] = []
    grid = density = None
    previous_t, previous_spent = 0.0, 0.0
    for t in fractions:
        increment = max(spent(t, alpha, rho) - previous_spent, 0.0)
        if grid is None or density is None:
            c = float(ndtri(1.0 - increment)) if increment > 0 else math.inf
            grid = np.linspace(LOWEST_Z, min(c, 8.0), GRID)
            density = np.exp(-grid * grid / 2.0) / math.sqrt(2.0 * math.pi)
        else:
            r, s = math.sqrt(previous_t / t), math.sqrt((t - previous_t) / t)
            weights = np.full(GRID, grid[1] - grid[0])
            weights[0] /= 2.0
            weights[-1] /= 2.0
            mass = density * weights  # the trapezoid rule over the continuation region
            shifted = grid * r
            args = (mass, shifted, s, increment)
            if increment > 0 and _excess(12.0, *args) < 0 < _excess(-10.0, *args):
                from scipy.optimize import brentq  # here: scipy.optimize costs start-up a second

                c = float(brentq(_excess, -10.0, 12.0, args=args, xtol=1e-9))
            else:
                c = math.inf
            grid = np.linspace(LOWEST_Z, min(c, 8.0), GRID)
            z = (grid[:, None] - shifted[None, :]) / s
            density = (mass[None, :] * np.exp(-z * z / 2.0)).sum(axis=1) / (s * math.sqrt(2.0 * math.pi))
        bounds.append(c)
        previous_t, previous_spent = t, spent(t, alpha, rho)
    return tuple(float(1.0 - ndtr(c)) if math.isfinite(c) else 0.0 for c in bounds)


def _excess(c: float, mass: np.ndarray, shifted: np.ndarray, s: float, increment: float) -> float:
    """The probability of crossing c at this look without an earlier crossing, less what
    the look may spend (the grid's mass carried to this look by the Brownian increment)."""
    return float(np.sum(mass * (1.0 - ndtr((c - shifted) / s)))) - increment


def predictive_power(p: float, fraction: float, final_level: float) -> float:
    """The probability that the final analysis crosses `final_level` (one-sided), given a
    look at information fraction `fraction` whose p-value is `p`, averaged over the drift
    as the look leaves it uncertain (flat prior; Spiegelhalter, Freedman & Blackburn 1986,
    Controlled Clin. Trials 7:8): on the canonical Brownian law, Z(1) given Z(t) = z is
    normal with mean z / sqrt(t) and variance (1 - t) / t. Conditional power at the
    drift's point estimate (variance 1 - t) is far more confident at early looks, where
    the estimate is noisy: it abandoned checks that the full run then passed. For a
    futility stop: it decides nothing, it only says a claim has become unlikely."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"a look's fraction must lie in (0, 1): {fraction}")
    if not 0.0 < final_level < 1.0:
        raise ValueError(f"the final level must lie in (0, 1): {final_level}")
    p = min(max(p, 1e-300), 1.0 - 1e-16)
    z = float(ndtri(1.0 - p))
    c = float(ndtri(1.0 - final_level))
    return float(ndtr((z / math.sqrt(fraction) - c) / math.sqrt((1.0 - fraction) / fraction)))
