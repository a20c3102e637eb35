"""The registry of image perturbations: one `PerturbationKind` per kind, found by entry point.

A kind says what the house needs of it: its name (a variant's word, `jpeg` of `jpeg:30`),
its spec form and an example (the option help and every error), its levels (bounds,
integer or not; None: it takes none), where it is never asked (tasks, and items by their
question and options), whether a level keeps the item's region of interest in the frame,
and its transformation of decoded float pixels (run/perturb.py decodes, scales down to
the model's side, calls it, quantises and encodes).

The registry fills itself from the entry-point group `medrcube.perturbations`
(entrypoints.py) the first time it is read: the product's own kinds
(run/builtin_perturbations.py) and a site package's by the same path, in that order.
A new perturbation is one `PerturbationKind` named by an entry point of that group; the
variant parser, the plan, the robustness and agreement checks, gate.json and the report
take it with no other file changed. This module imports no numpy: the names are read with
the options, at every start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from medrcube import entrypoints

if TYPE_CHECKING:
    import numpy as np

GROUP = "medrcube.perturbations"
Box = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class Levels:
    """A kind's levels: `low`..`high` (`low` itself excluded when `above_low`)."""

    low: float
    high: float
    integer: bool = False
    above_low: bool = False


@dataclass(frozen=True, slots=True)
class PerturbationKind:
    """One kind of image perturbation (module docstring)."""

    name: str
    form: str  # the spec form in the variants' help: "jpeg:Q", "flip"
    example: str  # a valid spec: "jpeg:30", "flip"
    # (float pixels in [0, 1], (H, W) or (H, W, 3); the level; a factory of the generator
    # seeded by the kind, level, seed and source image) -> pixels of the same shape
    transform: Callable[[np.ndarray, float | None, Callable[[], np.random.Generator]], np.ndarray]
    levels: Levels | None = None  # None: the kind takes no level
    skips_tasks: tuple[str, ...] = ()  # tasks it is never asked on
    skips_item: Callable[[str, tuple[str, ...]], bool] | None = None  # (question, options) -> never asked
    # (level, source (width, height), the ROI box, the task) -> whether the ROI stays in frame
    keeps_roi: Callable[[float | None, tuple[int, int], Box, str], bool] | None = None
    jpeg_quality: bool = False  # the level is the JPEG quality the result is encoded at


_REGISTRY = entrypoints.Registry(GROUP, PerturbationKind, "perturbation")


def registered() -> tuple[PerturbationKind, ...]:
    """Every kind, in registration order (the robustness board's order)."""
    return _REGISTRY.all()


def names() -> tuple[str, ...]:
    return tuple(k.name for k in registered())


def kind_of(name: str) -> PerturbationKind | None:
    return _REGISTRY.get(name)


def examples() -> str:
    """"jpeg:30, lowres:256, ..., flip": one valid spec per kind."""
    return ", ".join(k.example for k in registered())
