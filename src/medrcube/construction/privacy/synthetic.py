"""Synthetic frames with burned-in text, and the truth about where the text is.

Used by the demo archive (frames whose pixels name their patient and carry no
BurnedInAnnotation attribute), by the tests and by the detection benchmark
(benchmarks/deid_ocr.py). Fonts come from packages only: Pillow's own (its bundled
scalable default and its old bitmap font) and the DejaVu and STIX faces that ship in
matplotlib's wheel, so every machine that installs medrcube has them. Backgrounds are
drawn here (a CT-like body section, a radiograph-like chest, an MR-like head, flat noise):
no real patient data.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Font name -> file in matplotlib's data folder ("" for Pillow's own faces).
FONT_FILES: dict[str, str] = {
    "pillow-default": "",  # Pillow's bundled scalable face (Aileron)
    "pillow-bitmap": "",  # Pillow's fixed 11-pixel bitmap face (sizes ignored): an old console's look
    "dejavu-sans": "DejaVuSans.ttf",
    "dejavu-sans-bold": "DejaVuSans-Bold.ttf",
    "dejavu-sans-mono": "DejaVuSansMono.ttf",
    "dejavu-serif": "DejaVuSerif.ttf",
    "stix-general": "STIXGeneral.ttf",
}
BACKGROUNDS = ("ct", "xray", "mr", "mammo", "noise")


@functools.lru_cache(maxsize=64)
def font(name: str, size: int) -> Any:
    """A Pillow font of `name` (a FONT_FILES key) at `size` pixels."""
    from PIL import ImageFont

    if name == "pillow-default":
        return ImageFont.load_default(size)
    if name == "pillow-bitmap":
        return ImageFont.load_default_imagefont()
    return ImageFont.truetype(str(font_dir() / FONT_FILES[name]), size)


def font_dir() -> Path:
    """matplotlib's bundled TrueType folder, found without importing matplotlib (an import is
    slow, and a half-imported matplotlib confuses test runs that drop modules afterwards)."""
    import importlib.util

    spec = importlib.util.find_spec("matplotlib")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("matplotlib (a medrcube dependency) is not installed: its wheel ships the DejaVu fonts used here")
    return Path(next(iter(spec.submodule_search_locations))) / "mpl-data" / "fonts" / "ttf"


def background(kind: str, h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """A [0, 1] frame of h x w pixels that looks like a CT, a radiograph, an MR, a mammogram or plain noise."""
    if kind == "mammo":
        return _mammogram(h, w, rng)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    cy, cx = h / 2 + rng.normal(0, 0.02 * h), w / 2 + rng.normal(0, 0.02 * w)
    if kind == "noise":
        return np.clip(rng.uniform(0.05, 0.5) + rng.normal(0, 0.04, (h, w)), 0, 1)
    if kind == "xray":
        img = 0.25 + 0.5 * np.exp(-(((xx - cx) / (0.55 * w)) ** 2)) * (0.6 + 0.4 * yy / h)
        for sx in (-1, 1):  # darker lungs with rib shadows
            lung = ((yy - 0.45 * h) / (0.3 * h)) ** 2 + ((xx - cx - sx * 0.2 * w) / (0.13 * w)) ** 2 <= 1
            img = np.where(lung, img - 0.25 + 0.06 * np.sin(yy / h * 40), img)
        img += 0.04 * rng.standard_normal((h, w))
        return np.clip(img, 0, 1)
    a, b = (0.42, 0.45) if kind == "ct" else (0.4, 0.33)
    body = ((yy - cy) / (a * h)) ** 2 + ((xx - cx) / (b * w)) ** 2 <= 1
    img = np.where(body, 0.55, 0.02)
    for _ in range(int(rng.integers(3, 7))):  # organs, vessels, lesions
        oy, ox, r = rng.uniform(0.3, 0.7) * h, rng.uniform(0.3, 0.7) * w, rng.uniform(0.03, 0.12) * min(h, w)
        img = np.where(((yy - oy) ** 2 + (xx - ox) ** 2 <= r * r) & body, rng.uniform(0.2, 0.95), img)
    if kind == "ct":  # a table under the patient
        img[int(0.9 * h) : int(0.93 * h), int(0.1 * w) : int(0.9 * w)] = 0.45
    from scipy import ndimage

    img = ndimage.gaussian_filter(img, 0.6) + rng.normal(0, 0.035 if kind == "ct" else 0.05, (h, w))
    return np.clip(img, 0, 1)


def _mammogram(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """A mammogram-like frame: a breast against the chest wall (left or right), fibroglandular
    texture, a pectoral muscle in the upper corner, dark air around it."""
    from scipy import ndimage

    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    right = bool(rng.random() < 0.5)
    x = (w - 1 - xx) if right else xx  # distance from the chest wall
    depth, cy = rng.uniform(0.6, 0.8) * w, h * rng.uniform(0.45, 0.55)
    breast = (x / depth) ** 2 + ((yy - cy) / (0.45 * h)) ** 2 <= 1
    # Texture: noise smoothed at a few scales, denser near the chest wall (computed small, then enlarged).
    small = max(8, min(h, w) // 8)
    tex = ndimage.gaussian_filter(rng.standard_normal((small, small)), 2.0)
    tex = ndimage.zoom(tex, (h / small, w / small), order=1)[:h, :w]
    tex = np.pad(tex, ((0, h - tex.shape[0]), (0, w - tex.shape[1])), mode="edge")
    dense = 0.35 + 0.25 * np.clip(1 - x / depth, 0, 1) + 0.5 * tex / (np.abs(tex).max() + 1e-9) * 0.3
    img = np.where(breast, dense, 0.03).astype(np.float64)
    pect = (x / (0.35 * w) + yy / (0.45 * h)) <= 1
    img = np.where(pect & breast, 0.75, img)
    img += rng.normal(0, 0.02, (h, w))
    return np.clip(img, 0, 1)


VISIBLE = 0.05  # of full scale: a glyph pixel closer than this to its smoothed ground is not seen (panel noise is 0.02-0.05)


@dataclass(frozen=True, slots=True)
class Burned:
    """One line of text burned into a frame: what, where (tight box of its glyph pixels), how."""

    text: str
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 end-exclusive
    font: str
    size: int
    value: float  # the gray level of the glyphs
    glyphs: np.ndarray  # bool mask of the glyph pixels, the frame's size
    # The glyph pixels that stand out from what they were drawn over (by VISIBLE of full scale or more):
    # a fixed grey over varying anatomy vanishes where the anatomy has that grey, and what vanished cannot be read.
    visible: np.ndarray | None = None


def burn(img: np.ndarray, text: str, xy: tuple[int, int], font_name: str, size: int, value: float) -> tuple[np.ndarray, Burned]:
    """`img` with `text` drawn at `xy` (top left) in a gray level `value`; the line's truth."""
    from PIL import Image, ImageDraw

    h, w = img.shape[:2]
    layer = Image.new("L", (w, h), 0)
    ImageDraw.Draw(layer).text(xy, text, fill=255, font=font(font_name, size))
    alpha = np.asarray(layer, dtype=np.float64) / 255.0
    out = img * (1 - alpha) + value * alpha
    glyphs = alpha > 0.5
    ys, xs = np.nonzero(glyphs)
    box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1) if len(xs) else (0, 0, 0, 0)
    visible = glyphs.copy()
    if len(xs):
        from scipy import ndimage

        x0, y0, x1, y1 = (max(0, box[0] - 8), max(0, box[1] - 8), box[2] + 8, box[3] + 8)
        under = np.asarray(img, dtype=np.float64)[y0:y1, x0:x1]
        under = ndimage.gaussian_filter(under.mean(axis=2) if under.ndim == 3 else under, 2.0)  # the ground, without the panel's noise
        visible[y0:y1, x0:x1] &= np.abs(value - under) >= VISIBLE
    return out, Burned(text, box, font_name, size, value, glyphs, visible)


def text_size(text: str, font_name: str, size: int) -> tuple[int, int]:
    """(width, height) in pixels of `text` drawn in the font."""
    x0, y0, x1, y1 = font(font_name, size).getbbox(text)
    return int(x1), int(y1)


def coverage(b: Burned, masked: np.ndarray, visible_only: bool = False) -> float:
    """The share of the line's glyph pixels (or of its visible ones) that lie inside masked pixels (bool, the frame's size)."""
    glyphs = b.visible if visible_only and b.visible is not None else b.glyphs
    n = int(glyphs.sum())
    return float((glyphs & masked).sum()) / n if n else 1.0


def glyph_correlation(b: Burned, exported: np.ndarray) -> float:
    """Pearson correlation, over the line's box, between the glyph mask and the pixels: near 0 once masked."""
    x0, y0, x1, y1 = b.box
    g = b.glyphs[y0:y1, x0:x1].astype(np.float64).ravel()
    p = np.asarray(exported, dtype=np.float64)[y0:y1, x0:x1]
    p = (p.mean(axis=2) if p.ndim == 3 else p).ravel()
    if g.std() == 0 or p.std() == 0:
        return 0.0
    return float(np.corrcoef(g, p)[0, 1])
