"""Text at any angle: lines that run up, down or across a frame, proposed, masked and read.

Burned-in text is not always horizontal: side markers and operator labels run along the
edge of an ultrasound or radiograph frame (90 or 270 degrees), scanned film is often
turned, and some consoles stack upright letters one under another. PP-OCR's detector
(DBNet) already answers with an oriented quadrilateral per line whatever its angle
(measured: a 40 px name at 45 and 90 degrees on a 1,024 px frame came back as one quad
along the line, score 0.7-0.8); what failed was everything after it, built for rows: a
tall region was taken for a body outline unless the recogniser, which reads rows, read
letters in it, the mask grew along the row, and the small-text crops came from a stroke
map that joins strokes along rows only. So here:

- `Line`: a line by its quadrilateral (4 corners, frame pixels), its direction (degrees,
  0-180) and its thickness (the quad's short side);
- `is_oriented`: a detector region whose long side runs more than OFF_AXIS degrees from
  the row and is ELONGATED times its short side (a short, square region is left to the row
  logic, which masks it grown all round);
- `candidates`: the stroke map of `proposals` turned by each of TURNS (90, 45 and 135
  degrees; the row's own is `proposals.candidates`), its lines found as rows of the turned
  map, and their corners turned back: small text at those angles, where the detector
  reads it closely (`crops`, scaled by the line's thickness as a row's crop is by its height);
- `grown`: a line's quad grown along its own direction (ALONG x its thickness at each end)
  and across it (MARGIN x), painted as a polygon (`paint`);
- `legible`: the recogniser on the line turned upright (its quad warped to a row), in both
  directions (text at 90 and at 270 degrees look alike to a box): LEGIBLE letters or digits
  in either count;
- `stack_read`: a near-vertical line read as a stack of upright letters, cut at their pitch and
  set side by side as a row (`unstacked`), for the net and `lone_lines`;
- `faint_candidates`: the faint-line (band) map of `proposals` turned as the stroke maps are
  and on the frame reduced 2, 4 and 8 times (larger faint text): where the detector found part
  of a faint line, the band map shows where it goes on (`linemask.chained` masks that part whole);
- `lone_lines`: on a frame where the detector found nothing, the band map's thin lines at full scale,
  the most stroke-like first, read upright: one read as text is taken for a line found
  (`textscreen.text_regions`);
- `followed`: a line the detector found in part (a faint turned line, a column of stacked letters)
  extended along its own axis over the steps where a strip of its own thickness stands clear of
  both flanks and varies along the axis as strokes do (`linemask.plan`, before it is grown).

A turned stroke-map line needs DENSITY of its box in stroke pixels: texture joins into sparse
lines at every angle, and each line costs a detector crop and a net reading.

Costs (benchmarks/deid_ocr.py, docs/construction.md): the turned stroke maps are binary
images turned with nearest-neighbour sampling (milliseconds per megapixel); the detector
reads a turned line's crop only where one is proposed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from medrcube.construction.privacy import proposals

if TYPE_CHECKING:  # ocr.py imports this module
    from medrcube.construction.privacy.ocr import TextReader

Quad = tuple[tuple[float, float], ...]  # 4 corners
TURNS = (90, 45, 135)  # degrees (counter-clockwise) the stroke map is turned by; 0 is `proposals.candidates`
OFF_AXIS = 20.0  # degrees from the row beyond which a detected region is handled as a turned line
ELONGATED = 1.5  # its long side at least this many times its short side
MARGIN = 0.35  # of the thickness, across the line on each side (as `linemask.MARGIN`)
ALONG = 3.0  # of the thickness, along the line at each end (as `linemask.ALONG`)
LEGIBLE = 4  # letters or digits read for a turned line to count as text (as `linemask.LEGIBLE`)
REC_HEIGHT = 48  # px: a turned line is warped upright to this height for the recogniser


@dataclass(frozen=True, slots=True)
class Line:
    """A line of text at an angle: its quad (frame pixels), direction (degrees, [0, 180)) and thickness (px)."""

    quad: Quad
    angle: float
    thickness: float

    def box(self, shape: tuple[int, ...]) -> tuple[int, int, int, int]:
        """The axis-aligned box of the quad, inside the frame (end-exclusive)."""
        return bbox(self.quad, shape)


def geometry(quad: np.ndarray | Quad) -> tuple[float, float, float]:
    """(length, thickness, direction in degrees [0, 180)) of a quadrilateral's long axis."""
    q = np.asarray(quad, dtype=np.float64).reshape(4, 2)
    a, b = q[1] - q[0], q[3] - q[0]
    la, lb = float(np.hypot(*a)), float(np.hypot(*b))
    long_edge, length, thickness = (a, la, lb) if la >= lb else (b, lb, la)
    angle = float(np.degrees(np.arctan2(-long_edge[1], long_edge[0]))) % 180.0  # counter-clockwise from the row, y down
    return length, thickness, angle


def line_of(quad: np.ndarray | Quad) -> Line:
    q = np.asarray(quad, dtype=np.float64).reshape(4, 2)
    _, thickness, angle = geometry(q)
    return Line(tuple((float(x), float(y)) for x, y in q), angle, thickness)


def is_oriented(quad: np.ndarray | Quad) -> bool:
    """Whether a region's quad runs off the row (beyond OFF_AXIS degrees) and is shaped like a line."""
    if len(quad) == 0:
        return False
    length, thickness, angle = geometry(quad)
    off = min(angle, 180.0 - angle)
    return off > OFF_AXIS and length >= ELONGATED * max(thickness, 1.0)


def bbox(quad: np.ndarray | Quad, shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    q = np.asarray(quad, dtype=np.float64).reshape(4, 2)
    h, w = shape[:2]
    x0, y0 = int(np.floor(max(0.0, q[:, 0].min()))), int(np.floor(max(0.0, q[:, 1].min())))
    x1, y1 = int(np.ceil(min(float(w), q[:, 0].max() + 1))), int(np.ceil(min(float(h), q[:, 1].max() + 1)))
    return x0, y0, x1, y1


def _frame(line: Line) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """The line's own frame: its quad's centre, the unit vectors along and across its
    direction, and the quad's half length and half thickness in that frame."""
    q = np.asarray(line.quad, dtype=np.float64)
    centre = q.mean(axis=0)
    rad = np.radians(line.angle)
    along = np.array([np.cos(rad), -np.sin(rad)])
    across = np.array([-along[1], along[0]])
    rel = q - centre
    return centre, along, across, float(np.abs(rel @ along).max()), float(np.abs(rel @ across).max())


def grown(line: Line, along: float = ALONG) -> Quad:
    """The line's quad grown along its direction by `along` x its thickness at each end and across by MARGIN x."""
    centre, direction, across, half_len, half_thick = _frame(line)
    half_len += along * line.thickness
    half_thick += max(2.0, MARGIN * line.thickness)
    corners = [centre + sa * half_len * direction + sc * half_thick * across for sa, sc in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
    return tuple((float(x), float(y)) for x, y in corners)


def lengthened(line: Line, by: float) -> Line:
    """The line with its quad extended `by` px along its direction at each end (its thickness kept)."""
    centre, direction, across, half_len, half_thick = _frame(line)
    half_len += by
    corners = [centre + sa * half_len * direction + sc * half_thick * across for sa, sc in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
    return Line(tuple((float(x), float(y)) for x, y in corners), line.angle, line.thickness)


def extended(line: Line, behind: float, ahead: float) -> Line:
    """The line with its quad extended `behind` px before its start and `ahead` px past its end (along its direction,
    its thickness kept)."""
    centre, direction, across, half_len, half_thick = _frame(line)
    corners = [centre + sa * direction + sc * half_thick * across for sa, sc in ((-half_len - behind, -1), (half_len + ahead, -1), (half_len + ahead, 1), (-half_len - behind, 1))]
    return Line(tuple((float(x), float(y)) for x, y in corners), line.angle, line.thickness)


def turned_by(line: Line, degrees: float) -> Line:
    """The line turned `degrees` counter-clockwise about its quad's centre (its length and thickness kept)."""
    q = np.asarray(line.quad, dtype=np.float64)
    centre = q.mean(axis=0)
    rad = np.radians(degrees)
    turn = np.array([[np.cos(rad), np.sin(rad)], [-np.sin(rad), np.cos(rad)]])  # counter-clockwise on the frame (y down)
    return line_of((q - centre) @ turn.T + centre)


def shifted(line: Line, by: float) -> Line:
    """The line moved `by` px across its direction (its shape kept)."""
    across = _frame(line)[2]
    return Line(tuple((float(x + by * across[0]), float(y + by * across[1])) for x, y in line.quad), line.angle, line.thickness)


# Masks of one turned line joined (`joined`): the detector often finds a faint line at 45 degrees in pieces
# (its two ends, the middle not), each masked and grown alone; the gap between them stayed legible.
JOIN_ANGLE = 12.0  # degrees: the most two pieces of one line differ in direction
JOIN_OFF = 0.5  # of the thicker piece's thickness: the most the other's centre lies off its axis
JOIN_GAP = 2.0  # of the thicker piece's thickness: the most between the two along the line


def joined(quads: list[Quad]) -> list[Quad]:
    """Masks (quads) that lie on one line, in about one direction and near each other along it, replaced by the
    smallest rectangle that holds both, until no two are so joined."""
    import cv2

    lines = [line_of(q) for q in quads]
    i = 0
    while i < len(lines):
        for j in range(i + 1, len(lines)):
            a, b = lines[i], lines[j]
            turn = abs(a.angle - b.angle) % 180.0
            if min(turn, 180.0 - turn) > JOIN_ANGLE:
                continue
            centre, along, across, half_a, _ = _frame(a)
            half_b = _frame(b)[3]
            rel = np.asarray(b.quad, dtype=np.float64).mean(axis=0) - centre
            thick = max(a.thickness, b.thickness)
            if abs(float(rel @ across)) > JOIN_OFF * thick or abs(float(rel @ along)) - half_a - half_b > JOIN_GAP * thick:
                continue
            hull = cv2.boxPoints(cv2.minAreaRect(np.asarray(a.quad + b.quad, dtype=np.float32)))
            lines[i] = line_of(hull)
            del lines[j]
            break
        else:
            i += 1
    return [line.quad for line in lines]


def paint(pixels: np.ndarray, quads: list[Quad]) -> np.ndarray:
    """A copy of the frame with each quad filled black in every channel."""
    out = np.array(pixels, dtype=np.float64, copy=True)
    if not quads:
        return out
    mask = coverage_mask(out.shape, quads)
    out[mask] = 0.0
    return out


def coverage_mask(shape: tuple[int, ...], quads: list[Quad]) -> np.ndarray:
    """A boolean map of the frame's pixels inside any of the quads."""
    import cv2

    m = np.zeros(shape[:2], dtype=np.uint8)
    for q in quads:
        cv2.fillPoly(m, [np.round(np.asarray(q)).astype(np.int32)], 1)
    return m.astype(bool)


def upright(pixels: np.ndarray, line: Line, pad: float = 0.25) -> np.ndarray:
    """The line warped to a row (8-bit gray, REC_HEIGHT high, padded by `pad` x its thickness), reading left to right
    if the text runs in the quad's own direction (its 180-degree turn reads the other way)."""
    import cv2

    centre, along, across, half_len, half_thick = _frame(line)
    half_len += pad * line.thickness
    half_thick += pad * line.thickness
    src = np.array([centre - half_len * along - half_thick * across, centre + half_len * along - half_thick * across,
                    centre + half_len * along + half_thick * across], dtype=np.float32)  # fmt: skip
    scale = REC_HEIGHT / max(1.0, 2 * half_thick)
    out_w, out_h = max(8, int(round(2 * half_len * scale))), REC_HEIGHT
    dst = np.array([[0, 0], [out_w - 1, 0], [out_w - 1, out_h - 1]], dtype=np.float32)
    # Only the part of the frame the warp reads is made gray (a 4,096 px frame made gray whole for each line
    # cost 0.14 s a line: 3.6 s of a text-free MR frame's 13 s, measured 2026-12-05).
    corners = np.vstack([src, src[0] + src[2] - src[1]])
    h, w = np.shape(pixels)[:2]
    x0, y0 = (max(0, int(np.floor(v)) - 2) for v in corners.min(axis=0))
    x1, y1 = min(w, int(np.ceil(corners[:, 0].max())) + 3), min(h, int(np.ceil(corners[:, 1].max())) + 3)
    if x1 <= x0 or y1 <= y0:
        x0, y0, x1, y1 = 0, 0, w, h
    g = proposals.gray8(np.asarray(pixels)[y0:y1, x0:x1])
    src = src - np.array([x0, y0], dtype=np.float32)
    return cv2.warpAffine(g, cv2.getAffineTransform(src, dst), (out_w, out_h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def letters_or_digits(text: str) -> int:
    """How many letters or digits a reading holds: what every rule of the screen counts against its least."""
    return sum(1 for c in text if c.isalnum())


def read(reader: TextReader, pixels: np.ndarray, line: Line) -> str:
    """What the recogniser reads along the line, upright, the direction with more letters or digits."""
    return read_scored(reader, pixels, line)[0]


def read_scored(reader: TextReader, pixels: np.ndarray, line: Line) -> tuple[str, float]:
    """`read`, with the recogniser's confidence of that direction's reading."""
    row = proposals.stretched(upright(pixels, line))
    reads = [reader.recognise_scored(row), reader.recognise_scored(np.ascontiguousarray(row[::-1, ::-1]))]
    return max(reads, key=lambda r: (letters_or_digits(r[0]), r[1]))


def legible(reader: TextReader, pixels: np.ndarray, line: Line, confident: float = 0.0) -> bool:
    """LEGIBLE letters or digits read along the line, with the recogniser's confidence at least `confident`."""
    text, score = read_scored(reader, pixels, line)
    return letters_or_digits(text) >= LEGIBLE and score >= confident


# A near-vertical line is also read as a stack of upright letters laid out as a row (UNSTACK, since 2026-12-07, session
# 25). `read_scored` turns a line upright, so a stack's letters come to lie on their side, which the recogniser reads
# poorly: low-contrast 8-12 px stacks found by no detector view lay under the turned stroke maps' and the band map's
# near-vertical lines, read turned as "n08610M" (0.41), "2N2202" (0.39), "AUU" and "250" (0.78-0.80), or nothing, and
# even the stack's own box turned read as garbage at 0.18-0.69 (tuning seeds 15001-15030, 512 px: 4 of the 9 lines
# missed on 321 low-contrast 8-12 px lines, all 4 masked nowhere). Cut at its letters' pitch (the period of its ink
# down the strip, UNSTACK_PITCH of its thickness) and the cells set side by side, the same lines read "cC.5086521D"
# (0.76), "S.KAZ" (0.80), "KOWA1S.KA" (0.79) and "2702052" (0.57). Read as is and lengthened UNSTACK_REACH px at each
# end (a stroke or band line holds part of a stack; one tuning stack read at 0.61 as is and 0.58 lengthened), at
# UNSTACK_CONFIDENT whatever the floor of the reading it adds to, and at most one letter or digit a cell: texture laid
# out so read as long strings of digits (22 from 19 and 21 cells) at 0.50-0.54 and masked 2 of 30 text-free 1,024 px
# tuning frames (seed 15031) at a floor of 0.5 without that limit. Its cost, with UNSTACK_THICK below (the screen of 28
# frames with text and 20 without, tuning seeds 15001 and 15031, off and on in turn in one process): 0.86 -> 0.89 s a 512
# px frame with text, 0.57 -> 0.60 s without (means); a third more without that limit (0.81 -> 1.07 and 0.56 -> 0.65).
UNSTACK = True
UNSTACK_OFF = 15.0  # degrees from the vertical (as `linemask.COLUMN_OFF`)
UNSTACK_PITCH = (0.7, 2.5)  # a letter's pitch down the stack, in the line's thickness (its letter's width, about)
UNSTACK_CELLS = 3  # cells at least: a shorter strip is not a stack to read
UNSTACK_REACH = 60.0  # px (as `linemask.TURNED_REACH`)
UNSTACK_CONFIDENT = 0.6
# px: a thicker line is not read as a stack (letters of 8-16 px are 5-12 px wide; larger stacks the detector finds). Out of
# sample (seeds 15501-15504) two 1,024 px mammogram-like frames with a line at 90 or 270 degrees took 11-13 s against
# 2.5-3.9 s without the rule: 10-12 near-vertical stroke-map lines each, most of them 14-55 px thick (the line's own and
# the texture's), read as stacks in every pass of the net (60-80 reads of long rows).
UNSTACK_THICK = 12.0


def unstacked(pixels: np.ndarray, line: Line) -> tuple[np.ndarray, int] | None:
    """A near-vertical line's strip (its box, 2 px wider each side) cut into cells at its letters' pitch and the cells
    set side by side as a row (8-bit, contrast stretched), and the number of cells; None when the line is not
    near-vertical or gives no pitch.
    The pitch is the first lag, in UNSTACK_PITCH of the line's thickness, where the autocorrelation of the strip's ink
    down its rows (each row's mean distance from the strip's median grey) peaks at 0.7 of its highest or more (a
    multiple of the pitch correlates as well); the cuts go where the ink is least."""
    if abs(line.angle - 90.0) > UNSTACK_OFF:
        return None
    g = proposals.gray8(pixels)
    h, w = g.shape
    x0, y0, x1, y1 = line.box(g.shape)
    x0, x1 = max(0, x0 - 2), min(w, x1 + 2)
    crop = g[y0:y1, x0:x1].astype(np.float32)
    if crop.size == 0:
        return None
    ink = np.abs(crop - np.median(crop)).mean(axis=1)
    ink = ink - ink.mean()
    n, t = len(ink), max(3.0, line.thickness)
    lags = list(range(max(4, int(UNSTACK_PITCH[0] * t)), min(n // UNSTACK_CELLS, int(UNSTACK_PITCH[1] * t)) + 1))
    if not lags:
        return None
    cor = np.array([float(np.dot(ink[:-lag], ink[lag:])) / (n - lag) for lag in lags])
    if cor.max() <= 0:
        return None
    peaks = [k for k in range(len(lags)) if cor[k] >= 0.7 * cor.max() and (k == 0 or cor[k] >= cor[k - 1]) and (k == len(lags) - 1 or cor[k] >= cor[k + 1])]
    pitch = lags[peaks[0]] if peaks else lags[int(np.argmax(cor))]
    phase = int(np.argmin([float(np.mean(ink[p::pitch])) for p in range(pitch)]))
    ground = float(np.median(crop))
    # The strip padded by a pitch of its ground above and below: the letters before the first cut and after the last count.
    padded = np.vstack([np.full((pitch, crop.shape[1]), ground, np.float32), crop, np.full((pitch, crop.shape[1]), ground, np.float32)])
    cells = [padded[a : a + pitch] for a in range(phase, n + pitch, pitch)]
    if len(cells) < UNSTACK_CELLS:
        return None
    gap = np.full((pitch, max(2, crop.shape[1] // 4)), ground, np.float32)
    row = np.hstack([part for c in cells for part in (c, gap)])
    return proposals.stretched(np.clip(row, 0, 255).astype(np.uint8)), len(cells)


def stack_read(reader: TextReader, pixels: np.ndarray, line: Line) -> Line | None:
    """With UNSTACK, the near-vertical line (UNSTACK_THICK px thick or thinner) lengthened UNSTACK_REACH px at each end (the line to mask: a stroke or band
    line holds part of a stack) when it, read as a stack (`unstacked`) as is or so lengthened, is LEGIBLE letters or
    digits at UNSTACK_CONFIDENT or more; else None."""
    if not UNSTACK or abs(line.angle - 90.0) > UNSTACK_OFF or line.thickness > UNSTACK_THICK:
        return None
    longer = lengthened(line, UNSTACK_REACH)
    for part in (line, longer):
        laid = unstacked(pixels, part)
        if laid is not None:
            text, score = reader.recognise_scored(laid[0])
            if LEGIBLE <= letters_or_digits(text) <= laid[1] and score >= UNSTACK_CONFIDENT:
                return longer
    return None


def _turned(binary: np.ndarray, turn: int) -> tuple[np.ndarray, np.ndarray]:
    """The 0/1 map turned counter-clockwise by `turn` degrees on a canvas that holds all of it, and
    the 2 x 3 affine map from the turned canvas back to the frame."""
    import cv2

    m, size, back = _turn_matrix(binary.shape, turn)
    return cv2.warpAffine(binary, m, size, flags=cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT, borderValue=0), back


def candidates(pixels: np.ndarray) -> list[Line]:
    """Stroke clusters shaped like a line of text at each angle of TURNS (frame pixels): the stroke maps of
    `proposals` turned, their lines found as rows (`proposals.line_boxes`), and the corners turned back.
    A frame larger than TURN_SIDE is searched on its maps reduced (a pixel of the reduced map is a stroke
    when any of its k x k is): finding lines costs about 0.1 s per megapixel of turned map. Kept per frame
    content for the last few frames (the detector's crops and the net both ask)."""
    import hashlib

    g = proposals.gray8(pixels)
    key = hashlib.sha256(g.tobytes() + repr(g.shape).encode()).digest()
    if key in _CANDIDATES:
        return list(_CANDIDATES[key])
    k = max(1, int(np.ceil(max(g.shape) / TURN_SIDE)))
    out: list[Line] = []
    for binary in proposals.stroke_maps(g):
        if k > 1:
            h, w = binary.shape
            pad = np.zeros((-(-h // k) * k, -(-w // k) * k), dtype=np.uint8)
            pad[:h, :w] = binary
            binary = pad.reshape(pad.shape[0] // k, k, pad.shape[1] // k, k).max(axis=(1, 3))
        for turn in TURNS:
            if turn == 90:
                turned = np.ascontiguousarray(np.rot90(binary))  # exact: rows of the turned map are the frame's columns
                back = np.array([[0.0, -1.0, binary.shape[1]], [1.0, 0.0, 0.0]])  # turned (x', y') -> map (x = w - y', y = x')
            else:
                turned, back = _turned(binary, turn)
            for x0, y0, x1, y1 in proposals.line_boxes(turned, DENSITY):
                corners = np.array([[x0, y0, 1.0], [x1, y0, 1.0], [x1, y1, 1.0], [x0, y1, 1.0]])
                out.append(line_of(k * (corners @ back.T)))
    if len(_CANDIDATES) >= 2:
        _CANDIDATES.pop(next(iter(_CANDIDATES)))
    _CANDIDATES[key] = tuple(out)
    return out


TURN_SIDE = 2048  # px: larger frames are searched for turned lines on their stroke maps reduced to about this
# The least share of a turned line's box that is stroke pixels. Texture joins into lines at any angle, each a detector
# crop and a net reading: a text-free 4,096 px MR-like frame took 13 s at any angle against 2.4 s rows only. Measured
# 2026-12-05 (seeds 6101, 6102): turned lines on text 0.51 median (5th percentile 0.22), off text 0.13, and 47 of the
# 48 turned lines of three text-free 4,096 px MR-like frames below 0.2.
DENSITY = 0.2
_CANDIDATES: dict[bytes, tuple[Line, ...]] = {}


def crops(pixels: np.ndarray, lines: list[Line]) -> list[proposals.Crop]:
    """The crops the detector reads closely for turned lines: each line's box padded (by its thickness,
    and 4 times it along the larger side), read at the scale that brings its thickness to the target."""
    shape = np.asarray(pixels).shape
    h, w = shape[:2]
    by_scale: dict[float, list[tuple[int, int, int, int]]] = {}
    for line in lines:
        t = max(3, int(round(line.thickness)))
        x0, y0, x1, y1 = line.box(shape)
        pad = max(24, 4 * t)
        box = (max(0, x0 - pad), max(0, y0 - pad), min(w, x1 + pad), min(h, y1 + pad))
        by_scale.setdefault(proposals.scale_for(t), []).append(box)
    return [proposals.Crop(b, s) for s, boxes in sorted(by_scale.items()) for b in proposals.merge(boxes)]


# The faint-line map (`proposals.band_contrast`) turned as the stroke maps are, and at coarser scales.
# A low-contrast line (0.15 of full scale) at 45 or 135 degrees was the screen's commonest miss: its strokes
# stood above the frame's noise only in pieces, so the detector found part of it (or none) and no stroke-map
# line proposed the rest. Its mean over a band along the line stands out all the same. The map's band is
# FAINT_BAND px, the glyphs of 8 px text; larger text is seen on the frame reduced by FAINT_SCALES (a 48 px
# line's glyphs are about 5 px at 1/8), where anatomy's noise averages out too.
FAINT_SCALES = (1, 2, 4, 8)
FAINT_TURNS = (0, 90, 45, 135)  # degrees; the row at full scale is `proposals.faint_lines` (the row net)
FAINT_SIDE = 1024  # px: a scale whose reduced frame is longer than this is not searched (at 2,048 px, 1.7 s a frame with text at 1/1, 0.3 s from 1/2; measured 2026-12-05)
FAINT_THICK = 2  # px of the reduced map added to a band line's thickness (the glyphs reach past the band's centres)


def faint_candidates(pixels: np.ndarray, scales: tuple[int, ...] = FAINT_SCALES) -> list[Line]:
    """Faint lines at the angles of FAINT_TURNS and the `scales` (frame pixels), but the row at full scale: the band
    map of `proposals` on the frame reduced and turned (its noise measured before turning, pixels off the frame
    ignored), its lines' corners turned back. For the recogniser's net and the chain rule (`linemask.plan`)."""
    import cv2

    g = proposals.gray8(pixels)
    h, w = g.shape
    out: list[Line] = []
    for k in scales:
        if max(h, w) / k > FAINT_SIDE or min(h, w) / k < 3 * proposals.FAINT_BAND:
            continue
        small = g if k == 1 else cv2.resize(g, (max(1, w // k), max(1, h // k)), interpolation=cv2.INTER_AREA)
        gf = small.astype(np.float32)
        noise = proposals._noise(gf)
        inside = np.ones_like(gf)
        tg: np.ndarray
        tn: np.ndarray
        ti: np.ndarray | None
        for turn in FAINT_TURNS:
            if turn == 0 and k == 1:
                continue
            if turn == 0:
                tg, tn, ti, back = gf, noise, None, np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
            elif turn == 90:
                tg, tn, ti = (np.ascontiguousarray(np.rot90(a)) for a in (gf, noise, inside))
                back = np.array([[0.0, -1.0, gf.shape[1]], [1.0, 0.0, 0.0]])
            else:
                m, size, back = _turn_matrix(gf.shape, turn)
                tg, tn = (cv2.warpAffine(a, m, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE) for a in (gf, noise))
                ti = cv2.warpAffine(inside, m, size, flags=cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
            for corners in proposals.band_quads(proposals.band_contrast(tg, ti, tn)):
                line = line_of(corners)
                centre, along, across, half_len, half_thick = _frame(line)
                half_thick += FAINT_THICK / 2
                ends = [centre + sa * half_len * along + sc * half_thick * across for sa, sc in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
                out.append(line_of(k * (np.column_stack([np.asarray(ends), np.ones(4)]) @ back.T)))
    return out


# A frame where the detector found nothing (`lone_lines`, for `textscreen.text_regions`). Everything after the detector
# (the band map, lines followed, grown and netted) starts from what it found: a faint small turned line whose strokes no
# stroke map joins and the detector does not see was exported whole, a quarter of the misses on the tuning seeds of
# 2026-12-06 (benchmarks/RESULTS.md section 23a). The band map at full scale lies along most of them, and read upright
# the recogniser reads them with a confidence of 0.5-0.92. So on such a frame the band map's lines at full scale
# (LONE_THICK px thick or thinner: 8-12 px text) are ranked by how their band varies along them as strokes do (`_along`)
# and the first LONE_READS are read (upright, both ways); one read as LEGIBLE letters or digits at LONE_CONFIDENT or more
# is taken for a line the detector found. Measured 2026-12-06 (tuning seeds 9001-9004, the 195 frames of 512 and 1,024
# px where the detector found nothing, 160 of them without text): band lines off the text read as 4 or more letters or
# digits came at 0.37 at most (0.40 for 3), the text's at 0.5-1.0; the text's line was first or second of its frame
# by that ranking (4 thin lines a frame, median; 21 at most). Frames larger than FAINT_SIDE have no full-scale map (an
# 8 px line there is left to the crops, as before).
LONE = True
LONE_THICK = 12.0
LONE_READS = 6
LONE_CONFIDENT = 0.5
# And the band map at half scale (LONE_HALF): its lines LONE_HALF_THICK px thick or thinner (12-16 px text), ranked the
# same way, the first LONE_HALF_READS read at the same floor. A 12 px low-contrast date at 45 degrees over noise that the
# detector did not see, whose full-scale band lines were none, lay on the half-scale map's first line, read "19350319"
# at 0.99 (tuning seed 10024, 2026-12-06, evening). Measured then on the 98 frames of 512 and 1,024 px where the detector
# found nothing (tuning seeds 10038-10040, 90 of them without text; each frame's first 8 half-scale lines read): lines
# off text read as 4 letters or digits came at 0.43 at most (6 of them, 0.22-0.43; 2 of them their frame's first). One
# read, not six: each costs two recogniser calls (about 0.04 s of CPU) on most text-free frames (the detector finds
# nothing there): with three, a text-free 512 px frame took 0.42 s (median) against 0.29 s without (tuning seed 10035,
# 100 frames), and the line of text was its frame's first.
LONE_HALF = True
LONE_HALF_THICK = 24.0
LONE_HALF_READS = 1


def lone_lines(reader: TextReader, pixels: np.ndarray) -> list[Line]:
    """The band map's thin lines at full scale read as text (for a frame where the detector found nothing; see above);
    with UNSTACK a near-vertical one read as a stack counts too, lengthened (`stack_read`)."""
    g = proposals.gray8(pixels)
    if max(g.shape) > FAINT_SIDE:
        return []
    out = [read for line in _ranked(g, 1, LONE_THICK)[:LONE_READS] if (read := _lone_read(reader, g, line)) is not None]
    if LONE_HALF and not out:
        out = [read for line in _ranked(g, 2, LONE_HALF_THICK)[:LONE_HALF_READS] if (read := _lone_read(reader, g, line)) is not None]
    return out


def _lone_read(reader: TextReader, g: np.ndarray, line: Line) -> Line | None:
    """The line when read as text at LONE_CONFIDENT, as is or (NARROW) narrowed to its strokes (`narrow_legible`); else,
    with UNSTACK, the stack it is read as (`stack_read`); else None."""
    if legible(reader, g, line, LONE_CONFIDENT) or narrow_legible(reader, g, line):
        return line
    return stack_read(reader, g, line)


# A thin band-map line is also read narrowed to where its strokes are (NARROW, session 29): its middle NARROW_CUT of its
# thickness, about its axis and NARROW_SHIFT of its thickness to either side. The full-scale band map lies along most 8 px
# low-contrast lines, 9-12 px thick for glyphs of 6 px with 1 px strokes, and read upright with that ground above and below
# the recogniser reads them as garbage ("VTEYNR" 0.41 for "M. MCMILLAN", "Cs" 0.15 for "ID: 766750", "Kimle" 0.29 for
# "KOWALSKA, ARTHURINA ...": tuning seeds 19003, 18004); cut to 0.7 of their thickness the same lines read "ACNARLA" 0.52,
# "066281" 0.70, "KOWAE" 0.83. A cut placed by the strip's own stroke profile across it was tried and read worse (its
# place is not reliable on 1 px strokes at low contrast, as session 25 found). Read so, short band lines off text on
# text-free frames come back as 4-6 letters or digits at up to 0.64 ("21220" 0.50, "2892" 0.60, "335768" 0.64: at the
# lone reading's LEGIBLE and 0.5 it masked 4 of 240 text-free 512 and 1,024 px tuning frames, seeds 19021-19024, 3 of
# them mammogram-like frames where the detector found nothing), while an identifying 8 px line read narrowed comes back
# with most of its characters ("ACNARLA", "19380002", "101L109T", "ARTDRRDY" at 0.52-0.70). So a line read narrowed
# counts as text at NARROW_LEAST letters or digits or more and NARROW_CONFIDENT. Only lines NARROW_THICK px thick or
# thinner (the full-scale map: 8 px text); up to 3 reads (each two recogniser calls) a line not read as text as is. So set,
# on tuning seeds 19001-19006 (480 frames with text) one line more masked, none fewer, and no text-free frame masked of
# 480 (seeds 19021-19028); it read 147 lines of 54 of 100 frames of seed 19032, 0.16 s a frame on average; out of sample
# (seeds 19501-19550, 1,200 frames) one line more, none fewer, no text-free frame masked by it (benchmarks/RESULTS.md 23a,
# session 29). `python -m benchmarks.deid_ocr --no-narrow` measures without it.
NARROW = True
NARROW_THICK = 12.0
NARROW_CUT = 0.7
NARROW_SHIFT = 0.15
NARROW_LEAST = 7
NARROW_CONFIDENT = 0.5


def narrowed(line: Line, cut: float, shift: float) -> Line:
    """The line cut to `cut` of its thickness about an axis moved `shift` of its thickness across it."""
    centre, along, across, half_len, half_thick = _frame(line)
    centre = centre + shift * line.thickness * across
    corners = [centre + sa * half_len * along + sc * cut * half_thick * across for sa, sc in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
    return Line(tuple((float(x), float(y)) for x, y in corners), line.angle, line.thickness * cut)


def narrow_legible(reader: TextReader, pixels: np.ndarray, line: Line) -> bool:
    """With NARROW, whether a line NARROW_THICK px thick or thinner is read as text narrowed to its strokes (see above)."""
    if not NARROW or line.thickness > NARROW_THICK:
        return False
    reads = []
    for shift in (0.0, -NARROW_SHIFT, NARROW_SHIFT):
        text, score = read_scored(reader, pixels, narrowed(line, NARROW_CUT, shift))
        count = letters_or_digits(text)
        if count >= NARROW_LEAST and score >= NARROW_CONFIDENT:
            return True
        reads.append((count, score))
    return halved_legible(reader, pixels, line, reads)


# And, not read so, cut to its middle NARROW_HALF_CUT about its axis (NARROW_HALF, session 30). Of the 8 px low-contrast
# lines that NARROW read and did not count (session 29's tuning and out-of-sample misses: seeds 19001, 19003, 19006,
# 19525), four read cut to their middle half as NARROW_LEAST letters or digits or more at NARROW_CONFIDENT or more
# ("Spdy 8g9." 0.63 for "Study 6949", "0662813" 0.71 for "ID: 766750", "0200260506" 0.55 for "ACC-9265596", "112141640"
# 0.61 for "19471211"). So read, short band lines off text on text-free frames come back as 7-8 letters or digits too
# ("1232382" 0.58, "2958290" 0.62 on 2 of 240 text-free tuning frames, seeds 20021-20024; "23002602" 0.50 on one of 140
# out of sample, seed 20515, with a first form that counted 8 alone), but for three of the four text lines one of the
# 0.7 cuts read part of the line ("9ply 599" 0.48, "066281" 0.70, "nzlfa:" 0.52) where those texture lines' 0.7 cuts
# read nothing of 5 at 0.45 (3 of the 460 thin band lines read on 360 text-free tuning frames did; cut to their middle
# half, none read 7 at 0.5). So the half counts at NARROW_LEAST (and NARROW_CONFIDENT) where a 0.7 cut read
# NARROW_AGREE letters or digits at NARROW_AGREE_CONFIDENT; read only there, on 8 of 542 thin band lines not read
# otherwise (tuning seeds 20002-20007, 20021-20026, with session 29's misses). A count set by the
# line's length (an 8 px line N px long holds about N/5 characters) did not tell the two apart: the texture's 7-9
# character reads came at 4.4-6.8 px a character, the text's at 4.2-6.9. One read (two recogniser calls, 0.05 s) on
# those lines. Off: out of sample (seeds 20601-20692, 2,208 frames, 2,640 lines) it changed no frame: no line more, none
# fewer, no text-free frame more (benchmarks/RESULTS.md 23a, session 30). `python -m benchmarks.deid_ocr --narrow-half`
# measures it on.
NARROW_HALF = False
NARROW_HALF_CUT = 0.5
NARROW_AGREE = 5
NARROW_AGREE_CONFIDENT = 0.45


def halved_legible(reader: TextReader, pixels: np.ndarray, line: Line, reads: list[tuple[int, float]]) -> bool:
    """With NARROW_HALF, whether a thin band line is read as text cut to its middle NARROW_HALF_CUT (see above), given
    the (letters or digits, confidence) of its NARROW_CUT reads."""
    if not NARROW_HALF or not any(n >= NARROW_AGREE and c >= NARROW_AGREE_CONFIDENT for n, c in reads):
        return False  # no 0.7 cut read part of it: the half read is not made
    text, score = read_scored(reader, pixels, narrowed(line, NARROW_HALF_CUT, 0.0))
    return letters_or_digits(text) >= NARROW_LEAST and score >= NARROW_CONFIDENT


def _ranked(g: np.ndarray, scale: int, thick: float) -> list[Line]:
    """The band map's lines at `scale`, `thick` px thick or thinner, the most stroke-like first (`lone_lines`)."""
    ranked: list[tuple[float, Line]] = []
    for line in faint_candidates(g, scales=(scale,)):
        if line.thickness > thick:
            continue
        found = _along(g, line)
        if found is not None:
            strokes, lo, hi = found[1], found[3], found[4]
            ranked.append((float(np.mean(strokes[lo:hi])), line))
    ranked.sort(key=lambda p: -p[0])
    return [line for _, line in ranked]


def _turn_matrix(shape: tuple[int, ...], turn: int) -> tuple[np.ndarray, tuple[int, int], np.ndarray]:
    """The 2 x 3 affine map turning an image of `shape` counter-clockwise by `turn` degrees onto a canvas that holds
    all of it, the canvas's size (w, h), and the map back."""
    import cv2

    h, w = shape[:2]
    m = cv2.getRotationMatrix2D((w / 2.0, h / 2.0), float(turn), 1.0)
    cos, sin = abs(m[0, 0]), abs(m[0, 1])
    nw, nh = int(np.ceil(h * sin + w * cos)), int(np.ceil(h * cos + w * sin))
    m[0, 2] += nw / 2.0 - w / 2.0
    m[1, 2] += nh / 2.0 - h / 2.0
    return m, (nw, nh), cv2.invertAffineTransform(m)


# A line the detector found followed along its own axis (`followed`). A faint turned line (0.15 of full scale) often
# comes back from the detector in part: the letters that stood clearest, over the darker or the smoother part of the
# ground; the rest of the line went unmasked and no stroke or band map showed it (their windows are fixed, 3 x 3 px to
# 5 x 15 px at a few scales, where the line's own is its thickness, known once a piece is found). So the frame is read
# as a strip along the piece's axis, the piece's thickness high, with a flank of half a thickness over and under it:
# per step along the axis, the strip's mean against each flank's (brighter than both, or darker than both: a faint
# line's grey is set against the ground where it starts, so it may be brighter than one part of the ground it crosses
# and darker than the next), the smaller of the two (an edge of the anatomy along the line differs from one flank only,
# one across it moves strip and flanks together), averaged over one thickness along the axis and put in units of its
# noise (the ground's, from neighbouring pixels along the strip). The piece is extended over the steps that stand
# FOLLOW_Z units or more clear, across gaps of FOLLOW_GAP thicknesses at most (between words), FOLLOW_REACH
# thicknesses at most at each end.
FOLLOW_PX = 24.0  # px: the strip is sampled so that the line's thickness is at most this many (a wide line averaged)
FOLLOW_BAND = 0.3  # of the thickness, each side of the axis: the band (a detector's quad is about twice the glyphs' height)
FOLLOW_FLANK = 0.4  # of the thickness: each flank's width
FOLLOW_SKIP = 0.15  # of the thickness: between the band and each flank (the glyphs' ascenders and descenders)
FOLLOW_Z = 4.0
FOLLOW_STROKES = 2.0
FOLLOW_GAP = 1.5
FOLLOW_REACH = 30.0


def followed(pixels: np.ndarray, line: Line) -> Line:
    """The line extended along its axis over the part of the frame where the text it holds goes on (see above);
    the line itself when nothing goes on (or the strip leaves the frame at once)."""
    found = _along(pixels, line)
    if found is None:
        return line
    z, strokes, valid, lo, hi, s, reach = found
    centre, along, across, half_len, half_thick = _frame(line)
    t = max(3.0, 2 * half_thick)
    text = (z >= FOLLOW_Z) & (strokes >= FOLLOW_STROKES) & valid
    gap = FOLLOW_GAP * t * s
    a0, a1 = lo, hi - 1
    for step, stop in ((-1, -1), (1, len(z))):
        miss = 0
        for x in range(lo - 1 if step < 0 else hi, stop, step):
            if not valid[x]:
                break
            miss = 0 if text[x] else miss + 1
            if miss > gap:
                break
            if text[x]:
                a0, a1 = (x, a1) if step < 0 else (a0, x)
    if a0 >= lo and a1 <= hi - 1:
        return line
    start, end = min(a0 / s - reach - half_len, -half_len), max(a1 / s - reach - half_len, half_len)
    corners = [centre + sa * along + sc * half_thick * across for sa, sc in ((start, -1), (end, -1), (end, 1), (start, 1))]
    return Line(tuple((float(px), float(py)) for px, py in corners), line.angle, line.thickness)


def _along(pixels: np.ndarray, line: Line) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, float, float] | None:
    """The strip along the line's axis (`followed`): per step, how many noise units its mean stands clear of both
    flanks' (the larger of brighter and darker, averaged over one thickness), whether the step's strip lies inside
    the frame, the steps of the line itself (lo to hi, end-exclusive), the strip's scale and reach (frame pixels
    before and after the line). None when the strip holds no band or flank."""
    import cv2

    g = proposals.gray8(pixels)  # 8-bit: a 4,096 px frame is not copied to floats for each line
    h, w = g.shape
    centre, along, across, half_len, half_thick = _frame(line)
    t = max(3.0, 2 * half_thick)
    s = min(1.0, FOLLOW_PX / t)
    reach = FOLLOW_REACH * t
    side = t * (FOLLOW_BAND + FOLLOW_SKIP + FOLLOW_FLANK)  # from the axis to a flank's outer edge
    out_w, out_h = int(np.ceil(2 * (half_len + reach) * s)) + 1, max(5, int(np.ceil(2 * side * s)) + 1)
    # out (x', y') -> frame: centre + (x' / s - half_len - reach) along + (y' / s - side) across
    m = np.array([[along[0] / s, across[0] / s, centre[0] - (half_len + reach) * along[0] - side * across[0]],
                  [along[1] / s, across[1] / s, centre[1] - (half_len + reach) * along[1] - side * across[1]]])  # fmt: skip
    strip = cv2.warpAffine(g, m, (out_w, out_h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REPLICATE).astype(np.float32)
    y = (np.arange(out_h) / s - side) / t  # rows in thicknesses from the axis
    band, over, under = np.abs(y) <= FOLLOW_BAND, y < -(FOLLOW_BAND + FOLLOW_SKIP), y > FOLLOW_BAND + FOLLOW_SKIP
    # A step counts where its whole column of the strip lies inside the frame (both ends: the column is a segment).
    x = np.arange(out_w, dtype=np.float64)
    valid = np.ones(out_w, dtype=bool)
    for row in (0.0, out_h - 1.0):
        fx, fy = m[0, 0] * x + m[0, 1] * row + m[0, 2], m[1, 0] * x + m[1, 1] * row + m[1, 2]
        valid &= (fx >= 0) & (fx <= w - 1) & (fy >= 0) & (fy <= h - 1)
    lo, hi = max(0, int(np.floor(reach * s))), min(out_w, int(np.ceil((reach + 2 * half_len) * s)) + 1)  # the line's own steps
    if not (band.any() and over.any() and under.any()) or not valid[lo:hi].any() or int(valid.sum()) < 3:
        return None
    b, o, u = strip[band].mean(axis=0), strip[over].mean(axis=0), strip[under].mean(axis=0)
    flank = strip[over | under][:, valid]
    sigma = max(1.0, float(np.mean(np.abs(np.diff(flank, axis=1)))) * float(np.sqrt(np.pi) / 2))  # the ground's noise
    k = max(1, int(round(t * s)))  # one thickness along the axis
    unit = sigma * float(np.sqrt(1.0 / int(band.sum()) + 1.0 / int(min(over.sum(), under.sum())))) / np.sqrt(k)
    def along_mean(v: np.ndarray, n: int) -> np.ndarray:
        out: np.ndarray = cv2.blur(np.where(valid, v, 0.0).astype(np.float32).reshape(1, -1), (n, 1), borderType=cv2.BORDER_CONSTANT).ravel()
        return out

    z = np.zeros(out_w, dtype=np.float32)
    for d in (np.minimum(b - o, b - u), np.minimum(o - b, u - b)):  # brighter than both flanks, or darker
        z = np.maximum(z, along_mean(d, k) / unit)
    # Strokes: glyphs make the band's mean go up and down along the axis (stroke, gap, stroke), a ridge of the anatomy
    # along the line does not; the band's variation at the scale of a stroke against the larger of its flanks'.
    half = max(2, k // 3)
    energy = [along_mean((v - along_mean(v, half)) ** 2, k) for v in (b, o, u)]
    floor = (sigma**2) * (1.0 / int(band.sum()))
    strokes = energy[0] / np.maximum(np.maximum(energy[1], energy[2]), floor)
    return z, strokes, valid, lo, hi, s, reach
