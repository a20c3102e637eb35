"""Text detection at every frame size: candidates found cheaply first, the detector only where they are.

PP-OCR's detector was trained on images of about 736-960 pixels on the long side. Text
far smaller or far larger than that, relative to the frame, is missed: measured on a
2,048 px radiograph, 28-56 px text the detector found every time at 736 px went unseen
at full size, and a 12 px line found in a 512 px crop was lost in a 1,088 px tile of the
same frame. And the detector is what costs: one pass over a frame brought to 960 px is
about 0.3 s of CPU, a crop around one line a few hundredths. So a frame is read as a few
views, and the regions of all views united:

- crops where the frame's strokes form something shaped like a line (`proposals`: a
  stroke map that costs milliseconds per megapixel), along rows and, turned, at the angles
  of `oriented.TURNS`, each enlarged so that its line is about 24 detector pixels high and
  its own contrast stretched: small and low-contrast text at any frame size and angle,
  read closely only where it can be;
- the whole frame once, small (COARSE_SIDE px on its long side, as shown): text too large
  for a stroke-map line (taller than `proposals.MAX_LINE`) at any angle, for a fraction of
  a full-size pass.

A text-free frame whose strokes form no line costs one small detector pass. Until
2026-12-05 the whole frame was also read at WHOLE_SIDE as shown and as its local contrast
(`highpass`); on the benchmark's frames those two passes found nothing the crops did not
and took 80-90% of the screen's CPU (benchmarks/RESULTS.md section 23a). `WHOLE_VIEWS`
brings them back. The final pixel scan (`pixelscan`) still reads whole views, of turned
and inverted images: a second reading by a different route.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from medrcube.construction.privacy import ocr, oriented, proposals

WHOLE_SIDE = 960
MAX_UPSCALE = 2.0
COARSE_SIDE = 480  # px: the masking's one whole view (large text: a 96 px line of a 4,096 px frame is 11 px here)
WHOLE_VIEWS = False  # True: also the whole frame at WHOLE_SIDE, as shown and as local contrast (the reading before candidates came first)


@dataclass(frozen=True, slots=True)
class View:
    """A part of the frame (x0, y0, x1, y1 in frame pixels, end-exclusive) read at `scale`."""

    kind: str  # "whole" (at WHOLE_SIDE, two passes), "coarse" (at COARSE_SIDE, as shown) or "crop"
    scale: float
    box: tuple[int, int, int, int]


def whole_scale(h: int, w: int) -> float:
    long = max(h, w, 1)
    return min(MAX_UPSCALE, WHOLE_SIDE / long)


# Read also the crops where the stroke map, turned, shows lines at the angles of `oriented.TURNS`
# (text up, down or across the frame); False reads rows only, as before turned text was screened.
TURNED = True


def views(pixels: np.ndarray, turned: bool | None = None) -> list[View]:
    """The views a frame is read as: the whole frame, then the crops where its strokes look like lines
    (along rows, and, with `turned` (default TURNED), at the angles of `oriented.TURNS`)."""
    h, w = np.asarray(pixels).shape[:2]
    crops = proposals.crops(pixels)
    if TURNED if turned is None else turned:
        crops += oriented.crops(pixels, oriented.candidates(pixels))
    whole = [View("whole", whole_scale(h, w), (0, 0, w, h))] if WHOLE_VIEWS else []
    coarse = [View("coarse", min(1.0, COARSE_SIDE / max(h, w, 1)), (0, 0, w, h))]
    return whole + coarse + [View("crop", c.scale, c.box) for c in crops]


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
    detail: np.ndarray = np.clip(out, 0, 255).astype(np.uint8)
    return detail


def _resized(gray: np.ndarray, scale: float) -> np.ndarray:
    """An 8-bit gray image at `scale`."""
    if scale == 1.0:
        return gray
    from PIL import Image

    h, w = gray.shape
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.asarray(Image.fromarray(gray, mode="L").resize(size, Image.Resampling.BICUBIC))


def _regions(reader: ocr.TextReader, img: np.ndarray, view: View, shape: tuple[int, int]) -> list[ocr.TextRegion]:
    """The detector's regions on `img` (the view's part of the frame at the view's scale), in frame pixels."""
    h, w = shape
    if img.size == 0 or int(img.min()) == int(img.max()):
        return []  # a flat patch holds no text
    x0, y0 = view.box[:2]
    s = view.scale
    out = []
    for q, score in reader.detect_quads(img):
        quad = q / s + np.array([x0, y0], dtype=np.float64)  # the view's pixels -> the frame's
        box = oriented.bbox(quad, (h, w))
        if box[0] < box[2] and box[1] < box[3]:
            out.append(ocr.TextRegion(box, score, quad=tuple((float(a), float(b)) for a, b in quad)))
    return out


def detect(reader: ocr.TextReader, pixels: np.ndarray, turned: bool | None = None) -> list[ocr.TextRegion]:
    """The text regions of a frame over every view (frame pixels; duplicates dropped).

    The coarse view is read as shown; each crop as its own contrast stretched
    (`proposals.stretched`); the whole view (with WHOLE_VIEWS) as shown and as its local contrast (`highpass`).
    """
    gray = proposals.gray8(pixels)
    turned = TURNED if turned is None else turned
    key = hashlib.sha256(gray.tobytes() + repr((gray.shape, turned, WHOLE_VIEWS, COARSE_SIDE)).encode()).digest()
    cached = reader.memo_get(key)
    if cached is not None:
        return cached
    h, w = gray.shape
    found: dict[tuple[int, int, int, int], ocr.TextRegion] = {}

    def add(regions: list[ocr.TextRegion]) -> None:
        for r in regions:
            if r.box not in found or found[r.box].score < r.score:
                found[r.box] = r

    coarse: list[ocr.TextRegion] = []
    for v in views(gray, turned):
        x0, y0, x1, y1 = v.box
        if v.kind == "whole":
            shown = _resized(gray, v.scale)
            for img in (shown, highpass(shown)):
                add(_regions(reader, img, v, (h, w)))
        elif v.kind == "coarse":
            coarse = _regions(reader, _resized(gray, v.scale), v, (h, w))
        else:
            add(_regions(reader, proposals.stretched(_resized(gray[y0:y1, x0:x1], v.scale)), v, (h, w)))
    # The coarse view's box of a line is loose (a 28 px line at 45 degrees came back 62 px thick, and a mask grows
    # with the thickness): where a closer view found text, its regions are the ones kept. And at its scale an organ
    # is the size of a letter: its other regions count only when the recogniser reads COARSE_LEGIBLE letters or
    # digits there (large text is legible; 4 of 30 text-free 1,024 px CT and MR frames lost a disc of anatomy else).
    alone = [r for r in coarse if _closer_share(r.box, list(found)) < COARSE_KEEP]
    add([r for r in alone if oriented.letters_or_digits(text_of(reader, gray, r)) >= COARSE_LEGIBLE])
    regions = sorted(found.values(), key=lambda r: r.box)
    reader.memo_put(key, regions)
    return regions


COARSE_KEEP = 0.5  # a coarse region is kept when less than this share of its box lies in closer views' regions
COARSE_LEGIBLE = 3  # and when the recogniser reads this many letters or digits in it (as a blob: `textscreen`)


def _closer_share(box: tuple[int, int, int, int], others: list[tuple[int, int, int, int]]) -> float:
    """The share of `box` that lies inside any of the other boxes."""
    x0, y0, x1, y1 = box
    if x1 <= x0 or y1 <= y0 or not others:
        return 0.0
    m = np.zeros((y1 - y0, x1 - x0), dtype=bool)
    for a0, b0, a1, b1 in others:
        m[max(0, b0 - y0) : max(0, min(y1, b1) - y0), max(0, a0 - x0) : max(0, min(x1, a1) - x0)] = True
    return float(m.mean())


def detect_whole(reader: ocr.TextReader, pixels: np.ndarray, side: int = WHOLE_SIDE) -> list[ocr.TextRegion]:
    """The regions of the whole frame brought to `side` px on its long side (enlarged at most MAX_UPSCALE
    times), as shown: one detector call (the final pixel scan's reading at a scale of its own)."""
    gray = proposals.gray8(pixels)
    h, w = gray.shape
    scale = min(MAX_UPSCALE, side / max(h, w, 1))
    return _regions(reader, _resized(gray, scale), View("whole", scale, (0, 0, w, h)), (h, w))


def read(reader: ocr.TextReader, pixels: np.ndarray, regions: list[ocr.TextRegion] | None = None) -> list[ocr.TextRegion]:
    """The regions of a frame (every view, or those given) with the recogniser's text of each
    (a turned line read along it, upright: `oriented.read`)."""
    found = detect(reader, pixels) if regions is None else regions
    return [ocr.TextRegion(r.box, r.score, text_of(reader, pixels, r), r.quad) for r in found]


def text_of(reader: ocr.TextReader, pixels: np.ndarray, region: ocr.TextRegion) -> str:
    """The recogniser's text of a region: along its line when it runs off the row, else of its box."""
    if oriented.is_oriented(region.quad):
        return oriented.read(reader, pixels, oriented.line_of(region.quad))
    return reader.recognise(crop(pixels, region.box))


def crop(pixels: np.ndarray, box: tuple[int, int, int, int], pad: float = 0.25) -> np.ndarray:
    """The box of the frame, padded by `pad` x its height on every side (what the recogniser is shown)."""
    x0, y0, x1, y1 = box
    h, w = pixels.shape[:2]
    p = max(2, int(np.ceil(pad * (y1 - y0))))
    return np.asarray(pixels)[max(0, y0 - p) : min(h, y1 + p), max(0, x0 - p) : min(w, x1 + p)]
