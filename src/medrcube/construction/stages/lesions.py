"""Synthetic lesions with known truth: a round focal lesion placed in a chosen image quadrant
at a chosen size class, inside the anatomy.

The truth of the high-level items built on them (present or absent, which quadrant, which
size class) is known by construction, never guessed. Each lesion lies wholly inside its
quadrant, with a margin from the midlines, and wholly inside an allowed mask (the body,
or an organ such as the lungs), so the answer is unambiguous.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

QUADRANTS: tuple[str, ...] = ("upper left", "upper right", "lower left", "lower right")


@dataclass(frozen=True, slots=True)
class SizeClass:
    """A size class by lesion diameter as a fraction of the image's shorter side."""

    name: str
    low: float  # inclusive
    high: float  # exclusive
    nominal: float  # the diameter fraction a lesion of this class is drawn with

    def label(self) -> str:
        if self.low == 0:
            return f"{self.name.capitalize()} (under {self.high:.0%} of the shorter image side)"
        if self.high >= 1:
            return f"{self.name.capitalize()} (over {self.low:.0%} of the shorter image side)"
        return f"{self.name.capitalize()} ({self.low:.0%} to {self.high:.0%} of the shorter image side)"


# Nominal sizes sit well inside their class, so a one-pixel rendering error cannot change it.
SIZE_CLASSES: tuple[SizeClass, ...] = (
    SizeClass("small", 0.0, 0.08, 0.055),
    SizeClass("medium", 0.08, 0.14, 0.11),
    SizeClass("large", 0.14, 0.25, 0.18),
    SizeClass("very large", 0.25, 1.0, 0.30),
)
SIZE_BY_NAME: dict[str, SizeClass] = {s.name: s for s in SIZE_CLASSES}


class NoRoom(ValueError):
    """The lesion does not fit inside the allowed region of that quadrant."""


@dataclass(frozen=True, slots=True)
class Lesion:
    """Where a synthetic lesion was drawn (pixel coordinates of the output image)."""

    quadrant: str
    size_class: str
    center: tuple[int, int]  # (row, col)
    diameter_px: float
    diameter_fraction: float  # diameter / shorter image side
    polarity: int  # +1 brighter than its surroundings, -1 darker

    def to_meta(self) -> dict[str, object]:
        return {
            "quadrant": self.quadrant,
            "size_class": self.size_class,
            "center_row_col": list(self.center),
            "diameter_px": round(self.diameter_px, 2),
            "diameter_fraction": round(self.diameter_fraction, 4),
            "polarity": "brighter" if self.polarity > 0 else "darker",
        }


def size_class_of(fraction: float) -> str:
    """The size class whose range holds a diameter fraction."""
    for s in SIZE_CLASSES:
        if s.low <= fraction < s.high:
            return s.name
    raise ValueError(f"diameter fraction {fraction} is outside every size class")


def body_mask(img01: np.ndarray, threshold: float = 0.12, smooth: float = 2.0) -> np.ndarray:
    """Pixels inside the imaged anatomy: a smoothed image above `threshold`, holes filled."""
    gray = img01 if img01.ndim == 2 else img01.mean(axis=2)
    mask = ndimage.gaussian_filter(gray, smooth) > threshold
    filled: np.ndarray = ndimage.binary_fill_holes(mask)  # scipy has no type information
    return filled


def textured_mask(img01: np.ndarray, size: int = 5, min_std: float = 0.01) -> np.ndarray:
    """Pixels inside the imaged anatomy when the background is a flat (but not black) fill,
    as around an ultrasound sector: anatomy has texture, the fill has none."""
    gray = img01 if img01.ndim == 2 else img01.mean(axis=2)
    mean = ndimage.uniform_filter(gray, size)
    var = np.maximum(ndimage.uniform_filter(gray * gray, size) - mean * mean, 0.0)
    mask = ndimage.binary_closing(np.sqrt(var) >= min_std, iterations=3)
    filled: np.ndarray = ndimage.binary_fill_holes(mask)  # scipy has no type information
    return filled


def quadrant_box(shape: tuple[int, int], quadrant: str) -> tuple[slice, slice]:
    h, w = shape
    rows = slice(0, h // 2) if quadrant.startswith("upper") else slice(h - h // 2, h)
    cols = slice(0, w // 2) if quadrant.endswith("left") else slice(w - w // 2, w)
    return rows, cols


def quadrant_of(shape: tuple[int, int], center: tuple[float, float]) -> str:
    """The quadrant of a (row, col) point (used to check a placement)."""
    h, w = shape
    r, c = center
    return ("upper" if r < h / 2 else "lower") + " " + ("left" if c < w / 2 else "right")


def insert_lesion(
    img01: np.ndarray,
    allowed: np.ndarray,
    quadrant: str,
    size_class: str,
    rng: np.random.Generator,
    *,
    contrast: float = 0.5,
    polarity: int = 1,
    texture: float = 0.025,
) -> tuple[np.ndarray, Lesion]:
    """Draw a round lesion into a [0, 1] image (2-D, or H x W x 3 drawn in gray).

    The lesion's value moves `contrast` of the way from the local background towards
    white (polarity +1) or black (-1), with a soft one-pixel edge and a fine random
    texture so that it does not look pasted. Raises NoRoom when no centre in the
    quadrant keeps the whole disc inside `allowed` and inside the quadrant.
    """
    if quadrant not in QUADRANTS:
        raise ValueError(f"quadrant must be one of {QUADRANTS}, got {quadrant!r}")
    if size_class not in SIZE_BY_NAME:
        raise ValueError(f"size class must be one of {tuple(SIZE_BY_NAME)}, got {size_class!r}")
    if polarity not in (1, -1):
        raise ValueError(f"polarity must be +1 or -1, got {polarity}")
    h, w = img01.shape[:2]
    short = min(h, w)
    diameter = SIZE_BY_NAME[size_class].nominal * short
    radius = diameter / 2.0
    margin = max(2.0, 0.02 * short)  # keeps the disc clear of the midlines and edges

    region = np.zeros((h, w), dtype=bool)
    rows, cols = quadrant_box((h, w), quadrant)
    region[rows, cols] = True
    region &= np.asarray(allowed, dtype=bool)
    # Distance to the nearest pixel outside (allowed AND quadrant); the image border counts as outside.
    padded = np.pad(region, 1, constant_values=False)
    dist = ndimage.distance_transform_edt(padded)[1:-1, 1:-1]
    candidates = np.argwhere(dist >= radius + margin)
    if len(candidates) == 0:
        raise NoRoom(f"no room for a {size_class} lesion (diameter {diameter:.1f} px) in the {quadrant} quadrant")
    r0, c0 = (int(v) for v in candidates[rng.integers(len(candidates))])

    yy, xx = np.mgrid[0:h, 0:w]
    d = np.hypot(yy - r0, xx - c0)
    # A soft edge (smoothstep over ~15% of the radius) and a blotchy interior: a lesion
    # that does not look pasted, but whose extent is still the nominal diameter.
    edge = max(1.0, 0.15 * radius)
    t = np.clip((radius - d) / edge + 0.5, 0.0, 1.0)
    weight = t * t * (3.0 - 2.0 * t)
    gray = img01 if img01.ndim == 2 else img01.mean(axis=2)
    background = float(np.median(gray[d <= radius]))
    target = background + contrast * ((1.0 - background) if polarity > 0 else -background)
    blotch = ndimage.gaussian_filter(rng.normal(0.0, 1.0, size=(h, w)), max(1.0, radius / 4.0))
    blotch /= max(float(blotch[d <= radius].std()), 1e-9)
    grain = rng.normal(0.0, 1.0, size=(h, w))
    value = target + texture * (1.5 * blotch + 0.5 * grain)
    keep = 0.15  # a little of the underlying anatomy shows through
    if img01.ndim == 3:
        weight, value = weight[..., None], value[..., None]
    out = np.clip(img01 * (1.0 - weight * (1.0 - keep)) + value * weight * (1.0 - keep), 0.0, 1.0)

    lesion = Lesion(quadrant, size_class, (r0, c0), diameter, diameter / short, polarity)
    if quadrant_of((h, w), (r0, c0)) != quadrant or size_class_of(lesion.diameter_fraction) != size_class:
        raise AssertionError(f"lesion placement check failed: {lesion}")  # cannot happen; guards the truth
    return out, lesion
