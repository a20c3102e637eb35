"""From detected text regions to the boxes a frame is masked with, checked by the recogniser.

The detector's box of a line is tight and sometimes short: it clips the first or last
letters, or returns a line as two words. A mask that leaves "…NSKY" readable has failed.
So the mask is generous along the text:

- each region is grown by MARGIN x its height above and below and ALONG x its height to
  the left and right (whole-line extension; text runs horizontally on a console);
- boxes on one line (overlapping by half the lower one's height) with a gap under GAP x
  their height are one box.

Then the masked frame is checked with the recogniser alone (no detector): the strips
beside each box, STRIP x its height wide, are read, and a strip where 4 or more letters or
digits are read is masked too (a second pass). A strip still read after PASSES passes
makes the frame `readable`: the screen refuses it rather than export a line it could not
cover. Detector-free, so it sees the part of a line the detector left out.

The strips see only beside a mask: a line the detector missed entirely has none. So every
stroke-map candidate (`proposals.candidates`, and `proposals.faint_lines` for lines too faint
for a stroke to show) not inside a mask is read too, on the masked
frame, as its own contrast stretched (a small crop, one recogniser call): a candidate where
LEGIBLE letters or digits are read is masked like a detector's region (grown along its line,
the strips beside it re-read), and the frame is `readable`, so refused, if a candidate
outside every mask is still read after that. The stroke map's box of a faint line may hold
only part of it; the growth along the line and the strips' re-reading are what cover the
rest, exactly as for a detector's box that clipped a line's first letters. A net reading counts only
at the recogniser's confidence NET_CONFIDENT or more (texture read as letters comes with a low one).

A turned region, a column and a row region twice as wide as tall or more are first followed along their own axis
(`oriented.followed`: a faint line found in part goes on where a strip of its thickness stands clear of both flanks). Two rules
cover what the detector found only in part, without reading: regions one under another
(a stack of upright letters found letter by letter) are masked as one column (`columns`), and a
stroke-map line partly under a mask is masked whole (`chained`), as is a faint line of the band map
(`oriented.faint_candidates`) that goes on along a line the detector found (`_goes_on`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from medrcube.construction.privacy import ocr, oriented, proposals

Box = tuple[int, int, int, int]
MARGIN = 0.35
ALONG = 3.0  # measured: the detector's box of a faint 12 px line began 2.3 heights after its first letters ("Z. ")
GAP = 1.5
STRIP = 4.0
PASSES = 2
LEGIBLE = 4  # letters or digits the recogniser must read in a strip for it to count as text
# px: a shorter stroke-map candidate is not read by the net. The smallest text screened is
# 8 px, whose candidates measured 6 px or taller (lowercase without ascenders too); a 4 px
# streak of CT texture was read as "mmpad" and refused a text-free frame (measured 2026-12-02).
NET_MIN_HEIGHT = 5
# The recogniser's confidence (the lowest of its pieces) a net candidate's reading must reach to be
# masked. Texture read as letters comes with a low one: on 173 stroke-map lines of 512-1,024 px
# frames that lay off any text, 5 were read as 4 or more letters or digits ("2520", "HEAO", katakana),
# at 0.19-0.39; 133 of the 138 lines on text read so had 0.5 or more (measured 2026-12-05, seed 555).
# The strips beside a mask keep no such floor: text is known to be there.
NET_CONFIDENT = 0.5
# Of its thickness: a turned line masked (found, followed, chained or netted) is grown this much along it at each end.
# A faint line's grey is fixed where it starts; where it runs onto ground of that grey its glyphs cannot be seen, nothing
# is there to follow, and the glyphs are still the line's: 3 thicknesses (`oriented.ALONG`) left such ends out, and 6 still
# left the far end of a long low-contrast line found only at its other end (a 32 px "ID: ... DOB ..." at 45 degrees found
# as its last 9 characters, a 16 px line at 135 degrees whose mask ended 2 letters short: tuning seeds 10001-10006, 2026-12-06).
# An identifying line of 26 characters is about 10 thicknesses long; 8 at each end cover one found in its last third.
TURNED_ALONG = 8.0
# px: and at least this far. A turned line the net found on a stroke-map line is as thick as its glyphs (6 px for 8 px
# text: 6 thicknesses are 36 px, 6 letters), and read in the middle of a long line it left the first and last letters out.
TURNED_REACH = 60.0


def _grown_turned(line: oriented.Line) -> oriented.Quad:
    """A turned line's mask: grown TURNED_ALONG thicknesses along it at each end, and TURNED_REACH px at least."""
    return oriented.grown(line, along=max(TURNED_ALONG, TURNED_REACH / max(line.thickness, 1.0)))


@dataclass(frozen=True, slots=True)
class MaskPlan:
    """The boxes to mask, and whether a line stayed readable beside them after every pass."""

    boxes: list[Box]
    extended: int  # strips masked by the recogniser's check
    readable: bool
    netted: int = 0  # stroke-map candidates the detector had missed, read as text and masked
    # Lines that run off the row (`oriented`), masked as quads grown along them (frame pixels).
    quads: tuple[oriented.Quad, ...] = ()

    def covered(self, shape: tuple[int, ...]) -> np.ndarray:
        """The frame's pixels the plan masks (boxes and quads), as a boolean map."""
        m = oriented.coverage_mask(shape, list(self.quads))
        for x0, y0, x1, y1 in self.boxes:
            m[y0:y1, x0:x1] = True
        return m

    def paint(self, pixels: np.ndarray) -> np.ndarray:
        """A copy of the frame with everything the plan masks black."""
        return oriented.paint(paint(pixels, self.boxes), list(self.quads))


def grown(box: Box, shape: tuple[int, ...]) -> Box:
    """The box grown by MARGIN x its height above and below, ALONG x its height left and right (at least 2 and 4 px)."""
    x0, y0, x1, y1 = box
    h, w = shape[:2]
    lh = y1 - y0
    py, px = max(2, int(np.ceil(MARGIN * lh))), max(4, int(np.ceil(ALONG * lh)))
    return (max(0, x0 - px), max(0, y0 - py), min(w, x1 + px), min(h, y1 + py))


def _same_line(a: Box, b: Box) -> bool:
    overlap = min(a[3], b[3]) - max(a[1], b[1])
    lower = min(a[3] - a[1], b[3] - b[1])
    gap = max(a[0], b[0]) - min(a[2], b[2])
    return overlap >= 0.5 * lower and gap <= GAP * lower


def _inside(a: Box, b: Box) -> bool:
    return b[0] <= a[0] and b[1] <= a[1] and a[2] <= b[2] and a[3] <= b[3]


def joined(boxes: list[Box]) -> list[Box]:
    """Boxes of one line joined; a box inside another dropped (overlapping views find a line several times)."""
    out = sorted(set(boxes))
    changed = True
    while changed:
        changed = False
        merged: list[Box] = []
        for b in out:
            for i, m in enumerate(merged):
                if _same_line(b, m) or _inside(b, m) or _inside(m, b):
                    merged[i] = (min(b[0], m[0]), min(b[1], m[1]), max(b[2], m[2]), max(b[3], m[3]))
                    changed = True
                    break
            else:
                merged.append(b)
        out = sorted(merged)
    return out


def paint(pixels: np.ndarray, boxes: list[Box]) -> np.ndarray:
    """A copy of the frame with each box (end-exclusive) black in every channel."""
    out = np.array(pixels, dtype=np.float64, copy=True)
    for x0, y0, x1, y1 in boxes:
        out[y0:y1, x0:x1] = 0.0
    return out


def _strips(box: Box, shape: tuple[int, ...]) -> list[Box]:
    x0, y0, x1, y1 = box
    w = shape[1]
    reach = int(np.ceil(STRIP * (y1 - y0)))
    return [s for s in ((max(0, x0 - reach), y0, x0, y1), (x1, y0, min(w, x1 + reach), y1)) if s[2] - s[0] >= 4]


def _legible(reader: ocr.TextReader, masked: np.ndarray, strip: Box, confident: float = 0.0) -> bool:
    """Whether the recogniser reads LEGIBLE letters or digits in the strip, its contrast stretched (as a reader could),
    with a confidence of at least `confident`."""
    x0, y0, x1, y1 = strip
    text, score = reader.recognise_scored(proposals.stretched(proposals.gray8(masked[y0:y1, x0:x1])))
    return oriented.letters_or_digits(text) >= LEGIBLE and score >= confident


def _candidate_crop(box: Box, shape: tuple[int, ...]) -> Box:
    """A stroke-map candidate padded as a line for the recogniser (MARGIN of its height above and below, one height along)."""
    x0, y0, x1, y1 = box
    h, w = shape[:2]
    lh = y1 - y0
    py, px = max(2, int(np.ceil(MARGIN * lh))), max(4, lh)
    return (max(0, x0 - px), max(0, y0 - py), min(w, x1 + px), min(h, y1 + py))


def uncovered_legible(reader: ocr.TextReader, masked: np.ndarray, candidates: list[Box], boxes: list[Box]) -> list[Box]:
    """The stroke-map candidates NET_MIN_HEIGHT px or taller that no mask box contains and that are read as
    LEGIBLE letters or digits, with a confidence of NET_CONFIDENT or more, on the masked frame (with NET_HALF_TURN,
    as shown or turned half a turn)."""
    shape = np.shape(masked)
    uncovered = [c for c in candidates if c[3] - c[1] >= NET_MIN_HEIGHT and not any(_inside(c, b) for b in boxes)]
    return [c for c in uncovered if _legible(reader, masked, _candidate_crop(c, shape), NET_CONFIDENT)
            or (NET_HALF_TURN and half_turned_legible(reader, masked, _candidate_crop(c, shape)))]


# A row candidate of the net is read turned half a turn too, when read as shown it is not text (NET_HALF_TURN). Text at
# 180 degrees is a row upside down; the recogniser reads rows the right way up. A low-contrast 8 px "14.09.2006" upside
# down over an MR-like body, which the detector did not see and the row stroke map proposed exactly, was read as shown
# "1302006" at 0.47 (under NET_CONFIDENT) and turned "14.09.2006" at 0.84 (tuning seed 11578, 2026-12-06, session 21).
# Turned lines are read both ways already (`oriented.read_scored`). The floor is the net's own.
NET_HALF_TURN = True


def half_turned_legible(reader: ocr.TextReader, masked: np.ndarray, strip: Box) -> bool:
    """Whether the recogniser reads LEGIBLE letters or digits at NET_CONFIDENT or more in the strip turned half a turn."""
    x0, y0, x1, y1 = strip
    row = proposals.stretched(proposals.gray8(masked[y0:y1, x0:x1]))
    text, score = reader.recognise_scored(np.ascontiguousarray(row[::-1, ::-1]))
    return oriented.letters_or_digits(text) >= LEGIBLE and score >= NET_CONFIDENT


def _rechecked(reader: ocr.TextReader, pixels: np.ndarray, boxes: list[Box]) -> tuple[list[Box], int, bool, np.ndarray]:
    """The boxes with every legible strip beside them masked (up to PASSES passes): the boxes, the strips
    masked, whether a strip is still legible after the last pass, and the frame masked with the boxes."""
    shape = np.shape(pixels)
    extended = 0
    for _ in range(PASSES):
        masked = paint(pixels, boxes)
        hits = [s for b in boxes for s in _strips(b, shape) if _legible(reader, masked, s)]
        if not hits:
            return boxes, extended, False, masked
        extended += len(hits)
        boxes = joined(boxes + hits)
    masked = paint(pixels, boxes)
    return boxes, extended, any(_legible(reader, masked, s) for b in boxes for s in _strips(b, shape)), masked


# A stroke-map line (row or turned) partly under a mask is masked whole: the detector found part of a line,
# or some letters of a stack, and the stroke map shows where the line's strokes go on (measured: the last
# letters of stacks and of faint turned lines left out, the part left too short for the net to read as text).
CHAIN = 0.2  # of the line's pixels under a mask, at least, for the line to be masked whole
CHAIN_PASSES = 3  # a line masked whole (and grown) may reach the next one


def _share(covered: np.ndarray, line: oriented.Line) -> float:
    """The share of a turned line's own pixels (its quad) that the masks cover."""
    x0, y0, x1, y1 = line.box(covered.shape)
    own = oriented.coverage_mask((y1 - y0, x1 - x0), [tuple((x - x0, y - y0) for x, y in line.quad)])
    n = float(own.sum())
    return float((covered[y0:y1, x0:x1] & own).sum()) / n if n else 1.0


def chained(shape: tuple[int, ...], boxes: list[Box], quads: list[oriented.Quad], candidates: list[Box],
            turned: list[oriented.Line], faint: list[oriented.Line] | None = None, found: list[oriented.Line] | None = None) -> tuple[list[Box], list[oriented.Quad]]:  # fmt: skip
    """The mask boxes and quads with every stroke-map line that lies CHAIN or more, but not all, under them
    added whole (grown as a region is), for up to CHAIN_PASSES passes. No reading: the line touches text.
    A `faint` line (the band map's, `oriented.faint_candidates`) is added only where it goes on along one of the
    lines the detector `found` (`_goes_on`), and not grown along itself (its quad already reaches half a band past
    its ends): the band map also follows ridges of the anatomy, which a mask may cross but seldom runs along."""
    quads = list(quads)
    for _ in range(CHAIN_PASSES):
        covered = MaskPlan(boxes, 0, False, 0, tuple(quads)).covered(shape)
        rows = [c for c in candidates if c[2] > c[0] and c[3] > c[1] and CHAIN <= float(covered[c[1] : c[3], c[0] : c[2]].mean()) < 1.0]
        lines = [t for t in turned if CHAIN <= _share(covered, t) < 1.0]
        bands = [t for t in faint or [] if CHAIN <= _share(covered, t) < 1.0 and _goes_on(t, found or [])]
        if not rows and not lines and not bands:
            break
        boxes = joined(boxes + [grown(c, shape) for c in rows])
        quads += [_grown_turned(t) for t in lines] + [oriented.grown(t, along=FAINT_ALONG) for t in bands]
    return boxes, oriented.joined(quads)


# A faint line goes on along a line the detector found (`_goes_on`) when it runs in that line's direction (within
# FAINT_TURN degrees), its centre lies on that line's axis (within FAINT_OFF of its thickness) and it is FAINT_THIN to
# FAINT_THICK times as thick. Compared with the masks instead (grown, joined, and the faint lines chained before), the
# band map's coarse lines (88-100 px thick) went on along the mask of two 48-64 px lines, chained on one another and
# masked a whole 512 px frame.
FAINT_TURN = 12.0
FAINT_OFF = 0.5
FAINT_THIN = 0.5
FAINT_THICK = 1.0
FAINT_ALONG = 1.0  # of its thickness: a faint line chained is grown this much at each end (the band map finds a line's ends weaker)


def _goes_on(line: oriented.Line, pieces: list[oriented.Line]) -> bool:
    centre = np.asarray(line.quad, dtype=np.float64).mean(axis=0)
    for p in pieces:
        turn = abs(line.angle - p.angle) % 180.0
        if min(turn, 180.0 - turn) > FAINT_TURN or not FAINT_THIN * p.thickness <= line.thickness <= FAINT_THICK * p.thickness:
            continue
        rad = np.radians(p.angle)
        across = np.array([np.sin(rad), np.cos(rad)])  # unit vector across the piece's direction (y down)
        if abs(float((centre - np.asarray(p.quad, dtype=np.float64).mean(axis=0)) @ across)) <= FAINT_OFF * p.thickness:
            return True
    return False


def _uncovered_turned(reader: ocr.TextReader, masked: np.ndarray, lines: list[oriented.Line], covered: np.ndarray,
                      confident: float = NET_CONFIDENT, whole: np.ndarray | None = None, probe: bool = False,
                      pieces: list[float] | None = None, narrow: bool = False) -> list[oriented.Line]:  # fmt: skip
    """The turned stroke-map lines NET_MIN_HEIGHT px or thicker, less than 90% inside the masks, that the
    recogniser reads (upright, either way) as LEGIBLE letters or digits, with a confidence of `confident` or more,
    on the masked frame; with `whole` (the frame unmasked), a line partly under a mask is read there instead.
    With `probe` (and TURNED_PROBE), a line read as a few letters for sure is read again lengthened (`probed_legible`);
    with `pieces` (directions of text found, and SURE_PIECES), a line read as a few letters for sure in one of them counts
    too (`sure_piece`). With `narrow` (the band map's thin lines), a line read as text narrowed to its strokes
    (`oriented.narrow_legible`) counts too.
    A near-vertical line not so read is read as a stack too (`oriented.stack_read`, with `oriented.UNSTACK`); one read
    so counts as the line lengthened that it returns."""
    out = []
    for line in lines:
        if line.thickness < NET_MIN_HEIGHT:
            continue
        x0, y0, x1, y1 = line.box(covered.shape)
        own = oriented.coverage_mask((y1 - y0, x1 - x0), [tuple((x - x0, y - y0) for x, y in line.quad)])
        under = float((covered[y0:y1, x0:x1] & own).sum())
        if own.any() and under >= 0.9 * float(own.sum()):
            continue
        shown = whole if whole is not None and under > 0 else masked
        text, score = oriented.read_scored(reader, shown, line)
        if (oriented.letters_or_digits(text) >= oriented.LEGIBLE and score >= confident) or (
            probe and TURNED_PROBE and probed_legible(reader, shown, line, text, score)
        ):
            out.append(line)
        elif pieces and SURE_PIECES and sure_piece(line, text, score, pieces):
            out.append(line)
        elif narrow and oriented.narrow_legible(reader, shown, line):
            out.append(line)
        elif (stack := oriented.stack_read(reader, shown, line)) is not None:  # read as a stack (`oriented.UNSTACK`)
            out.append(stack)
    return out


# A turned stroke-map line read as a few letters for sure is read again lengthened as its mask would be (TURNED_PROBE,
# since 2026-12-07, session 23): where it is read as PROBE_LEAST letters or digits or more (but not as text) at PROBE_SURE
# or more, the line lengthened by its mask's growth (TURNED_ALONG thicknesses, TURNED_REACH px at least, at each end) is
# read, and counts as text at the net's own LEGIBLE and NET_CONFIDENT. A low-contrast 16-24 px line at 45 or 135 degrees
# over a CT- or radiograph-like body whose grey matches the line's over part of it was found by no detector region (the
# detector on the whole frame turned 45 or 135 degrees at 960 px found none of them either); the turned stroke maps held
# letter pieces of it, each read for sure but as 2-3 characters ("ID." and "057" of "ID: 655057", "AN" of "F. MCMILLAN",
# "KO" and "ORD" of "KOWALSKA^FORD": tuning seeds 13010, 13027, 13028), under the net's LEGIBLE, and the frame left with
# the line on it. Read along the length its mask would have, each was read whole ("ID.655057" 0.80-0.91, "FMCMILLAN"
# 0.77, "KOWALSKAFORD" 0.96-0.99), and the mask covers it. Only letter pieces read for sure are probed: each probe is two
# recogniser calls (no turned line of 200 text-free tuning frames was read as 2 letters at 0.8 or more; no CPU cost was
# measured beyond noise). Whether the frame is still legible after masking is read the same way. Out of sample (seeds
# 13501-13530, 45 and 135 degrees at 512 and 1,024 px, 2,202 lines; benchmarks/RESULTS.md 23a): 4 lines more masked
# whole, none fewer, no text-free frame masked more; at the other angles no line changed.
TURNED_PROBE = True
PROBE_LEAST = 2
PROBE_SURE = 0.9


def probed_legible(reader: ocr.TextReader, pixels: np.ndarray, line: oriented.Line, text: str, score: float) -> bool:
    """Whether a turned line read as `text` at `score` (not text by the net's rule) is read as text lengthened (see above)."""
    if oriented.letters_or_digits(text) < PROBE_LEAST or score < PROBE_SURE:
        return False
    longer = oriented.lengthened(line, max(TURNED_ALONG * line.thickness, TURNED_REACH))
    return oriented.legible(reader, pixels, longer, NET_CONFIDENT)


# A sure piece of a line is masked as a piece of text (SURE_PIECES, since 2026-12-07, session 28): a turned stroke-map
# line, or a band-map line the net reads (`faint_read`), that runs within FAINT_TURN degrees of a turned line or column
# the detector found and is read as PROBE_LEAST letters or digits or more at SURE_PIECE or more (but not as text, nor
# lengthened as text by TURNED_PROBE) is masked as a turned line the net found (grown TURNED_ALONG thicknesses at each
# end, TURNED_REACH px at least), with no reading more. Of the 14 lines missed on tuning seeds 18001-18006 (all low
# contrast, benchmarks/RESULTS.md 23a, session 28), 4 lay under such a piece, in the direction of text found: "ID"
# (0.84) and "KC" (0.82) on band lines, which no probe read, "AC" (0.87) and "AO" (0.82) on a band and a stroke line
# under TURNED_PROBE's 0.9. The rest of such a line does not read: "ID" of an 8 px "ID: 728749  DOB 05-JAN-2006" at 133
# degrees over CT, read lengthened by 20-120 px in 5 directions and 3 places across, reads "ID" or "D" or nothing; the
# line's own quad reads "IDS" (0.53). So the piece is masked for what it is (two letters read for sure along a line of
# text found), not read on. It costs no reading: the net has read the line already. Only on a frame with a turned line
# or column found, in its direction (a frame's block of lines runs one way): no text-free frame is masked more unless
# the detector found a turned line on it. On tuning seeds 18001-18010 (800 frames at 45 and 135 degrees, 512 and 1,024
# px, 1,442 lines, paired with the rule off) it changed 4 frames and masked 3 lines more, none fewer; pixels masked off
# the lines 11.00 -> 11.01% of a 512 px frame; on 60 text-free frames (seed 18021) it changed none. Out of sample (seeds
# 18501-18600, 2,400 frames at 45 and 135 degrees, 2,919 lines, paired): 5 lines more masked, none fewer, 7 frames
# changed, no text-free frame masked more (1 of 800 either way).
SURE_PIECES = True
SURE_PIECE = 0.8


def sure_piece(line: oriented.Line, text: str, score: float, directions: list[float]) -> bool:
    """Whether a stroke- or band-map line read as `text` at `score` (not text by the net's rule, nor by TURNED_PROBE's)
    is a sure piece of a line of text (see above): `directions` are the turned lines' and columns' found (degrees)."""
    if oriented.letters_or_digits(text) < PROBE_LEAST or score < SURE_PIECE:
        return False
    return any(min(abs(line.angle - d) % 180.0, 180.0 - abs(line.angle - d) % 180.0) <= FAINT_TURN for d in directions)


# A stack of upright letters (a label written one letter under another) comes back from the detector as
# letters found one by one, some missed, and as pieces of a vertical line; each grown alone leaves the
# letters between and beyond them uncovered (measured: 56 of 66 stacked lines masked whole at 512-2,048 px,
# the misses mostly a letter or two between or after found ones). So the detector's regions that lie one
# under another form a column (`columns`), masked whole and grown along it.
LETTER = 1.6  # a row region at most this many times as wide as tall is a letter (or two) that may belong to a stack
COLUMN_OFF = 15.0  # degrees from the vertical within which a turned region may belong to a column
COLUMN_GAP = 2.0  # of the smaller piece's size (its longer side, a letter's height): the most rows between two pieces
# of one column (a letter missed between two found ones leaves about 1.3-1.5 letter heights)
COLUMN_SHIFT = 0.35  # of the wider piece: the most the centres of two pieces of a column are apart along the row
# (the letters of a line at 45 degrees, found one by one, are a letter's width apart: not a column)
COLUMN_ALONG = 12.0  # of the column's width, up and down (a stack's letters are about as tall as they are wide): 4 left a
# stack's last letters out where they ran onto ground of their own grey, 8 the first 2 letters of a 12-letter low-contrast
# stack found as its last 8 (tuning seed 10006, 2026-12-06)
# COLUMN_LETTER: that growth counts in the letters' height, not the column's width. A narrow face's stack (Pillow's bitmap
# face: letters 6 px wide at an 18 px pitch) grown 12 widths reached 5 letters past its last found one and left its first
# letter out (a 64 px low-contrast "19-MAR-1996" found as its last 4 letters, tuning seed 10026, 2026-12-06).
COLUMN_LETTER = True
COLUMN_TALL = 2.0  # a piece taller than this many times its width counts as this: a letter is seldom taller


def columns(regions: list[ocr.TextRegion], shape: tuple[int, ...], least: int = 2) -> list[Box]:
    """Boxes of the columns the detector's regions form: letter-sized row regions and near-vertical turned ones,
    one under another (centres apart along the row by at most COLUMN_SHIFT of the wider piece, apart up and down by
    at most COLUMN_GAP of the smaller piece's size), `least` pieces or more; each grown by COLUMN_ALONG x its width up and down and by MARGIN
    of it (at least 2 px) to the sides."""
    pieces: list[Box] = []
    for r in regions:
        x0, y0, x1, y1 = r.box
        if oriented.is_oriented(r.quad):
            if abs(oriented.geometry(r.quad)[2] - 90.0) <= COLUMN_OFF:
                pieces.append(r.box)
        elif 0 < x1 - x0 <= LETTER * (y1 - y0):
            pieces.append(r.box)
    pieces.sort(key=lambda b: b[1])
    groups: list[list[Box]] = []
    for b in pieces:
        for g in groups:
            last = max(g, key=lambda c: c[3])
            size = min(max(b[2] - b[0], b[3] - b[1]), max(last[2] - last[0], last[3] - last[1]))  # a letter's height
            wide = max(b[2] - b[0], last[2] - last[0])
            shift = abs((b[0] + b[2]) - (last[0] + last[2])) / 2  # between the centres, along the row
            if shift <= COLUMN_SHIFT * wide and b[1] - last[3] <= COLUMN_GAP * max(size, 1):
                g.append(b)
                break
        else:
            groups.append([b])
    h, w = shape[:2]
    out = []
    for g in groups:
        if (_distinct(g) if COLUMN_DISTINCT else len(g)) < max(2, least):
            continue
        x0, y0 = min(b[0] for b in g), min(b[1] for b in g)
        x1, y1 = max(b[2] for b in g), max(b[3] for b in g)
        width = x1 - x0
        # A letter's height: the pieces' median, each counted at most COLUMN_TALL times its width (a longer piece is
        # part of a line, not a letter); no less than the column's width.
        letter = max(width, float(np.median([min(b[3] - b[1], COLUMN_TALL * (b[2] - b[0])) for b in g]))) if COLUMN_LETTER else width
        px, py = max(2, int(np.ceil(MARGIN * width))), int(np.ceil(COLUMN_ALONG * letter))
        out.append((max(0, x0 - px), max(0, y0 - py), min(w, x1 + px), min(h, y1 + py)))
    return out


# A column counts its pieces one letter each only where they are not one thing found twice (COLUMN_DISTINCT, since
# 2026-12-07, session 24): two pieces whose boxes share half the smaller one's area or more and whose heights are within
# COLUMN_SAME times are one piece. The multiscale detector returns a dark disc of anatomy from two views as two nested
# letter-sized regions (99 and 91 px: the same organ), and those two made a column that was grown 12 letters up and down:
# the whole height of a 1,024 px text-free CT-like frame masked, 30% of its pixels (tuning seed 14002). A stack's letters
# found one by one lie one under another, and a stroke-map line along a stack (COLUMN_PIECES) is much taller than the
# letter it overlaps: both still count. Off by default: out of sample (seeds 14501-14529, benchmarks/RESULTS.md 23a,
# session 24) it lost a line: a 24 px date at 270 degrees over a mammogram-like body came back as two nested
# near-vertical regions, whose column had masked it whole (0.70 of it without that column); at 1,024 px, where its
# tuning frame was, no text-free frame was masked less. `python -m benchmarks.deid_ocr --column-distinct` measures it on.
COLUMN_DISTINCT = False
COLUMN_SAME = 1.5


def _distinct(pieces: list[Box]) -> int:
    """How many of a column's pieces are not the same piece found twice (see COLUMN_DISTINCT above)."""
    counted: list[Box] = []
    for b in pieces:
        area = (b[2] - b[0]) * (b[3] - b[1])
        for c in counted:
            share = max(0, min(b[2], c[2]) - max(b[0], c[0])) * max(0, min(b[3], c[3]) - max(b[1], c[1]))
            tall = max(b[3] - b[1], c[3] - c[1]) / max(1, min(b[3] - b[1], c[3] - c[1]))
            if share >= 0.5 * min(area, (c[2] - c[0]) * (c[3] - c[1])) and tall <= COLUMN_SAME:
                break
        else:
            counted.append(b)
    return len(counted)


# A column's pieces include the turned stroke maps' near-vertical lines (COLUMN_PIECES), when the column holds one of the
# detector's regions at least. A low-contrast stack of small letters comes back from the detector as one letter, and from
# the stroke map turned a quarter as two or three short vertical lines under it (its letters that stood clear of the
# ground); a column needs two pieces, so the one letter was grown alone along the row and the 12 px stack "06/11/1968"
# kept 9 of its 10 characters (tuning seed 11033 of 2026-12-06, session 20, over a radiograph-like frame). The stroke-map
# lines never make a column alone: a frame where the detector keeps nothing is masked as before.
COLUMN_PIECES = True


def _stacked(regions: list[ocr.TextRegion], turned: list[oriented.Line], shape: tuple[int, ...]) -> list[Box]:
    """The columns of `regions` (`columns`), with COLUMN_PIECES the near-vertical `turned` stroke-map lines as pieces too,
    a column kept only when one of `regions` lies in it."""
    if not COLUMN_PIECES or not regions:
        return columns(regions, shape)
    vertical = [ocr.TextRegion(t.box(shape), 0.0, quad=t.quad) for t in turned
                if abs(t.angle - 90.0) <= COLUMN_OFF and t.thickness >= NET_MIN_HEIGHT]  # fmt: skip
    own = [r.box for r in regions]
    return [c for c in columns(regions + vertical, shape) if any(_inside(b, c) for b in own)]


def _rect(box: Box) -> oriented.Quad:
    x0, y0, x1, y1 = box
    return ((float(x0), float(y0)), (float(x1 - 1), float(y0)), (float(x1 - 1), float(y1 - 1)), (float(x0), float(y1 - 1)))


# The band map's lines (`oriented.faint_candidates`, computed only on a frame where the detector found text) FAINT_NET_THICK px
# thick or thinner that run within FAINT_TURN degrees of a turned line or a column the detector found, read by the net as the
# turned stroke-map lines are (`faint_read`). A faint small line at 45 or 135 degrees or stacked, whose 1 px strokes no stroke
# map joins and the detector does not see, was the screen's commonest miss; the band map lies on most of them and the
# recogniser reads them upright. Only in the direction of text found: the lines of a frame's annotation run one way (a
# console writes its block so, a film is turned whole), and each line read costs two recogniser calls (about 0.04 s).
FAINT_NET = True
FAINT_NET_THICK = 24.0
# The band map's lines FAINT_LOW_THICK px thick or thinner (the full-size and half-size maps: 8-12 px text) count at the
# recogniser's confidence FAINT_CONFIDENT or more, not NET_CONFIDENT. An 8 px line of 1 px strokes at 0.15 of full scale is
# read with every character but at 0.34-0.45 ("to pactor" for "MRN 84405154 ...", "116v42409" for "MRN 24053334": tuning
# seeds 8001, 8003). Of the 1,614 band lines of 70 text-free 512-1,024 px frames, all read, those read as 4 or more
# letters or digits came at 0.10-0.44; here they are read only in the direction of text found, on frames with text found.
FAINT_LOW_THICK = 12.0
# A net line partly under a mask is read on the frame unmasked (the check of the exported frame after masking reads the
# masked one): a turned mask grown along one line of a block covered three quarters of the band line of the next, which
# then read as nothing and kept its last letters (tuning seed 8002, an 8 px line at 135 degrees at 1,024 px).
NET_WHOLE = True
FAINT_CONFIDENT = 0.3


def faint_read(faint: list[oriented.Line], directions: list[float]) -> list[oriented.Line]:
    """The band map's lines the net reads: FAINT_NET_THICK px thick or thinner, within FAINT_TURN degrees of one of
    `directions` (degrees, the turned lines and columns found)."""

    def near(angle: float) -> bool:
        return any(min(abs(angle - d) % 180.0, 180.0 - abs(angle - d) % 180.0) <= FAINT_TURN for d in directions)

    return [f for f in faint if f.thickness <= FAINT_NET_THICK and near(f.angle)]


# The band map's coarse lines along the row read by the net too (BAND_ROWS, since 2026-12-07, session 22), on a frame where
# the detector found a row: those within FAINT_TURN degrees of the row, BAND_ROW_THICK px thick or thinner (the maps
# reduced 2 and 4 times: 12-64 px text), at NET_CONFIDENT. `faint_read` reads band lines only in the direction of a turned
# line or column found, and the row's own faint map (`proposals.faint_lines`) is 5 px high, for 8 px text; a low-contrast
# row of 12-64 px found in part over ground of about its grey (a 64 px "DENT, SEAN" over a CT-like body masked to 0.29 of
# its glyph pixels, a 12 px record number to 0.72) was left with no reader of the rest, though the half-scale band map lay
# along it and the recogniser read it upright at 0.88-1.0 (tuning seeds 12001-12010: 4 of the 10 misses at 512 px). The
# half-scale lines are read first, the quarter-scale ones after, where still uncovered (a quarter-scale line is as thick
# as 64 px text and its mask as long). Only on frames with text found (the band map is computed only there), so it masks
# no frame more; what it costs is pixels masked off the lines, measured with the run.
BAND_ROWS = True
BAND_ROW_THICK = 56.0


def band_rows(faint: list[oriented.Line], rows: list[Box], read: list[oriented.Line]) -> tuple[list[oriented.Line], list[oriented.Line]]:
    """The band map's lines the net reads along the row (BAND_ROWS), not among those `faint_read` chose (`read`): none
    without a row region found; else those within FAINT_TURN degrees of the row and thicker than FAINT_NET_THICK, as
    (FAINT_NET_THICK px thick or thinner, thicker up to BAND_ROW_THICK)."""
    if not rows:
        return [], []
    along = [f for f in faint if min(f.angle, 180.0 - f.angle) <= FAINT_TURN and f.thickness <= BAND_ROW_THICK and f not in read]
    return [f for f in along if f.thickness <= FAINT_NET_THICK], [f for f in along if f.thickness > FAINT_NET_THICK]


def band_row_hits(reader: ocr.TextReader, masked: np.ndarray, lines: list[oriented.Line], covered: np.ndarray,
                  confident: float = NET_CONFIDENT, whole: np.ndarray | None = None) -> list[oriented.Line]:  # fmt: skip
    """`_uncovered_turned` on the band map's lines along the row (`band_rows`)."""
    return _uncovered_turned(reader, masked, lines, covered, confident, whole)


# Lines that run off the row, and columns, followed along their axis before they are grown (`oriented.followed`):
# the detector often finds a faint turned line in part.
FOLLOW = True
# Row regions too (FOLLOW_ROWS, since 2026-12-06, evening), those FOLLOW_WIDE times as wide as tall or more (a
# letter-sized one may be a stack's letter, whose axis is not the row's). A faint row found in part was grown 3 heights
# along and its last letters, over ground of about their grey, left out: an 8 px "DENT, ARTHURINA  08/10/1971" at 0.15 of
# full scale over an MR-like body found as its first two thirds (tuning seed 10029). Following only extends a mask
# that exists: a frame without one keeps every pixel.
FOLLOW_ROWS = True
FOLLOW_WIDE = 2.0


def _a_line(box: Box) -> bool:
    return box[2] - box[0] >= FOLLOW_WIDE * (box[3] - box[1])


def plan(reader: ocr.TextReader, pixels: np.ndarray, regions: list[ocr.TextRegion], candidates: list[Box] | None = None,
         turned: list[oriented.Line] | None = None, faint: list[oriented.Line] | None = None) -> MaskPlan:  # fmt: skip
    """The mask boxes of a frame's text regions, extended where the recogniser still reads text beside them;
    with `candidates` (the stroke map's lines), those outside every box read as text are masked too, and
    the frame is `readable` when one is still read after that. A region that runs off the row is masked
    as its quad grown along the line (`oriented.grown`); `turned` (the turned stroke maps' lines) are
    netted the same way, read upright. `faint` lines (the band map's, turned and coarse: `oriented.faint_candidates`)
    are masked whole where they go on along a mask (`chained`); the net does not read them (it found no more, at twice the CPU)."""
    shape = np.shape(pixels)
    turned_found = [oriented.line_of(r.quad) for r in regions if oriented.is_oriented(r.quad)]
    stacks = [oriented.line_of(_rect(c)) for c in _stacked(regions, turned or [], shape)]
    if FOLLOW and (turned_found or stacks):
        gray = proposals.gray8(pixels)  # once: each line's strip is read from it
        turned_found, stacks = ([oriented.followed(gray, line) for line in lines] for lines in (turned_found, stacks))
    quads = [_grown_turned(line) for line in turned_found] + [line.quad for line in stacks]
    rows = [r for r in regions if not oriented.is_oriented(r.quad)]
    found = [oriented.line_of(r.quad if oriented.is_oriented(r.quad) else _rect(r.box)) for r in regions]
    found += [oriented.line_of(_rect(c)) for c in columns(regions, shape)]
    row_boxes = [r.box for r in rows]
    if FOLLOW_ROWS and any(_a_line(b) for b in row_boxes):
        gray = proposals.gray8(pixels)
        row_boxes = [oriented.followed(gray, oriented.line_of(_rect(b))).box(shape) if _a_line(b) else b for b in row_boxes]
    boxes, quads = chained(shape, joined([grown(b, shape) for b in row_boxes]), quads, candidates or [], turned or [], faint, found)
    base = oriented.paint(pixels, quads) if quads else pixels
    boxes, extended, readable, masked = _rechecked(reader, base, boxes)
    netted = 0
    if not readable and candidates:
        hits = uncovered_legible(reader, masked, candidates, boxes)
        if hits:
            netted = len(hits)
            boxes, more, readable, masked = _rechecked(reader, base, joined(boxes + [grown(c, shape) for c in hits]))
            extended += more
            readable = readable or bool(uncovered_legible(reader, masked, candidates, boxes))
    # The turned stroke maps' lines, then the band map's thin ones (`faint_read`), read by the net the same way.
    directions = [line.angle for line in turned_found + stacks]
    read = faint_read(faint or [], directions) if FAINT_NET else []
    thin = [f for f in read if f.thickness <= FAINT_LOW_THICK]
    thick = [f for f in read if f.thickness > FAINT_LOW_THICK]
    near, far = band_rows(faint or [], [r.box for r in rows], read) if BAND_ROWS else ([], [])
    # (lines, confidence floor, band rows, probed, directions for sure pieces, read narrowed): the band map's thin
    # lines are read narrowed to their strokes too (`oriented.NARROW`)
    passes = ((turned or [], NET_CONFIDENT, False, True, directions, False), (thin, FAINT_CONFIDENT, False, False, directions, True),
              (thick, NET_CONFIDENT, False, False, directions, False), (near, NET_CONFIDENT, True, False, None, False),
              (far, NET_CONFIDENT, True, False, None, False))  # fmt: skip
    for net_lines, floor, banded, probe, pieces, narrow in passes:
        if readable or not net_lines:
            continue
        covered = MaskPlan(boxes, 0, False, 0, tuple(quads)).covered(shape)
        # (band_row_hits: the same reading, named apart so that benchmarks/deid_ocr.py --paired-rule band-rows sees it fire)
        whole = pixels if NET_WHOLE else None
        hits_t = band_row_hits(reader, masked, net_lines, covered, floor, whole) if banded else _uncovered_turned(reader, masked, net_lines, covered, floor, whole, probe, pieces, narrow)
        if hits_t:
            netted += len(hits_t)
            quads += [_grown_turned(line) for line in hits_t]
            result = MaskPlan(boxes, extended, False, netted, tuple(quads))
            masked = result.paint(pixels)
            readable = bool(_uncovered_turned(reader, masked, net_lines, result.covered(shape), floor, probe=probe, narrow=narrow))
    return MaskPlan(boxes, extended, readable, netted, tuple(oriented.joined(quads)))
