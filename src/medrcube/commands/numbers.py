"""argparse types for the commands' whole-number options.

A bad value (NaN, an infinity, a fraction, below the option's minimum) is argparse's usage
error: exit 2 and one `error:` line naming the option, the value as given and an example
of a good one. `int()` alone would already refuse "nan" and "1e400", but with argparse's
bare "invalid int value", no minimum and no fix.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def whole_number(option: str, *, minimum: int, example: str, maximum: int | None = None) -> Callable[[str], int]:
    """The type of a whole-number option that must be at least `minimum` (and at most
    `maximum`: a ceiling of models/ceilings.py)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{option} must be a whole number, got {text!r} (e.g. {option} {example})") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{option} must be at least {minimum}, got {value} (e.g. {option} {example})")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{option} is {value}, beyond the ceiling of {maximum} (e.g. {option} {example})")
        return value

    return parse
