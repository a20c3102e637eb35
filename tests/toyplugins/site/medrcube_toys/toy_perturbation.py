"""The image perturbation `invert`: the negative of the image (it takes no level)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from medrcube.run.perturbations import PerturbationKind


def invert(pixels: Any, level: float | None, rng: Callable[[], Any]) -> Any:
    return 1.0 - pixels


INVERT = PerturbationKind("invert", "invert", "invert", invert)
