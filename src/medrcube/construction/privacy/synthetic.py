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
    """A [0, 1] float32 frame of h x w pixels that looks like a CT, a radiograph, an MR, a mammogram or plain noise.

    Drawn at full resolution with sharp edges (a blurred edge would spare the text screen the
    strokes anatomy makes), but cheaply: coordinates as a row and a column broadcast against each
    other (no full-frame grid), organs drawn inside their own bounding boxes, float32 throughout
    (a 4,096 px body in 0.2-0.7 s of CPU, not 1.3-3.7 s)."""
    if kind == "mammo":
        return _mammogram(h, w, rng)
    yy = np.arange(h, dtype=np.float32)[:, None]
    xx = np.arange(w, dtype=np.float32)[None, :]
    cy, cx = h / 2 + rng.normal(0, 0.02 * h), w / 2 + rng.normal(0, 0.02 * w)
    if kind == "noise":
        return _noisy(np.full((h, w), rng.uniform(0.05, 0.5), np.float32), 0.04, rng)
    if kind == "xray":
        img = 0.25 + 0.5 * np.exp(-(((xx - cx) / (0.55 * w)) ** 2)) * (0.6 + 0.4 * yy / h)
        ribs = (0.06 * np.sin(yy / h * 40)).astype(np.float32)
        for sx in (-1, 1):  # darker lungs with rib shadows
            lung = ((yy - 0.45 * h) / (0.3 * h)) ** 2 + ((xx - cx - sx * 0.2 * w) / (0.13 * w)) ** 2 <= 1
            img = np.where(lung, img - 0.25 + ribs, img)
        return _noisy(img.astype(np.float32), 0.04, rng)
    a, b = (0.42, 0.45) if kind == "ct" else (0.4, 0.33)
    body = _inside(((yy - cy) / (a * h)) ** 2 + ((xx - cx) / (b * w)) ** 2, min(a * h, b * w))
    img = np.float32(0.02) + np.float32(0.53) * body
    for _ in range(int(rng.integers(3, 7))):  # organs, vessels, lesions
        oy, ox, r = rng.uniform(0.3, 0.7) * h, rng.uniform(0.3, 0.7) * w, rng.uniform(0.03, 0.12) * min(h, w)
        level = np.float32(rng.uniform(0.2, 0.95))
        y0, y1, x0, x1 = max(0, int(oy - r) - 2), min(h, int(oy + r) + 3), max(0, int(ox - r) - 2), min(w, int(ox + r) + 3)
        disc = _inside(((yy[y0:y1] - oy) ** 2 + (xx[:, x0:x1] - ox) ** 2) / (r * r), r) * body[y0:y1, x0:x1]
        img[y0:y1, x0:x1] += disc * (level - img[y0:y1, x0:x1])
    if kind == "ct":  # a table under the patient
        img[int(0.9 * h) : int(0.93 * h), int(0.1 * w) : int(0.9 * w)] = 0.45
    return _noisy(img, 0.035 if kind == "ct" else 0.05, rng)


def _inside(q: np.ndarray, radius: float) -> np.ndarray:
    """How much of each pixel lies inside the ellipse q <= 1 (q its normalised equation, `radius` its
    smaller half-axis in px): a sharp edge, anti-aliased over about 1.5 px as a slight blur of the panel
    would, without filtering the whole frame (near the edge, the distance to it is (1 - q) * radius / 2)."""
    share: np.ndarray = np.clip(np.float32(0.5) + (1 - q) * np.float32(radius / 3.0), 0, 1).astype(np.float32, copy=False)
    return share


def _noisy(img: np.ndarray, sd: float, rng: np.random.Generator) -> np.ndarray:
    """`img` (float32) plus the panel's Gaussian noise, clipped to [0, 1], in place."""
    img += np.float32(sd) * rng.standard_normal(img.shape, dtype=np.float32)
    return np.clip(img, 0, 1, out=img)


def _mammogram(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """A mammogram-like frame: a breast against the chest wall (left or right), fibroglandular
    texture, a pectoral muscle in the upper corner, dark air around it."""
    from scipy import ndimage

    yy = np.arange(h, dtype=np.float32)[:, None]
    xx = np.arange(w, dtype=np.float32)[None, :]
    right = bool(rng.random() < 0.5)
    x = (w - 1 - xx) if right else xx  # distance from the chest wall
    depth, cy = rng.uniform(0.6, 0.8) * w, h * rng.uniform(0.45, 0.55)
    breast = (x / depth) ** 2 + ((yy - cy) / (0.45 * h)) ** 2 <= 1
    # Texture: noise smoothed at a few scales, denser near the chest wall (computed small, then enlarged).
    small = max(8, min(h, w) // 8)
    tex = ndimage.gaussian_filter(rng.standard_normal((small, small)).astype(np.float32), 2.0)
    tex = ndimage.zoom(tex, (h / small, w / small), order=1)[:h, :w]
    tex = np.pad(tex, ((0, h - tex.shape[0]), (0, w - tex.shape[1])), mode="edge")
    dense = 0.35 + 0.25 * np.clip(1 - x / depth, 0, 1) + 0.5 * tex / (np.abs(tex).max() + 1e-9) * 0.3
    img = np.where(breast, dense, np.float32(0.03)).astype(np.float32)
    pect = (x / (0.35 * w) + yy / (0.45 * h)) <= 1
    img[pect & breast] = 0.75
    return _noisy(img, 0.02, rng)


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


def _layer(text: str, font_name: str, size: int, angle: float = 0.0, stacked: bool = False) -> tuple[Any, int, int]:
    """The text drawn white on black as a Pillow image (2 px of margin), and where the text's
    origin lies in it. `stacked`: one letter under another (a vertical label written upright);
    `angle`: the layer turned counter-clockwise by that many degrees (bicubic, expanded)."""
    from PIL import Image, ImageDraw

    face = font(font_name, size)
    if stacked:
        boxes = [face.getbbox(c) if c.strip() else (0, 0, 0, 0) for c in text]
        step = max(int(b[3]) for b in boxes) + max(1, size // 8)
        wide = max(int(b[2] - b[0]) for b in boxes) + 4
        layer = Image.new("L", (wide, step * len(text) + 4), 0)
        draw = ImageDraw.Draw(layer)
        for k, (c, b) in enumerate(zip(text, boxes, strict=True)):
            draw.text((2 + (wide - 4 - (b[2] - b[0])) // 2 - b[0], 2 + k * step), c, fill=255, font=face)
        ox, oy = 2, 2
    else:
        bx0, by0, bx1, by1 = face.getbbox(text)
        layer = Image.new("L", (int(bx1 - bx0) + 4, int(by1 - by0) + 4), 0)
        ox, oy = 2 - int(bx0), 2 - int(by0)
        ImageDraw.Draw(layer).text((ox, oy), text, fill=255, font=face)
    if angle % 360:
        layer = layer.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True)
        ox, oy = 0, 0  # a turned line is placed by its layer's corner
    return layer, ox, oy


def burn(img: np.ndarray, text: str, xy: tuple[int, int], font_name: str, size: int, value: float,
         angle: float = 0.0, stacked: bool = False) -> tuple[np.ndarray, Burned]:  # fmt: skip
    """A copy of `img` (2-D) with `text` drawn at `xy` (top left) in a gray level `value`; the line's truth.
    `angle` turns the line counter-clockwise (degrees; `xy` is then the turned layer's corner);
    `stacked` writes it as upright letters one under another.
    The text is drawn on a layer the size of its own box (not of the frame: 0.4 s less per line at 4,096 px)."""
    h, w = img.shape[:2]
    layer, ox, oy = _layer(text, font_name, size, angle, stacked)
    lx0, ly0 = xy[0] - ox, xy[1] - oy  # the layer's place in the frame (it may stick out)
    local = np.asarray(layer, dtype=np.float32) / np.float32(255.0)
    fx0, fy0, fx1, fy1 = max(0, lx0), max(0, ly0), min(w, lx0 + local.shape[1]), min(h, ly0 + local.shape[0])
    alpha = local[fy0 - ly0 : fy1 - ly0, fx0 - lx0 : fx1 - lx0]
    out = np.array(img, dtype=np.result_type(img.dtype, np.float32))
    part = out[fy0:fy1, fx0:fx1]
    part += alpha * (np.float32(value) - part)
    glyphs = np.zeros((h, w), dtype=bool)
    glyphs[fy0:fy1, fx0:fx1] = alpha > 0.5
    ys, xs = np.nonzero(glyphs[fy0:fy1, fx0:fx1])
    box = (fx0 + int(xs.min()), fy0 + int(ys.min()), fx0 + int(xs.max()) + 1, fy0 + int(ys.max()) + 1) if len(xs) else (0, 0, 0, 0)
    visible = glyphs.copy()
    if len(xs):
        from scipy import ndimage

        x0, y0, x1, y1 = (max(0, box[0] - 8), max(0, box[1] - 8), box[2] + 8, box[3] + 8)
        under = np.asarray(img[y0:y1, x0:x1], dtype=np.float64)
        under = ndimage.gaussian_filter(under.mean(axis=2) if under.ndim == 3 else under, 2.0)  # the ground, without the panel's noise
        visible[y0:y1, x0:x1] &= np.abs(value - under) >= VISIBLE
    return out, Burned(text, box, font_name, size, value, glyphs, visible)


def text_size(text: str, font_name: str, size: int, angle: float = 0.0, stacked: bool = False) -> tuple[int, int]:
    """(width, height) in pixels of `text` drawn in the font (of its turned layer, for a turned or stacked line)."""
    if not (angle % 360 or stacked):
        x0, y0, x1, y1 = font(font_name, size).getbbox(text)
        return int(x1), int(y1)
    layer = _layer(text, font_name, size, angle, stacked)[0]
    return int(layer.size[0]), int(layer.size[1])


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
