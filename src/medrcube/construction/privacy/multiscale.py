"""Text detection at every frame size: one frame read as a pyramid of views.

PP-OCR's detector was trained on images of about 736-960 pixels on the long side. Text
far smaller or far larger than that, relative to the frame, is missed: measured on a
2,048 px radiograph, 28-56 px text the detector found every time at 736 px went unseen
at full size. So a frame is read as several views, and the regions of all views united:

- the whole frame brought to WHOLE_SIDE on its long side (enlarged at most MAX_UPSCALE
  times): the detector's native scale, which finds large text on a large frame;
- for a frame whose whole view shrinks it by more than TILE_FROM (its small text would
  shrink below what the detector sees), overlapping tiles of at most TILE_MAX detector pixels over
  the frame read at `tile_scale` (full resolution up to TILE_BUDGET pixels on the long
  side, never coarser than MIN_TILE_SCALE): small text at a size the detector sees;
  tiles overlap by OVERLAP detector pixels, more than the tallest line a tile must find
  whole (taller text is the whole view's part);
- the top and bottom bands (BAND of the height), where consoles write, read at
  `band_scale` (the long side brought towards BAND_SIDE, at least full resolution) when
  that is finer than the other views: small text at the frame's edges, enlarged for the
  detector on a 1,024 px frame, at full resolution on a 4,096 px one.

Each view is read twice: as displayed, and as its local contrast (`highpass`), which
brings back low-contrast text and text beside large bright structures. The views and
their cost by frame size are measured in benchmarks/deid_ocr.py (docs/construction.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from medrcube.construction.privacy import ocr

WHOLE_SIDE = 960
MAX_UPSCALE = 2.0
TILE_FROM = 0.75  # whole view scale below which tiles are added
TILE_MAX = 1152  # the longest tile side, detector pixels (tiles are as equal as the frame allows)
OVERLAP = 128
TILE_BUDGET = 2048  # long side of the frame as the tiles read it, at most (time grows with area)
MIN_TILE_SCALE = 0.5
BAND = 0.1  # the top and bottom bands (share of the height) where consoles write, read finer
BAND_SIDE = 1920  # bands are read with the frame's long side brought towards this, at least at full resolution


@dataclass(frozen=True, slots=True)
class View:
    """A part of the frame (x0, y0, x1, y1 in frame pixels, end-exclusive) read at `scale`."""

    kind: str  # "whole" or "tile"
    scale: float
    box: tuple[int, int, int, int]


def whole_scale(h: int, w: int) -> float:
    long = max(h, w, 1)
    return min(MAX_UPSCALE, WHOLE_SIDE / long)


def tile_scale(h: int, w: int) -> float:
    long = max(h, w, 1)
    return max(MIN_TILE_SCALE, min(1.0, TILE_BUDGET / long))


def _spans(length: int) -> list[tuple[int, int]]:
    """(start, end) of the tiles along one axis of the scaled frame: as few as keep each under
    TILE_MAX, of equal length, neighbours overlapping by OVERLAP (so no pixel is read twice more than needed)."""
    if length <= TILE_MAX:
        return [(0, length)]
    n = int(np.ceil((length - OVERLAP) / (TILE_MAX - OVERLAP)))
    size = int(np.ceil((length + (n - 1) * OVERLAP) / n))
    step = (length - size) / (n - 1)
    return [(round(i * step), round(i * step) + size) for i in range(n)]


def band_scale(h: int, w: int) -> float:
    long = max(h, w, 1)
    return max(1.0, min(MAX_UPSCALE, BAND_SIDE / long))


def _bands(h: int, w: int, coarsest: float) -> list[View]:
    """The top and bottom bands, read at `band_scale` when that is finer than the other views by a quarter or more."""
    b = band_scale(h, w)
    if b < 1.25 * coarsest:
        return []
    bh = max(1, int(np.ceil(BAND * h)))
    out = []
    for y0, y1 in ((0, bh), (h - bh, h)):
        for xs, xe in _spans(round(w * b)):
            out.append(View("band", b, (int(np.floor(xs / b)), y0, w if xe >= round(w * b) else min(w, int(np.ceil(xe / b))), y1)))
    return out


def views(h: int, w: int) -> list[View]:
    """The views a frame of h x w pixels is read as."""
    out = [View("whole", whole_scale(h, w), (0, 0, w, h))]
    if out[0].scale >= TILE_FROM:
        return out + _bands(h, w, out[0].scale)
    t = tile_scale(h, w)
    sh, sw = round(h * t), round(w * t)
    for ys, ye in _spans(sh):
        for xs, xe in _spans(sw):
            x0, y0 = int(np.floor(xs / t)), int(np.floor(ys / t))
            # The last tile of a row or column reaches the frame's edge whatever the rounding.
            x1 = w if xe >= sw else min(w, int(np.ceil(xe / t)))
            y1 = h if ye >= sh else min(h, int(np.ceil(ye / t)))
            out.append(View("tile", t, (x0, y0, x1, y1)))
    return out + _bands(h, w, t)


def highpass(gray: np.ndarray) -> np.ndarray:
    """Local contrast of an 8-bit gray image: itself minus a blur of it (sigma 1/96 of its side), stretched around mid-gray.

    Large smooth structures (a body outline, a bright organ) flatten out and thin strokes
    stand out, so low-contrast text over anatomy, and text the detector would merge into
    a body-sized blob, come back as lines of their own. The blur is smooth at the scale of
    its sigma, so it is computed on the image reduced 4 times and enlarged back.
    """
    from PIL import Image
    from scipy import ndimage

    g = np.asarray(gray, dtype=np.float32)
    h, w = g.shape
    sigma = max(2.0, max(h, w) / 96)
    k = 4 if min(h, w) >= 64 and sigma >= 8 else 1
    if k > 1:
        small = np.asarray(Image.fromarray(g, mode="F").reduce(k), dtype=np.float32)
        blur = np.asarray(Image.fromarray(ndimage.gaussian_filter(small, sigma / k), mode="F").resize((w, h), Image.Resampling.BILINEAR))
    else:
        blur = ndimage.gaussian_filter(g, sigma)
    d = g - blur
    out = 127.5 + d * (127.5 / (8 * float(d.std()) + 1e-6))
    return np.clip(out, 0, 255).astype(np.uint8)


def _resized(pixels: np.ndarray, scale: float) -> np.ndarray:
    """The frame as 8-bit gray (colour averaged: burned-in text differs in brightness too) at `scale`."""
    a = np.asarray(pixels)
    if a.ndim == 3:
        a = a[..., :3].mean(axis=2)
    u8 = np.clip(a * 255.0 + 0.5, 0, 255).astype(np.uint8)
    if scale == 1.0:
        return u8
    from PIL import Image

    h, w = u8.shape
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.asarray(Image.fromarray(u8, mode="L").resize(size, Image.Resampling.BICUBIC))


def _pass(reader: ocr.TextReader, scaled: np.ndarray, view: View, shape: tuple[int, int]) -> list[ocr.TextRegion]:
    h, w = shape
    x0, y0, x1, y1 = view.box
    s = view.scale
    sx0, sy0 = round(x0 * s), round(y0 * s)
    part = scaled[sy0 : round(y1 * s), sx0 : round(x1 * s)]
    if part.size == 0 or float(part.std()) == 0.0:
        return []  # a flat patch holds no text
    out = []
    for box, score in reader.detect_native(part):
        bx0, by0, bx1, by1 = box
        fx0, fy0 = max(0, int(np.floor((bx0 + sx0) / s))), max(0, int(np.floor((by0 + sy0) / s)))
        fx1, fy1 = min(w, int(np.ceil((bx1 + sx0) / s))), min(h, int(np.ceil((by1 + sy0) / s)))
        if fx0 < fx1 and fy0 < fy1:
            out.append(ocr.TextRegion((fx0, fy0, fx1, fy1), score))
    return out


def detect(reader: ocr.TextReader, pixels: np.ndarray) -> list[ocr.TextRegion]:
    """The text regions of a frame over every view, displayed and high-passed (frame pixels; duplicates dropped)."""
    key = hashlib.sha256(np.ascontiguousarray(np.asarray(pixels, dtype=np.float32)).tobytes() + repr(np.shape(pixels)).encode()).digest()
    cached = reader.memo_get(key)
    if cached is not None:
        return cached
    h, w = pixels.shape[:2]
    found: dict[tuple[int, int, int, int], ocr.TextRegion] = {}
    by_scale: dict[float, list[View]] = {}
    for v in views(h, w):
        by_scale.setdefault(v.scale, []).append(v)
    for scale, vs in by_scale.items():
        shown = _resized(pixels, scale)
        # The whole view is read as shown and as its local contrast; tiles only as local contrast
        # (it keeps text on a flat ground too, and the tiles' time is most of a large frame's).
        tiles = all(v.kind != "whole" for v in vs)
        for img in (highpass(shown),) if tiles else (shown, highpass(shown)):
            for v in vs:
                for r in _pass(reader, img, v, (h, w)):
                    if r.box not in found or found[r.box].score < r.score:
                        found[r.box] = r
    regions = sorted(found.values(), key=lambda r: r.box)
    reader.memo_put(key, regions)
    return regions


def read(reader: ocr.TextReader, pixels: np.ndarray, regions: list[ocr.TextRegion] | None = None) -> list[ocr.TextRegion]:
    """The regions of a frame (every view, or those given) with the recogniser's text of each."""
    found = detect(reader, pixels) if regions is None else regions
    return [ocr.TextRegion(r.box, r.score, reader.recognise(crop(pixels, r.box))) for r in found]


def crop(pixels: np.ndarray, box: tuple[int, int, int, int], pad: float = 0.25) -> np.ndarray:
    """The box of the frame, padded by `pad` x its height on every side (what the recogniser is shown)."""
    x0, y0, x1, y1 = box
    h, w = pixels.shape[:2]
    p = max(2, int(np.ceil(pad * (y1 - y0))))
    return np.asarray(pixels)[max(0, y0 - p) : min(h, y1 + p), max(0, x0 - p) : min(w, x1 + p)]
