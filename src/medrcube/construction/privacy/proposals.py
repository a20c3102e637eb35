"""Where small text may be on a frame: a cheap stroke map that picks the crops the detector reads closely.

Reading a 4,096 px frame at full resolution costs the detector about 6 s of CPU (0.34 us
per pixel), over the budget by itself, and small text (8-24 px) read at half resolution
is lost. Text is rare on a frame: a few lines in corners, a strip, a label over the
anatomy. So the frame is searched first for what text is made of, sharp strokes side by
side along a row, with operations that cost milliseconds per megapixel (OpenCV, which rapidocr
already depends on):

1. the frame smoothed a little (noise of the detector panel averages out, strokes stay);
2. two stroke maps, each kept where it is above a threshold set from the frame's own
   noise (a multiple of its median, never below MIN_EDGE grey levels): the 3 x 3 local
   range (strokes of any width; low-contrast text at 0.15 of full scale over a noisy
   radiograph passes, the smooth anatomy does not) and the STROKE px top-hats (only
   strokes thinner than that: a line beside an edge of the anatomy stays apart from it);
3. strokes joined along the row (a closing a little wider than the gap between letters),
   then connected components: a candidate line is wider than it is tall, 3 to MAX_LINE
   pixels high, with MIN_STROKES stroke pixels or more.

Each candidate is padded (the detector needs context around a line) and read at a scale
that brings its height to about TARGET_HEIGHT detector pixels (never below full
resolution, at most MAX_SCALE), as its own contrast stretched (`stretched`): a low-contrast
line becomes a full-contrast one. Neighbouring crops of one scale are merged, so a block
of lines is read once. What the candidates miss (text taller than MAX_LINE, text in a
region that is all strokes) is the whole view's part (`multiscale`). Text too faint for
any of its strokes to stand above the noise is what `faint_lines` proposes, to the
recogniser's net (`linemask.plan`) only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_EDGE = 12  # grey levels (of 255): the least local range a stroke must show
NOISE_FACTOR = 2.5  # the threshold is this many times the frame's median local range (plus 2 levels)
MIN_WIDTH = 16  # px: a candidate is at least a short word of the smallest text this wide
MIN_STROKES = 30  # stroke pixels in a candidate (measured: noise specks have 5-20, three 8 px digits about 100)
STROKE = 9  # px: the top-hat's square; strokes of text up to 32 px are thinner
MAX_LINE = 96  # px: taller candidates are left to the whole view
TARGET_HEIGHT = 24.0  # detector pixels a candidate's height is brought to
MAX_SCALE = 3.0
SCALES = (1.0, 1.5, 2.0, 3.0)  # crops are read at one of these (neighbours of one scale merge)


@dataclass(frozen=True, slots=True)
class Crop:
    """A part of the frame (x0, y0, x1, y1, end-exclusive) to read at `scale`."""

    box: tuple[int, int, int, int]
    scale: float


def gray8(pixels: np.ndarray) -> np.ndarray:
    """[0, 1] gray or RGB pixels as 8-bit gray (colour averaged: burned-in text differs in brightness too)."""
    a = np.asarray(pixels)
    if a.dtype == np.uint8 and a.ndim == 2:
        return a
    if a.ndim == 3:
        a = a[..., :3].mean(axis=2)
    return np.clip(a * 255.0 + 0.5, 0, 255).astype(np.uint8)


def line_boxes(strokes: np.ndarray, density: float = 0.0) -> list[tuple[int, int, int, int]]:
    """Boxes of the stroke clusters (a 0/1 map) shaped like a line of text, with at least `density` of their box stroke pixels."""
    import cv2

    joined = cv2.morphologyEx(strokes, cv2.MORPH_CLOSE, np.ones((3, 9), np.uint8))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(joined, connectivity=8)
    # Stroke pixels per component: the noise of a panel joins into specks of a few, a line of text has many.
    strong = np.bincount(labels[strokes > 0], minlength=n)  # strokes is 0/1: a count over its stroke pixels alone (5x faster)
    out = []
    for k in range(1, n):
        x, y, w, h, _ = (int(v) for v in stats[k])
        if 3 <= h <= MAX_LINE and w >= max(MIN_WIDTH, 1.2 * h) and strong[k] >= max(MIN_STROKES, density * w * h):
            out.append((x, y, x + w, y + h))
    return out


def _above_noise(level: np.ndarray) -> np.ndarray:
    noise = float(np.median(level[::4, ::4]))
    return (level > max(MIN_EDGE, NOISE_FACTOR * noise + 2)).astype(np.uint8)


def candidates(pixels: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Boxes (frame pixels) of stroke clusters shaped like a line of text, from two stroke maps.

    The local range finds strokes of any width but joins a line to an edge of the anatomy
    beside it (one component, too tall to be a line); the top-hats (what an opening or a
    closing of STROKE px removes) keep only strokes thinner than that, not the edges.
    """
    edge, thin = stroke_maps(pixels)
    return line_boxes(edge) + line_boxes(thin)


def stroke_maps(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two 0/1 stroke maps (local range; top-hats), each above the frame's own noise. Kept per frame
    content for the last few frames: the row's candidates and the turned ones (`oriented`) share them."""
    import hashlib

    import cv2

    g = gray8(pixels)
    key = hashlib.sha256(g.tobytes() + repr(g.shape).encode()).digest()
    if key in _MAPS:
        return _MAPS[key]
    smooth = cv2.GaussianBlur(g, (0, 0), 1.0)
    edge = cv2.morphologyEx(smooth, cv2.MORPH_GRADIENT, np.ones((3, 3), np.uint8))
    kernel = np.ones((STROKE, STROKE), np.uint8)
    thin = np.maximum(cv2.morphologyEx(smooth, cv2.MORPH_TOPHAT, kernel), cv2.morphologyEx(smooth, cv2.MORPH_BLACKHAT, kernel))
    maps = (_above_noise(edge), _above_noise(thin))
    if len(_MAPS) >= 2:
        _MAPS.pop(next(iter(_MAPS)))
    _MAPS[key] = maps
    return maps


_MAPS: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}


# The faint-line map (`faint_lines`): text too faint or too thin for either stroke map.
# An 8 px line of 1 px strokes at 0.15 of full scale over a dark, noisy ground shows no
# stroke above the frame's noise, yet its mean over the line stands well clear of the
# ground's: the local range there measured 17 grey levels against a threshold of 14.5, in
# fragments of 2-7 stroke pixels, but its mean over a 5 x 15 window stood 10.9 noise units
# (median along its middle row) above the rows over and under it, where the 31 frames of
# pure panel noise among 120 text-free frames of 512-2,048 px reached at most 6.6.
FAINT_BAND = 5  # px: the band's height, the glyphs of the smallest text screened (8 px faces: 5-6 px glyphs)
FAINT_ALONG = 15  # px: the band's length (three glyphs of that text)
FAINT_GAP = 1  # px between the band and the bands over and under it
FAINT_Z = 7.0  # noise units the band must stand out from both neighbours by (pure noise frames: at most 6.6)
FAINT_NOISE_WINDOW = 64  # px: the square the ground's noise is measured over
# px (long side): larger frames are not searched this way. The map costs 1.1-1.5 s of CPU
# on a 4,096 px frame (0.1-0.2 s at 2,048), where the screen's 5 s budget is nearly spent
# (benchmarks/RESULTS.md section 16), and the faint 8 px line it was made for was missed at 1,024 px.
FAINT_MAX_SIDE = 2048


def _noise(g: np.ndarray) -> np.ndarray:
    """The ground's noise per pixel (standard deviation, grey levels) from the mean absolute
    difference of neighbours along the row over FAINT_NOISE_WINDOW: for Gaussian noise of sd s
    that mean is 2 s / sqrt(pi); smooth anatomy adds nearly nothing, an edge or text raises
    it (so the map is less sensitive there, not more). Never below 1 level (8-bit rounding)."""
    import cv2

    d = np.zeros_like(g)
    d[:, :-1] = np.abs(g[:, 1:] - g[:, :-1])
    w = FAINT_NOISE_WINDOW
    sigma: np.ndarray = np.maximum(cv2.boxFilter(d, -1, (w, w), borderType=cv2.BORDER_REFLECT) * np.float32(np.sqrt(np.pi) / 2), 1.0)
    return sigma


def faint_contrast(pixels: np.ndarray) -> np.ndarray:
    """Per pixel, how far the frame's mean over a band FAINT_BAND high and FAINT_ALONG long centred
    there stands out from the bands over and under it, both (brighter than both, or darker than
    both; else 0 or less), in units of the noise of such a mean: the ground's noise (`_noise`)
    over the square root of the band's pixels. An edge of the anatomy differs from one neighbour only.

    Means are over the pixels inside the frame: a band at the frame's side has fewer, and a
    replicated edge pixel, tried first, gave pure noise 9 units there against 6 inside. Rows
    whose band over or under is not inside the frame give 0: compared with one neighbour only,
    the frame's top and bottom rows of two mammograms were taken for lines and read as digits."""
    g = gray8(pixels).astype(np.float32)
    return band_contrast(g, None, _noise(g))


def band_contrast(g: np.ndarray, inside: np.ndarray | None, noise: np.ndarray) -> np.ndarray:
    """`faint_contrast` of a float32 gray image whose pixels `inside` (0/1 float32, None: all) are the frame's
    (a frame turned onto a larger canvas: `oriented.faint_candidates`), with the ground's noise given per pixel.
    A band, or the band over or under it, with less than half its pixels inside gives 0."""
    import cv2

    k, zero = (FAINT_ALONG, FAINT_BAND), cv2.BORDER_CONSTANT
    inside = np.ones_like(g) if inside is None else inside
    count = cv2.boxFilter(inside, -1, k, normalize=False, borderType=zero)
    mean = cv2.boxFilter(g * inside, -1, k, normalize=False, borderType=zero) / np.maximum(count, 1.0)
    off, edge = FAINT_BAND + FAINT_GAP, FAINT_BAND + FAINT_GAP + FAINT_BAND // 2
    out = np.zeros_like(g)
    if g.shape[0] > 2 * edge:
        rows = slice(edge, g.shape[0] - edge)
        n = g.shape[0] - 2 * edge
        band, over, under = mean[rows], mean[edge - off : edge - off + n], mean[edge + off : edge + off + n]
        diff = np.maximum(band - np.maximum(over, under), np.minimum(over, under) - band)
        half = 0.5 * FAINT_ALONG * FAINT_BAND
        full = (count[rows] >= half) & (count[edge - off : edge - off + n] >= half) & (count[edge + off : edge + off + n] >= half)
        out[rows] = np.where(full, diff, 0.0)
    z: np.ndarray = out * np.sqrt(count) / noise
    return z


def band_boxes(z: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Boxes (z's pixels, end-exclusive) of the lines of a `band_contrast` map: where it exceeds FAINT_Z, no taller
    than the band, over FAINT_ALONG px of centres or more, grown by half a band on every side (the line reaches there)."""
    import cv2

    h, w = z.shape
    n, _, stats, _ = cv2.connectedComponentsWithStats((z > FAINT_Z).astype(np.uint8), connectivity=8)
    boxes = []
    for k in range(1, n):
        x, y, cw, ch, _ = (int(v) for v in stats[k])
        if ch <= FAINT_BAND and cw >= FAINT_ALONG:
            boxes.append((max(0, x - FAINT_ALONG // 2), max(0, y - FAINT_BAND // 2), min(w, x + cw + FAINT_ALONG // 2), min(h, y + ch + FAINT_BAND // 2)))
    return boxes


FAINT_TILT = 2  # px: a rotated rectangle around a tilted component's pixels is this much thicker (measured 6.3 px, an 8 px line at 47 degrees)


def band_quads(z: np.ndarray) -> list[np.ndarray]:
    """As `band_boxes`, for lines that may run a few degrees off the map's rows (a turned frame's lines are seldom
    exactly square to it): each component's smallest rotated rectangle (4 corners, z's pixels), no thicker than
    the band and FAINT_TILT px and FAINT_ALONG or more long, grown by half a band across and along."""
    import cv2

    n, labels, stats, _ = cv2.connectedComponentsWithStats((z > FAINT_Z).astype(np.uint8), connectivity=8)
    out = []
    for k in range(1, n):
        x, y, cw, ch, area = (int(v) for v in stats[k])
        if cw < FAINT_ALONG or area < FAINT_ALONG:
            continue
        ys, xs = np.nonzero(labels[y : y + ch, x : x + cw] == k)
        (cx, cy), (a, b), deg = cv2.minAreaRect(np.column_stack([xs + x, ys + y]).astype(np.float32))
        long, thick = max(a, b) + 1, min(a, b) + 1
        if thick > FAINT_BAND + FAINT_TILT or long < FAINT_ALONG:
            continue
        grown = ((cx, cy), (long + FAINT_ALONG - 1, thick + FAINT_BAND - 1) if a >= b else (thick + FAINT_BAND - 1, long + FAINT_ALONG - 1), deg)
        out.append(cv2.boxPoints(grown).astype(np.float64))
    return out


def faint_lines(pixels: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Boxes (frame pixels) of faint thin lines: where `faint_contrast` exceeds FAINT_Z. A candidate
    is no taller than the band, and the band stands out over FAINT_ALONG px of centres or more, so
    over two windows that share no pixel: a line of 6 or more characters of the smallest text (an
    identifying line is: a name, a date, a number). Measured on frames without text, shorter ones
    were mammogram texture, read as "9215" and "ACAN". Frames larger than FAINT_MAX_SIDE give none.

    For the recogniser's net (`linemask.plan`), not the detector's crops: the line this was made
    for is read by the recogniser from its own box, and a candidate costs the net one
    recogniser call on a small crop."""
    h, w = np.asarray(pixels).shape[:2]
    if max(h, w) > FAINT_MAX_SIDE or min(h, w) < 3 * FAINT_BAND:
        return []
    return band_boxes(faint_contrast(pixels))


def scale_for(height: int) -> float:
    want = min(MAX_SCALE, max(1.0, TARGET_HEIGHT / max(1, height)))
    return min(SCALES, key=lambda s: abs(s - want))


def merge(boxes: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """Overlapping boxes united until none overlap."""
    out = sorted(boxes)
    changed = True
    while changed:
        changed = False
        merged: list[tuple[int, int, int, int]] = []
        for b in out:
            for i, m in enumerate(merged):
                if b[0] < m[2] and m[0] < b[2] and b[1] < m[3] and m[1] < b[3]:
                    merged[i] = (min(b[0], m[0]), min(b[1], m[1]), max(b[2], m[2]), max(b[3], m[3]))
                    changed = True
                    break
            else:
                merged.append(b)
        out = merged
    return out


def crops(pixels: np.ndarray) -> list[Crop]:
    """The crops the detector reads closely: candidates padded, by scale, neighbours merged."""
    h, w = np.asarray(pixels).shape[:2]
    by_scale: dict[float, list[tuple[int, int, int, int]]] = {}
    for x0, y0, x1, y1 in candidates(pixels):
        lh = y1 - y0
        pad_y, pad_x = max(12, lh), max(24, 4 * lh)  # along the row: the rest of a line whose strokes are faint
        box = (max(0, x0 - pad_x), max(0, y0 - pad_y), min(w, x1 + pad_x), min(h, y1 + pad_y))
        by_scale.setdefault(scale_for(lh), []).append(box)
    return [Crop(b, s) for s, boxes in sorted(by_scale.items()) for b in merge(boxes)]


def stretched(gray: np.ndarray) -> np.ndarray:
    """An 8-bit crop with its own 1st-99th percentile range stretched to full scale (the adaptive contrast step)."""
    lo, hi = np.percentile(gray, (1, 99))
    if hi - lo < 4:
        lo, hi = float(gray.min()), float(gray.max())
    if hi <= lo:
        return gray
    out: np.ndarray = np.clip((gray.astype(np.float32) - lo) * (255.0 / (hi - lo)), 0, 255).astype(np.uint8)
    return out
