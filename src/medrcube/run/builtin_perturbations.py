"""The product's own image perturbations (run/perturbations.py), named by the entry point
`core` of the group `medrcube.perturbations` in pyproject.toml:

    kind        level                              example     applies to
    jpeg        JPEG quality 1..95                 jpeg:30     every task
    lowres      longest side in pixels, and back   lowres:256  every task
    noise       Gaussian sigma, fraction of range  noise:0.03  every task
    poisson     relative noise at full intensity   poisson:0.05 every task
    window      window width factor (contrast)     window:0.8  every task
    brightness  window level shift, fraction       brightness:0.1 every task
    rotate      degrees, |level| <= 15             rotate:5    every task; ROI kept
    crop        central fraction kept, 0.5..<1     crop:0.9    all but Severity Grading; ROI kept
    flip        horizontal flip (no level)         flip        not ROI Grounding, never an
                                                               item that mentions left/right

Why each applicability rule: a horizontal flip swaps left and right, so it changes the
right answer of ROI Grounding ("in which quadrant") and of any question or option
naming a side; a crop resized back enlarges everything by 1/level, which changes a size
grade relative to the image side; a rotation or crop must keep the region of interest
(the item's `meta.lesion` circle or `meta.bbox`) inside the frame, and for ROI
Grounding in its quadrant.

numpy and PIL are imported in the transformations: this module is read with the options.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from medrcube.run.perturbations import Box, Levels, PerturbationKind

if TYPE_CHECKING:
    import numpy as np

ROI_GROUNDING = "ROI Grounding"
SEVERITY_GRADING = "Severity Grading"
# Words that make an item's answer depend on the side: such an item is never flipped.
_SIDE_WORDS = re.compile(
    r"\b(left|right|leftward|rightward|laterality|contralateral|ipsilateral|sinistral|dextral|levo\w*|dextro\w*)\b",
    re.IGNORECASE,
)
Rng = Callable[[], "np.random.Generator"]


def _resample(pixels: np.ndarray, size: tuple[int, int], method: int) -> np.ndarray:
    """Resize float pixels through 8-bit-free float images (mode F per channel)."""
    import numpy as np
    from PIL import Image

    planes = [pixels] if pixels.ndim == 2 else [pixels[..., i] for i in range(pixels.shape[2])]
    out = [np.asarray(Image.fromarray(pl.astype(np.float32), mode="F").resize(size, method), dtype=np.float32)
           for pl in planes]
    return out[0] if pixels.ndim == 2 else np.stack(out, axis=-1)


def _flip(pixels: np.ndarray, level: float | None, rng: Rng) -> np.ndarray:
    return pixels[:, ::-1].copy()


def _jpeg(pixels: np.ndarray, level: float | None, rng: Rng) -> np.ndarray:
    return pixels  # the loss is the encoder's (run/perturb.py encodes at the level's quality)


def _lowres(pixels: np.ndarray, level: float | None, rng: Rng) -> np.ndarray:
    from PIL import Image

    h, w = pixels.shape[:2]
    scale = min(1.0, float(level or 0) / max(h, w))
    small = (max(1, round(w * scale)), max(1, round(h * scale)))
    down = _resample(pixels, small, Image.Resampling.BOX)  # area averaging, like detector binning
    return _resample(down, (w, h), Image.Resampling.BILINEAR)


def _noise(pixels: np.ndarray, level: float | None, rng: Rng) -> np.ndarray:
    import numpy as np

    return pixels + rng().normal(0.0, float(level or 0), pixels.shape).astype(np.float32)


def _poisson(pixels: np.ndarray, level: float | None, rng: Rng) -> np.ndarray:
    import numpy as np

    photons = 1.0 / (float(level or 0) ** 2)  # relative std 1/sqrt(photons) = level at full intensity
    counts: np.ndarray = rng().poisson(np.clip(pixels, 0.0, 1.0) * photons)
    return (counts / photons).astype(np.float32)


def _window(pixels: np.ndarray, level: float | None, rng: Rng) -> np.ndarray:
    return (pixels - 0.5) / float(level or 1) + 0.5  # width x level around the display centre


def _brightness(pixels: np.ndarray, level: float | None, rng: Rng) -> np.ndarray:
    return pixels + float(level or 0)


def _rotate(pixels: np.ndarray, level: float | None, rng: Rng) -> np.ndarray:
    import numpy as np
    from PIL import Image

    degrees = float(level or 0)
    if degrees == 0:
        return pixels
    planes = [pixels] if pixels.ndim == 2 else [pixels[..., i] for i in range(pixels.shape[2])]
    out = [np.asarray(Image.fromarray(pl.astype(np.float32), mode="F").rotate(
        degrees, Image.Resampling.BICUBIC, expand=False, fillcolor=0.0), dtype=np.float32) for pl in planes]
    return out[0] if pixels.ndim == 2 else np.stack(out, axis=-1)


def _crop(pixels: np.ndarray, level: float | None, rng: Rng) -> np.ndarray:
    from PIL import Image

    h, w = pixels.shape[:2]
    kept = float(level or 1)
    mx, my = round(w * (1 - kept) / 2), round(h * (1 - kept) / 2)
    inner = pixels[my : h - my or h, mx : w - mx or w]
    return _resample(inner, (w, h), Image.Resampling.BICUBIC)


def _crop_keeps(level: float | None, size: tuple[int, int], box: Box, task: str) -> bool:
    w, h = size
    x0, y0, x1, y1 = box
    kept = float(level or 1)
    mx, my = w * (1 - kept) / 2, h * (1 - kept) / 2
    return x0 >= mx and y0 >= my and x1 <= w - mx and y1 <= h - my  # central: quadrants kept


def _rotate_keeps(level: float | None, size: tuple[int, int], box: Box, task: str) -> bool:
    w, h = size
    x0, y0, x1, y1 = box
    cx, cy = w / 2, h / 2
    t = math.radians(float(level or 0))
    corners = [(x0, y0), (x1, y0), (x0, y1), (x1, y1)]
    cos, sin = math.cos(t), math.sin(t)  # PIL rotates counter-clockwise as displayed (y down)
    moved = [(cx + (x - cx) * cos + (y - cy) * sin, cy - (x - cx) * sin + (y - cy) * cos) for x, y in corners]
    inside = all(0 <= x <= w and 0 <= y <= h for x, y in moved)
    if task != ROI_GROUNDING:
        return inside
    mxc, myc = sum(x for x, _ in moved) / 4, sum(y for _, y in moved) / 4
    ox, oy = (x0 + x1) / 2, (y0 + y1) / 2
    return inside and (mxc < cx) == (ox < cx) and (myc < cy) == (oy < cy)


def _names_a_side(question: str, options: tuple[str, ...]) -> bool:
    return any(_SIDE_WORDS.search(t) for t in (question, *options))


BUILTIN: tuple[PerturbationKind, ...] = (
    PerturbationKind("jpeg", "jpeg:Q", "jpeg:30", _jpeg, Levels(1, 95, integer=True), jpeg_quality=True),
    PerturbationKind("lowres", "lowres:PX", "lowres:256", _lowres, Levels(16, 4096, integer=True)),
    PerturbationKind("noise", "noise:SIGMA", "noise:0.03", _noise, Levels(0.0, 0.5, above_low=True)),
    PerturbationKind("poisson", "poisson:LEVEL", "poisson:0.05", _poisson, Levels(0.0, 0.5, above_low=True)),
    PerturbationKind("window", "window:WIDTH", "window:0.8", _window, Levels(0.25, 4.0)),
    PerturbationKind("brightness", "brightness:SHIFT", "brightness:0.1", _brightness, Levels(-0.5, 0.5)),
    PerturbationKind("rotate", "rotate:DEG", "rotate:5", _rotate, Levels(-15.0, 15.0), keeps_roi=_rotate_keeps),
    PerturbationKind("crop", "crop:FRACTION", "crop:0.9", _crop, Levels(0.5, 0.99),
                     skips_tasks=(SEVERITY_GRADING,), keeps_roi=_crop_keeps),
    PerturbationKind("flip", "flip", "flip", _flip, None, skips_tasks=(ROI_GROUNDING,), skips_item=_names_a_side),
)
