"""How likely a check is to pass, and how many items it needs.

A check sees k correct answers out of n graded items. If the model's true accuracy is
p, k ~ Binomial(n, p) and the probability that the check passes is exact:

    P(pass) = sum over k with passes(k, n) of C(n, k) p^k (1 - p)^(n - k).

The decision rules:
- `point`: pass when k / n >= bound;
- `lower_bound`: pass when the lower end of the Wilson interval at `confidence` is
  >= bound. Its smallest passing k has a closed form: the Wilson lower bound of k/n
  is >= b exactly when k/n >= b + z sqrt(b (1 - b) / n) (b lies below the score
  interval), so k_min = ceil(n b + z sqrt(n b (1 - b))), checked against the rule.

Power assumes independent items (no image clustering); on slices where chains share
images the cluster-aware interval is wider, so these numbers are a lower bound on the
items needed there.

Power is not monotone in n (the binomial lattice makes it saw-toothed): `required_n`
returns the smallest n reaching the target, as asked; a few larger n may dip below it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from medrcube.metrics.accuracy import wilson_interval, z_value

RULES: tuple[str, ...] = ("point", "lower_bound")
RULE_TEXT = {"point": "a point-estimate check", "lower_bound": "a lower-bound check"}
DEFAULT_POWER = 0.8
N_MAX = 200_000


def _check_rule(rule: str) -> None:
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}: choose one of {', '.join(RULES)}")


def passes(k: int, n: int, rule: str, bound: float, confidence: float = 0.95) -> bool:
    """The decision of an (unclustered) check with k correct of n graded items."""
    _check_rule(rule)
    if n <= 0:
        return False
    if rule == "point":
        return k / n >= bound
    return wilson_interval(k, n, confidence)[0] >= bound


def min_successes(n: int, rule: str, bound: float, confidence: float = 0.95) -> int | None:
    """The smallest k for which the check passes on n items, None if no k does."""
    _check_rule(rule)
    if n <= 0:
        return None
    if rule == "point":
        guess = math.ceil(n * bound)
    else:
        z = z_value(confidence)
        guess = math.ceil(n * bound + z * math.sqrt(max(0.0, n * bound * (1.0 - bound))))
    # The closed forms can be off by one in floating point: settle on the rule itself.
    k = min(max(guess, 0), n)
    while k > 0 and passes(k - 1, n, rule, bound, confidence):
        k -= 1
    while k <= n and not passes(k, n, rule, bound, confidence):
        k += 1
    return k if k <= n else None


def pass_probability(rule: str, bound: float, accuracy: float, n: int, confidence: float = 0.95) -> float:
    """Exact probability that the check passes on n items when the true accuracy is `accuracy`."""
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"accuracy must be in [0, 1], got {accuracy!r}")
    k = min_successes(n, rule, bound, confidence)
    if k is None:
        return 0.0
    from scipy.stats import binom

    return float(binom.sf(k - 1, n, accuracy))


def required_n(
    rule: str,
    bound: float,
    accuracy: float,
    confidence: float = 0.95,
    power: float = DEFAULT_POWER,
    n_max: int = N_MAX,
) -> int | None:
    """The smallest n whose pass probability reaches `power`; None if none up to n_max."""
    _check_rule(rule)
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"accuracy must be in [0, 1], got {accuracy!r}")
    # A point check at p <= bound passes about half the time at best, a lower-bound
    # check at p <= bound ever less: no n reaches 80%. Saves the whole search.
    if accuracy <= bound and power > 0.5:
        return None
    import numpy as np
    from scipy.stats import binom

    z = z_value(confidence)
    start = 1
    step = 256
    while start <= n_max:
        ns = np.arange(start, min(n_max, start + step - 1) + 1)
        if rule == "point":
            ks = np.ceil(ns * bound - 1e-9)
        else:
            ks = np.ceil(ns * bound + z * np.sqrt(ns * bound * (1.0 - bound)) - 1e-9)
        ks = np.clip(ks, 0, None)
        probs = np.where(ks <= ns, binom.sf(ks - 1, ns, accuracy), 0.0)
        # The vectorised k's can be off by one in floating point, which moves P(pass) by
        # at most one binomial term (< 0.02 beyond n = 2000): take every n within that
        # slack as a candidate and confirm it with the exact rule.
        slack = np.where(ns < 2000, 0.3, 0.02)
        hits = np.nonzero(probs >= power - slack)[0]
        for i in hits:
            n = int(ns[i])
            if pass_probability(rule, bound, accuracy, n, confidence) >= power:
                return n
        start += step
        step = min(step * 2, 16384)
    return None


@dataclass(frozen=True, slots=True)
class PowerReport:
    rule: str
    confidence: float
    bound: float
    accuracy: float
    n: int | None
    probability: float | None  # P(pass) at n, when n is given
    required_n: int | None  # smallest n with P(pass) >= power
    power: float

    def text(self) -> str:
        head = (
            f"{RULE_TEXT[self.rule]} against {self.bound:.2f}"
            + (f" at {self.confidence:.0%} confidence" if self.rule == "lower_bound" else "")
            + f", true accuracy {self.accuracy:.2f}"
        )
        lines = [head]
        if self.n is not None:
            lines.append(f"P(pass) with n={self.n}: {self.probability:.3f}")
        if self.required_n is None:
            lines.append(f"n for {self.power:.0%} power: unreachable ({_why_unreachable(self)})")
        else:
            lines.append(f"n for {self.power:.0%} power: {self.required_n}")
        return "\n".join(lines)


def _why_unreachable(r: PowerReport) -> str:
    if r.accuracy <= r.bound:
        return f"a true accuracy of {r.accuracy:.2f} does not exceed the bound {r.bound:.2f}"
    return f"not reached below n={N_MAX}"


def power_report(
    rule: str,
    bound: float,
    accuracy: float,
    n: int | None = None,
    confidence: float = 0.95,
    power: float = DEFAULT_POWER,
) -> PowerReport:
    prob = pass_probability(rule, bound, accuracy, n, confidence) if n is not None else None
    return PowerReport(
        rule, confidence, bound, accuracy, n, prob, required_n(rule, bound, accuracy, confidence, power), power
    )


def planning_accuracy(bound: float, observed: float | None) -> float:
    """The true accuracy a skip message plans for: the observed one when it clears the
    bound by a useful margin, else bound + 0.10 (capped at 0.99)."""
    if observed is not None and observed >= bound + 0.05:
        return min(observed, 0.99)
    return min(bound + 0.10, 0.99)


def needed_n_text(
    rule: str, bound: float, observed: float | None, confidence: float = 0.95, power: float = DEFAULT_POWER
) -> str:
    """'at a true accuracy of 0.70 a lower-bound check against 0.60 needs n>=153 for 80% power'."""
    p = planning_accuracy(bound, observed)
    need = required_n(rule, bound, p, confidence, power)
    what = f"at a true accuracy of {p:.2f} {RULE_TEXT[rule]} against {bound:.2f}"
    if need is None:
        return f"{what} cannot reach {power:.0%} power"
    return f"{what} needs n>={need} for {power:.0%} power"
