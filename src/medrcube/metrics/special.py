"""The normal, Student t and binomial distribution functions the gate decides with, in
pure Python (math and statistics only).

    ndtr(x), ndtri(p)              the standard normal CDF and quantile
    stdtr(df, t), stdtrit(df, p)   Student's t CDF and quantile, real df > 0 (inf: normal)
    bdtr(k, n, p), bdtrc(k, n, p)  P(X <= k) and P(X > k) for X ~ Binomial(n, p)

The names and argument orders are scipy.special's, so that one can be checked against the
other. Why not scipy.special itself: the gate needs these six scalar functions, and
importing scipy.special costs 0.34 s of CPU on top of numpy (its array-API layer pulls
numpy.testing, numpy.f2py, numpy.ma, numpy.random), 12-15% of a whole gate run's CPU on the
bundled cube (docs/speed.md). The standard library has the normal distribution
(statistics.NormalDist) but no incomplete beta function; that is what is written here.

Method.
- ndtr: 0.5 erfc(-x / sqrt 2), the formula of statistics.NormalDist.cdf (erfc keeps the
  lower tail's relative accuracy down to the smallest doubles). ndtri:
  statistics.NormalDist.inv_cdf (Wichura's AS 241, PPND16).
- The regularized incomplete beta function I_x(a, b), y = 1 - x, through which the t and
  binomial functions are written:
      I_x(a, b) = x^a y^b / (a B(a, b)) / (1 + d_1 / (1 + d_2 / (1 + ...)))
      d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)),
      d_{2m}   = m (b - m) x / ((a + 2m - 1)(a + 2m))
  (the continued fraction of DLMF 8.17.22), evaluated by the modified Lentz method
  (Thompson & Barnett 1986) for whichever of I_x(a, b) and I_y(b, a) = 1 - I_x(a, b) it
  converges fast for (x < (a + 1) / (a + b + 2)); that one is the smaller of the two up to
  a factor near 1, so the other, 1 minus it, loses nothing: both tails keep their
  relative accuracy.
- The factor x^a y^b / B(a, b) in the saddle-point form (Loader 2000, "Fast and accurate
  computation of binomial probabilities"):
      sqrt(a b / (2 pi s)) exp(delta(s) - delta(a) - delta(b) - D(a, s x) - D(b, s y)),
  s = a + b, D(a, M) = a log(a / M) + M - a >= 0 (a series in v = (a - M) / (a + M) when
  M is near a), delta(z) = log Gamma(z) - (z - 1/2) log z + z - log sqrt(2 pi) (Stirling's
  series from z = 10, math.lgamma below). The textbook form with lgamma(a + b) - lgamma(a)
  - lgamma(b) cancels numbers of size s log s: at s = 10,000 it loses 1e-11 relative.
- stdtr: P(T <= -|t|) = I_x(df / 2, 1 / 2) / 2 at x = df / (df + t^2), y = t^2 / (df + t^2)
  (each computed as its own quotient, never as 1 minus the other). stdtrit: Newton's
  method on P(T <= t) = p from the Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5)
  or the tail's power law, kept inside a shrinking bracket (bisection when a step leaves
  it); the residual near the centre taken as (1/2 - p) - P(-|t| < T < 0), so that a
  quantile near 0 keeps its relative accuracy.
- Where the continued fraction's value f is below 0.01 it is done again in 40-digit
  decimals (it then cancels: x near 1 with b small, the t at large df, where double
  precision left eps / f: 3e-11 at df = 433,080).
- bdtr(k, n, p) = I_{1-p}(n - k, k + 1), bdtrc(k, n, p) = I_p(k + 1, n - k) (exact, not
  an approximation: the incomplete beta identity of the binomial tail).

Accuracy, measured (tests/metrics/test_special.py asserts bounds just above these): the
largest relative error on its grids, against mpmath at 50 digits (for the binomial, exact
sums of positive terms) and against scipy.special 1.17.
- ndtr 1.6e-13 (mpmath; x down to -37.5, where rounding x / sqrt 2 costs 2 x^2 eps / 2),
  5.6e-14 (scipy); ndtri 7.5e-16 (scipy), p from 1e-300.
- stdtr 7.3e-14 (mpmath), 9.9e-14 (scipy where scipy agrees with mpmath to 1e-13; at df = 1
  near t = 0 scipy is 3.6e-9 off); stdtrit 4.7e-13 (scipy, at p near 1/2, where scipy is the
  inexact one: 1.1e-10 at p = 1/2 + 1e-12), stdtr(stdtrit(p)) = p to 3.3e-14; df in
  [1, 1e6], levels 1e-12 to 1 - 1e-12.
- bdtr, bdtrc 3e-13 (scipy, n <= 169 where cephes is exact), 7.2e-13 (exact sums, n up to
  10,000, p in [1e-12, 1 - 1e-12]; scipy there: 2.4e-11). Values below 1e-300 are compared
  absolutely (1e-310).
Cost (process time, medians of 5): bdtr/bdtrc 11-23 us a call at n <= 100 (the bundled
cube's images), 38 us at n = 1,000, 75 us at n = 10,000; stdtr 11-19 us at df <= 100,
160 us at df >= 1e4 (decimals); stdtrit 50 us at df <= 100, 170-190 us at df >= 1e4.
"""

from __future__ import annotations

import decimal
import math
from statistics import NormalDist
from typing import TypeVar

_EPS = 2.0**-52
_TINY = 1e-300  # keeps a Lentz denominator off zero
Real = TypeVar("Real", float, decimal.Decimal)  # the Lentz loop runs in either
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)
_STANDARD_NORMAL = NormalDist()
# The continued fraction converges in O(sqrt(max(a, b))) steps near the switch point; this
# bound is far above any a, b the functions are asked about (df = 1e6: under 1,500 steps).
_MAX_STEPS = 100_000
# Stirling's series of delta(z): B_2j / (2j (2j - 1) z^(2j - 1)), j = 1..7; the next term is
# under 3e-17 at z = 10, where the series takes over from lgamma.
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)


# --------------------------------------------------------------------------- normal


def ndtr(x: float) -> float:
    """P(Z <= x) for a standard normal Z."""
    return 0.5 * math.erfc(-x * _SQRT_HALF)


def ndtri(p: float) -> float:
    """The p quantile of the standard normal (-inf at 0, inf at 1, nan outside [0, 1])."""
    if not 0.0 < p < 1.0:
        return -math.inf if p == 0.0 else math.inf if p == 1.0 else math.nan
    return _STANDARD_NORMAL.inv_cdf(p)


# --------------------------------------------------------------------------- incomplete beta


def _delta(z: float) -> float:
    """log Gamma(z) - ((z - 1/2) log z - z + log sqrt(2 pi)), z > 0."""
    if z >= 10.0:
        w = 1.0 / (z * z)
        acc = 0.0
        for c in reversed(_STIRLING):
            acc = acc * w + c
        return acc / z
    return math.lgamma(z) - (z - 0.5) * math.log(z) + z - _HALF_LOG_2PI


def _deviance(a: float, m: float) -> float:
    """D(a, M) = a log(a / M) + M - a, the binomial deviance: >= 0, 0 at M = a."""
    d = a - m
    v = d / (a + m)
    if abs(v) >= 0.1:
        return a * math.log(a / m) - d
    # a log((1 + v) / (1 - v)) - d with d = v (a + m): 2a (v + v^3/3 + ...) - v (a + m)
    # = d v + 2a (v^3/3 + v^5/5 + ...), every term of one sign (no cancellation).
    v2 = v * v
    term = 2.0 * a * v
    out = d * v
    j = 3.0
    while True:
        term *= v2
        inc = term / j
        out += inc
        if abs(inc) <= _EPS * abs(out):
            return out
        j += 2.0


def _front(a: float, b: float, x: float, y: float) -> float:
    """x^a y^b / B(a, b), in the saddle-point form (module doc)."""
    s = a + b
    log_rest = _delta(s) - _delta(a) - _delta(b) - _deviance(a, s * x) - _deviance(b, s * y)
    return math.sqrt(a * b / (2.0 * math.pi * s)) * math.exp(log_rest)


def _fraction(a: float, b: float, x: float, y: float) -> float:
    """1 + d_1 / (1 + d_2 / (1 + ...)) of DLMF 8.17.22 (x + y = 1), by the modified Lentz
    method: the convergents f_j = f_{j-1} C_j D_j with C_j = 1 + d_j / C_{j-1} and
    D_j = 1 / (1 + d_j D_{j-1}), from f_0 = C_0 = 1, D_0 = 0; two coefficients a step.

    Its value can be far below its terms (x near 1 with b small: f is about a y / (a + 1)
    while d_1 is near -1, the Student t at large df), and then double precision leaves
    eps / f of it: below 0.01 (2e-14 lost at most) it is evaluated again in decimal arithmetic at 40 digits,
    from x = 1 - y so that y's own digits are used."""
    f = _lentz(a, b, x, 1.0, 0.0, _TINY)
    if f >= 0.01:
        return f
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        exact_x = 1 - decimal.Decimal(y) if x > 0.5 else decimal.Decimal(x)
        return float(_lentz(decimal.Decimal(a), decimal.Decimal(b), exact_x, decimal.Decimal(1), decimal.Decimal(0),
                            decimal.Decimal(_TINY)))


def _lentz(a: Real, b: Real, x: Real, one: Real, zero: Real, tiny: Real) -> Real:
    """The Lentz loop of `_fraction`, in floats or in decimals (`one`, `zero`, `tiny` of the kind)."""
    s = a + b
    f, c, dd = one, one, zero
    tol = 2.0 * _EPS
    for m in range(_MAX_STEPS):
        two_m = 2 * m
        odd = -(a + m) * (s + m) * x / ((a + two_m) * (a + two_m + 1))
        dd = one + odd * dd
        dd = one / (dd if dd != 0 else tiny)
        c = one + odd / c
        c = c if c != 0 else tiny
        step = c * dd
        k = m + 1
        even = k * (b - k) * x / ((a + two_m + 1) * (a + two_m + 2))
        dd = one + even * dd
        dd = one / (dd if dd != 0 else tiny)
        c = one + even / c
        c = c if c != 0 else tiny
        step *= c * dd
        f *= step
        if abs(step - one) <= tol:
            return f
    raise ArithmeticError(f"incomplete beta: no convergence at a={a!r}, b={b!r}, x={x!r}")


def _ibeta(a: float, b: float, x: float, y: float) -> tuple[float, float, float]:
    """(I_x(a, b), I_y(b, a), x^a y^b / B(a, b)) for a, b > 0, x + y = 1 (each given with
    its own rounding: neither is taken as 1 minus the other)."""
    if x <= 0.0:
        return 0.0, 1.0, 0.0
    if y <= 0.0:
        return 1.0, 0.0, 0.0
    front = _front(a, b, x, y)
    if x * (a + b + 2.0) < a + 1.0:
        lower = front / (_fraction(a, b, x, y) * a)
        return lower, 1.0 - lower, front
    upper = front / (_fraction(b, a, y, x) * b)
    return 1.0 - upper, upper, front


# --------------------------------------------------------------------------- Student's t


def _t_parts(df: float, t: float) -> tuple[float, float, float]:
    """(P(T <= -|t|), P(-|t| < T <= 0), density at t) for df > 0, t != 0 finite."""
    t2 = t * t
    if math.isinf(t2):  # |t| > 1.3e154: df / (df + t^2) is df / t^2 to the last bit
        x, y = df / abs(t) / abs(t), 1.0
    else:
        x, y = df / (df + t2), t2 / (df + t2)
    lower, upper, front = _ibeta(0.5 * df, 0.5, x, y)
    # f(t) = x^((df + 1)/2) / (sqrt(df) B(df/2, 1/2)) = front * sqrt(x / y) / sqrt(df) = front / |t|
    return 0.5 * lower, 0.5 * upper, front / abs(t)


def stdtr(df: float, t: float) -> float:
    """P(T <= t) for Student's t with df > 0 degrees of freedom (df = inf: the normal)."""
    if math.isnan(df) or math.isnan(t) or df <= 0.0:
        return math.nan
    if math.isinf(df):
        return ndtr(t)
    if t == 0.0:
        return 0.5
    if math.isinf(t):
        return 0.0 if t < 0 else 1.0
    tail, _, _ = _t_parts(df, t)
    return tail if t < 0 else 1.0 - tail


def stdtrit(df: float, p: float) -> float:
    """The p quantile of Student's t with df > 0 degrees of freedom (df = inf: normal)."""
    if math.isnan(df) or math.isnan(p) or df <= 0.0:
        return math.nan
    if math.isinf(df):
        return ndtri(p)
    if not 0.0 < p < 1.0:
        return -math.inf if p == 0.0 else math.inf if p == 1.0 else math.nan
    if p == 0.5:
        return 0.0
    # By symmetry, solve for the lower tail: 1 - p is exact for p >= 1/2 (Sterbenz).
    return _t_lower(df, p) if p < 0.5 else -_t_lower(df, 1.0 - p)


def _t_guesses(df: float, q: float) -> tuple[float, float]:
    """Two starting points for t < 0 with P(T <= t) = q < 1/2: the Cornish-Fisher expansion
    of t in 1/df about z = ndtri(q) (A&S 26.7.5), good unless z^2 is large against df, and
    the tail's power law P(T <= t) ~ df^(df/2 - 1) |t|^-df / B(df/2, 1/2), good far out."""
    z = _STANDARD_NORMAL.inv_cdf(q)
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0
    cornish = z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df
    log_beta = math.lgamma(0.5 * df) + math.lgamma(0.5) - math.lgamma(0.5 * df + 0.5)
    log_abs = (math.log(df) * (0.5 * df - 1.0) - log_beta - math.log(q)) / df
    power = -math.exp(log_abs) if log_abs < 700.0 else -math.inf
    return cornish, power


def _t_lower(df: float, q: float) -> float:
    """t < 0 with P(T <= t) = q, 0 < q < 1/2: Newton's method inside a bracket, from the
    better of the two starting points (the one whose P(T <= t) is nearer q, in ratio)."""
    lo, hi = -math.inf, 0.0  # P(T <= lo) < q < P(T <= hi)
    half_gap = 0.5 - q  # exact for q in [1/4, 1/2); the residual's other form below

    def residual(t: float) -> tuple[float, float, float]:
        tail, centre, dens = _t_parts(df, t)
        # P(T <= t) - q, with the smaller terms where they cancel least.
        return (tail - q if q < 0.25 else half_gap - centre), tail, dens

    cornish, power = _t_guesses(df, q)
    if math.isinf(power) and (math.isinf(cornish) or cornish < -1e300):
        return -math.inf  # |t| beyond the doubles (df near 1 and q near the smallest doubles)
    tried = []
    for guess in (cornish, power):
        if not -math.inf < guess < 0.0:
            continue
        resid, tail, dens = residual(guess)
        if resid == 0.0:
            return guess
        if resid < 0.0:
            lo = max(lo, guess)
        else:
            hi = min(hi, guess)
        miss = abs(math.log(tail / q)) if tail > 0.0 else math.inf
        tried.append((miss, guess, resid, dens))
    _, t, resid, dens = min(tried)
    for _ in range(200):
        new = t - resid / dens if dens > 0.0 else math.nan
        if abs(new - t) <= 4.0 * _EPS * abs(t):
            return new  # Newton's last step is below the last digits
        if not lo < new < hi:  # a step out of the bracket (or none): bisect it instead
            if math.isinf(lo):
                new = 2.0 * t if t < -1.0 else t - 1.0
            elif hi == 0.0:
                new = 0.5 * lo
            else:
                new = -math.sqrt(lo * hi) if lo < 4.0 * hi else 0.5 * (lo + hi)
            if new in (lo, hi):
                return new  # the bracket is one ulp wide
        t = new
        resid, _, dens = residual(t)
        if resid == 0.0:
            return t
        if resid < 0.0:
            lo = t
        else:
            hi = t
    return t


# --------------------------------------------------------------------------- binomial


def bdtr(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p): I_{1-p}(n - k, k + 1); exact 0 below 0, 1 from n."""
    if math.isnan(p) or not 0.0 <= p <= 1.0 or n < 0:
        return math.nan
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    _, cdf, _ = _ibeta(k + 1.0, float(n - k), p, 1.0 - p)
    return cdf


def bdtrc(k: int, n: int, p: float) -> float:
    """P(X > k) for X ~ Binomial(n, p): I_p(k + 1, n - k); exact 1 below 0, 0 from n."""
    if math.isnan(p) or not 0.0 <= p <= 1.0 or n < 0:
        return math.nan
    if k < 0:
        return 1.0
    if k >= n:
        return 0.0
    sf, _, _ = _ibeta(k + 1.0, float(n - k), p, 1.0 - p)
    return sf
