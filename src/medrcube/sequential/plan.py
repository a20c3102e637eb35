"""How a sequential run samples and when it must stop: the order's seed, the batch size,
the looks of every check and the budgets."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

DEFAULT_BATCH_UNITS = 16
# Planned information fractions of every check's looks: interim looks early (where only
# overwhelming evidence stops a check), then the final analysis on all its images.
DEFAULT_LOOKS = (0.1, 0.2, 0.3, 0.4, 0.5, 1.0)
# A check stops asking for images (futility, non-binding: gate/sequential.py) when its
# claims' predictive power at its latest look is under this; None: never.
DEFAULT_FUTILITY = 0.001
MIN_LOOK_IMAGES = 10  # an interim look on fewer images is skipped (its normal law is too rough)


@dataclass(frozen=True, slots=True)
class SequentialPlan:
    """How a sequential run samples and when it must stop."""

    seed: int = 0
    batch_units: int = DEFAULT_BATCH_UNITS
    max_requests: int | None = None
    max_cost: float | None = None  # in the price table's currency
    looks: tuple[float, ...] = DEFAULT_LOOKS
    futility: float | None = DEFAULT_FUTILITY

    def fractions_for(self, images: int) -> tuple[float, ...]:
        """The looks of a check with `images` images: the planned interim looks that see
        at least MIN_LOOK_IMAGES images (and fewer than all), then the final one."""
        interim = sorted({t for t in self.looks if 0 < t < 1 and MIN_LOOK_IMAGES <= look_images(t, images) < images})
        return (*interim, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "batch_units": self.batch_units, "max_requests": self.max_requests,
                "max_cost": self.max_cost, "looks": list(self.looks),
                "futility": self.futility}


def look_images(fraction: float, images: int) -> int:
    """The images a check has seen at its look at `fraction` of its `images`."""
    return max(1, math.ceil(fraction * images - 1e-9))
