"""metrics/special.py against scipy.special (the functions it replaces in the verdict path)
and against mpmath at 50 digits where scipy itself is not exact (cephes' bdtr and bdtrc
take lgamma(a + b) - lgamma(a) - lgamma(b) above a + b = 171: 2e-11 off at n = 10,000).

Tolerances are the measured maxima on these grids rounded up (metrics/special.py's docstring); a value
below 1e-300 is compared with an absolute bound of 1e-310 (subnormals carry few digits).
"""

from __future__ import annotations

import math
import subprocess
import sys

import mpmath
import pytest
import scipy.special as sc
from hypothesis import given, settings
from hypothesis import strategies as st

from medrcube.metrics import special as S

mpmath.mp.dps = 50


def rel(got: float, want: float) -> float:
    if got == want:
        return 0.0
    if abs(want) < 1e-300:
        return 0.0 if abs(got - want) <= 1e-310 else math.inf
    return abs(got - want) / abs(want)


def worst(pairs) -> float:
    return max(rel(g, w) for g, w in pairs)


def log_grid(lo: float, hi: float, n: int) -> list[float]:
    return [10.0 ** (lo + (hi - lo) * i / (n - 1)) for i in range(n)]


# Non-integer degrees of freedom from 1 to 1e6 (and a few integers, where closed forms exist).
DFS = [1.0, 1.5, 2.0, 2.7, 3.3, 5.5, 9.9, 10.0, 17.3, 33.138, 96.506, 318.015, 1234.5, 29932.3, 433079.8, 1e6]
LEVELS = [*log_grid(-12, math.log10(0.4999), 40), 0.5, *(1.0 - q for q in log_grid(-12, math.log10(0.4999), 40))]


# --------------------------------------------------------------------------- normal


def test_normal_cdf_and_quantile_match_scipy() -> None:
    xs = [-38.0 + 76.0 * i / 4000 for i in range(4001)]
    assert worst((S.ndtr(x), float(sc.ndtr(x))) for x in xs) <= 1e-13
    ps = [*log_grid(-300, -0.302, 2000), *(1.0 - q for q in log_grid(-16, -0.302, 500))]
    assert worst((S.ndtri(p), float(sc.ndtri(p))) for p in ps) <= 2e-15
    assert S.ndtri(0.0) == -math.inf and S.ndtri(1.0) == math.inf and S.ndtri(0.5) == 0.0
    assert math.isnan(S.ndtri(1.5)) and math.isnan(S.ndtri(-0.1)) and math.isnan(S.ndtri(math.nan))
    assert S.ndtr(math.inf) == 1.0 and S.ndtr(-math.inf) == 0.0


# --------------------------------------------------------------------------- Student's t


def mp_stdtr(df: float, t: float) -> mpmath.mpf:
    d, u = mpmath.mpf(df), mpmath.mpf(t)
    tail = mpmath.betainc(d / 2, mpmath.mpf(1) / 2, 0, d / (d + u * u), regularized=True) / 2
    return tail if u < 0 else 1 - tail


TS = [-s for s in log_grid(-10, 4, 57)] + log_grid(-10, 4, 57)


def test_t_cdf_matches_mpmath_and_scipy() -> None:
    scipy_off = []
    for df in DFS:
        for t in TS:
            got, theirs = S.stdtr(df, t), float(sc.stdtr(df, t))
            if theirs < 1e-290:  # beyond what mpmath's betainc settles quickly; scipy underflows too
                assert got < 1e-280, (df, t)
                continue
            try:
                want = float(mp_stdtr(df, t))
            except (ValueError, mpmath.libmp.NoConvergence):  # mpmath's hypergeometric series gave up (far tails at large df)
                assert rel(got, theirs) <= 3e-13, (df, t)
                continue
            assert rel(got, want) <= 2e-13, (df, t)
            if rel(theirs, want) <= 1e-13:
                assert rel(got, theirs) <= 3e-13, (df, t)
            else:
                scipy_off.append((df, t))
    # scipy.special 1.17's stdtr is 3.6e-9 off at df = 1 near t = 0 (this module: exact there).
    assert {df for df, _ in scipy_off} <= {1.0}


def test_t_cdf_edges() -> None:
    assert S.stdtr(3.0, 0.0) == 0.5 and S.stdtr(3.0, -math.inf) == 0.0 and S.stdtr(3.0, math.inf) == 1.0
    assert S.stdtr(math.inf, -1.5) == S.ndtr(-1.5)
    # df = 1 is Cauchy: P(T <= t) = 1/2 + atan(t) / pi; far out, 1 / (pi |t|).
    for t in (-1e-8, -0.3, -1.0, -7.0):
        assert rel(S.stdtr(1.0, t), 0.5 + math.atan(t) / math.pi) <= 1e-15
    assert rel(S.stdtr(1.0, -1e150), 1.0 / (math.pi * 1e150)) <= 5e-14
    assert math.isnan(S.stdtr(0.0, 1.0)) and math.isnan(S.stdtr(2.0, math.nan))


def test_t_quantile_matches_scipy_and_inverts_the_cdf() -> None:
    assert worst((S.stdtrit(df, p), float(sc.stdtrit(df, p))) for df in DFS for p in LEVELS) <= 1e-12
    for df in DFS:
        for p in LEVELS:
            t = S.stdtrit(df, p)
            assert rel(S.stdtr(df, t), p) <= 1e-13, (df, p, t)
    assert S.stdtrit(4.0, 0.0) == -math.inf and S.stdtrit(4.0, 1.0) == math.inf
    assert S.stdtrit(math.inf, 0.975) == S.ndtri(0.975)
    # df = 1: -cot(pi p), to the last digits in the far tail; df = 2: (2p - 1) / sqrt(2 p (1 - p)).
    for p in (1e-12, 1e-6, 0.01, 0.3):
        assert rel(S.stdtrit(1.0, p), -1.0 / math.tan(math.pi * p)) <= 1e-14
        assert rel(S.stdtrit(2.0, p), (2 * p - 1) / math.sqrt(2 * p * (1 - p))) <= 1e-14
    # Near the centre the quantile keeps its relative accuracy (the residual's other form):
    # P(T <= t) - 1/2 at the quantile found is (p - 1/2)(1 + 5e-16) by mpmath (scipy's: 1 + 1.1e-10).
    p = 0.5 + 1e-12
    t = S.stdtrit(7.5, p)
    assert abs((mp_stdtr(7.5, t) - mpmath.mpf(p)) / (mpmath.mpf(p) - 0.5)) <= 1e-14


# --------------------------------------------------------------------------- binomial


def mp_binom(k: int, n: int, p: float) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(P(X <= k), P(X > k)) as sums of positive terms at 50 digits (no cancellation)."""
    pp = mpmath.mpf(p)
    q = 1 - pp
    term = q**n  # P(X = 0)
    below = mpmath.mpf(0)
    total_terms = []
    for j in range(n + 1):
        total_terms.append(term)
        term = term * (n - j) / (j + 1) * pp / q if j < n else term
    below = mpmath.fsum(total_terms[: k + 1])
    above = mpmath.fsum(total_terms[k + 1:])
    return below, above


PS = [*log_grid(-12, math.log10(0.5), 14), *(1.0 - q for q in log_grid(-12, math.log10(0.5), 14))]


def test_binomial_tails_match_scipy_where_scipy_is_exact() -> None:
    cases = [(k, n, p) for n in (1, 2, 3, 7, 20, 61, 101, 169) for k in range(n) for p in PS]
    assert worst((S.bdtr(k, n, p), float(sc.bdtr(k, n, p))) for k, n, p in cases) <= 5e-13
    assert worst((S.bdtrc(k, n, p), float(sc.bdtrc(k, n, p))) for k, n, p in cases) <= 5e-13


@pytest.mark.parametrize("n", [500, 2000, 10_000])
def test_binomial_tails_match_exact_sums_up_to_ten_thousand(n: int) -> None:
    ks = sorted({0, 1, n // 100, n // 10, n // 3, n // 2, n - n // 10, n - 2, n - 1})
    for p in (1e-12, 1e-4, 0.003, 0.1, 0.37, 0.5, 0.9, 0.9999, 1 - 1e-12):
        for k in ks:
            below, above = mp_binom(k, n, p)
            assert rel(S.bdtr(k, n, p), float(below)) <= 1e-12, (k, n, p)
            assert rel(S.bdtrc(k, n, p), float(above)) <= 1e-12, (k, n, p)
    # scipy is off by up to 2.4e-11 here (cephes' lgamma differences); ours by 7.2e-13 at most.


def test_binomial_edges() -> None:
    assert S.bdtr(-1, 5, 0.3) == 0.0 and S.bdtr(5, 5, 0.3) == 1.0
    assert S.bdtrc(-1, 5, 0.3) == 1.0 and S.bdtrc(5, 5, 0.3) == 0.0
    assert S.bdtr(2, 5, 0.0) == 1.0 and S.bdtrc(2, 5, 0.0) == 0.0
    assert S.bdtr(2, 5, 1.0) == 0.0 and S.bdtrc(2, 5, 1.0) == 1.0
    assert math.isnan(S.bdtr(2, 5, 1.5)) and math.isnan(S.bdtrc(2, 5, math.nan))
    assert rel(S.bdtr(0, 10_000, 1e-4), (1 - 1e-4) ** 10_000) <= 1e-12


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 10_000), frac=st.floats(0, 1), p=st.floats(1e-12, 1 - 1e-12))
def test_binomial_tails_add_to_one_and_mirror(n: int, frac: float, p: float) -> None:
    k = min(n - 1, int(frac * n))
    lo, hi = S.bdtr(k, n, p), S.bdtrc(k, n, p)
    assert 0.0 <= lo <= 1.0 and 0.0 <= hi <= 1.0
    assert abs(lo + hi - 1.0) <= 1e-14
    # X ~ Binomial(n, p) <=> n - X ~ Binomial(n, 1 - p): P(X <= k) = P(n - X > n - k - 1).
    q = 1.0 - p
    if 1.0 - q == p:  # the mirror is exact only when 1 - p is
        assert rel(lo, S.bdtrc(n - k - 1, n, q)) <= 1e-12 or lo < 1e-300


@settings(max_examples=300, deadline=None)
@given(df=st.floats(1.0, 1e6), t=st.floats(-1e4, 1e4))
def test_t_cdf_is_symmetric_and_monotone(df: float, t: float) -> None:
    below, above = S.stdtr(df, t), S.stdtr(df, -t)
    assert abs(below + above - 1.0) <= 2e-16 * 4
    assert S.stdtr(df, t + abs(t) * 1e-3 + 1e-9) >= below


def test_the_verdict_path_imports_no_scipy() -> None:
    """The gate's intervals, p-values and power figures, computed in a fresh interpreter,
    import no scipy (importing scipy.special cost every run 0.34 s of CPU)."""
    code = (
        "import sys\n"
        "from medrcube.metrics import clustered, finite\n"
        "from medrcube.gate import evaluate, power\n"
        "print(clustered.t_quantile(0.975, 12.5), clustered.t_sf(2.0, 30.2))\n"
        "print(finite.interval([3, 2, 4, 1], [4, 4, 4, 4]))\n"
        "print(power.score_required_n(0.6, 0.7, 0.025), power.clustered_power(0.6, 0.7, 100, 0.025))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
