"""Burned-in text on every frame, whatever its header says: found by OCR, masked or refused.

A header flag cannot be the decision: BurnedInAnnotation is a Type 3 attribute, often
absent, and a plain PNG states nothing at all. So every frame that can become an item is
read by the text detector (`ocr.TextReader`) before any item, reviewer or export sees its
pixels, and the recipe's `privacy.text` decides:

- `mask` (the default): each detected region, grown by a margin and along its line
  (`linemask`), is filled with black; the recogniser then reads beside each mask and a
  legible strip is masked too; a frame still legible after that is refused;
- `refuse`: a frame with any detected text is left out (counted in the build report).

Before the detector reads a frame, the region rules (`regions`: known annotation zones by
modality, manufacturer and model) blank their zones, a second line whatever the detector
sees; the manifest lists those zones beside the detector's regions.

What the header says (BurnedInAnnotation YES / NO / absent) is recorded beside what the
detector found, as information: the header screen of `safeguards` still runs first
(ultrasound crops, the recipe's boxes on flagged frames), and the detector then reads
what is left. The manifest names every masked region: the frame (its dataset and its
non-identifying reference, the exported image it became), the frame's size and each box
in the frame's pixels. Recognised text is never written anywhere.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medrcube.construction.observation import SourceImage
from medrcube.construction.privacy import linemask, multiscale, ocr, oriented, proposals
from medrcube.construction.privacy.regions import NO_RULES, RegionTable

# A detected region shaped like a blob, not a line, is taken for text only when the
# recogniser reads at least 3 letters or digits in it: the detector is scale-sensitive,
# and a body outline or a pectoral muscle can come back as one giant "O". A blob is taller
# than TALL of the frame's height, or taller than BLOB of it and either less than twice as
# wide as tall (a line of 3 characters or more is wider than that) or taller than a stroke-map
# line (`proposals.MAX_LINE`, 96 px: text that large is legible): wide bands of anatomy and
# a CT table came back as regions 112-240 px tall, read as one character or none, and masked
# 8 of 200 text-free 512 and 1,024 px frames (measured 2026-12-05, seeds 4343 and 4345).
TALL = 0.35
BLOB = 0.1


def _blob(region: ocr.TextRegion, shape: tuple[int, ...]) -> bool:
    """A region shaped like a blob: by its box along the row, or, for a line that runs off the row
    (`oriented`), by its own length and thickness (thicker than BLOB of the frame's short side, or
    less than twice as long as thick)."""
    if oriented.is_oriented(region.quad):
        length, thickness, _ = oriented.geometry(region.quad)
        return thickness > BLOB * min(shape[:2]) or length < 2 * thickness
    frame_height = shape[0]
    w, h = region.box[2] - region.box[0], region.box[3] - region.box[1]
    return h > TALL * frame_height or (h > BLOB * frame_height and (w < 2 * h or h > proposals.MAX_LINE))


def text_regions(reader: ocr.TextReader, pixels: np.ndarray, turned: bool | None = None) -> tuple[list[ocr.TextRegion], int]:
    """The regions of a frame taken for text, and how many blobs were not (anatomy, read as < 3 characters).

    The frame is read as a pyramid of views (`multiscale`: the detector's native scale,
    and crops where the frame's strokes look like lines, read enlarged); their regions
    are united.
    """
    turned = multiscale.TURNED if turned is None else turned
    detected = found = multiscale.detect(reader, pixels, turned)
    lone = turned and oriented.LONE
    if not found and lone:  # nothing found: the band map's thin lines, read (`oriented.lone_lines`)
        found = _lone_regions(reader, pixels)
    if not turned:  # rows only (as before turned lines were screened): every region judged and masked by its box
        found = [ocr.TextRegion(r.box, r.score) for r in found]
    keep = _judged(reader, pixels, found)
    if turned and TURNED_PIECES:
        pieces = turned_pieces(reader, pixels, detected, keep)
        keep, found = keep + pieces, found + pieces
    if turned and SHORT_REACH:
        for i, region in short_reached(reader, pixels, keep):
            keep[i] = region
    if lone and LONE_DROPPED and detected and not keep:  # found, all dropped: read as where nothing was found
        alone = lone_dropped(reader, pixels)
        keep, found = keep + _judged(reader, pixels, alone), found + alone
    return keep, len(found) - len(keep)


# A frame whose detector regions were all dropped (blobs, lone letters, short rows) is read as one where the detector
# found nothing (LONE_DROPPED, session 29): the band map's thin lines ranked and the first read (`oriented.lone_lines`).
# An 8 px low-contrast date at 135 degrees over an MR-like body (tuning seed 18004, frame 26 at 512 px) came back as two
# blob regions off the line, both dropped, so neither the lone reading (only where nothing was found) nor the band map
# (only along regions kept) ran, yet the full-scale band line along the whole date reads "10380002" at 0.63. Session 26
# tried this with the band map made for the net too (one frame in 203 changed, no line); this reads only. Measured on
# tuning seeds 19001-19006 (480 frames, 45 and 135 degrees, 512 and 1,024 px; benchmarks/RESULTS.md 23a, session 29): one
# line more masked, none fewer; no text-free frame masked (480, seeds 19021-19028). Its cost: it ran on 13 of 100 frames
# of seed 19031, 0.43 s a run, 0.056 s a frame on average. Off: out of sample (seeds 19501-19550, 1,200 frames) it masked
# one line more and one text-free frame more (a CT-like 512 px frame whose two regions were dropped: a near-vertical band
# line over the body read as text, seed 19550). `python -m benchmarks.deid_ocr --lone-dropped` measures it on.
LONE_DROPPED = False


def lone_dropped(reader: ocr.TextReader, pixels: np.ndarray) -> list[ocr.TextRegion]:
    """The lone reading's lines (`oriented.lone_lines`) as regions, on a frame whose detector regions were all dropped."""
    return _lone_regions(reader, pixels)


# A short piece of a turned line (a detector quad that runs off the row but is too short to count as a line:
# `oriented.is_oriented`) is read lengthened along its own axis as a turned line's mask would be (TURNED_PIECES, since
# 2026-12-07, session 26); read as text there, it is kept as a turned line. Large low-contrast lines at 45 and 135
# degrees (32-64 px over CT, MR, radiographs) were half of session 25's misses, masked nowhere: the detector, on the frame
# at any scale, turned upright or contrast-stretched, does not find them as lines, but comes back with a piece of 2-3
# letters, a quad along the line about as long as thick, which the blob rule drops (read "A", "MR", "28") or keeps as a
# row and grows along the row (read "CIA"). Read along their axis lengthened TURNED_ALONG thicknesses (and TURNED_REACH
# px at least) at each end, two such pieces read "PD20825111" (0.77) and "KOWALSKA TRICIA" (0.95), the lines they came
# from (tuning seeds 16003 and 16010, benchmarks/RESULTS.md 23a). At the net's floor (`linemask.NET_CONFIDENT`) and its
# LEGIBLE letters or digits. Diagonal pieces only (OFF_AXIS to 90 - OFF_AXIS degrees off the row), none under a line kept:
# as first built it read near-vertical pieces too, a stack's letters each read lengthened and kept, and a 512 px stack
# frame took 8.4 s against 0.97 s without the rule; near-vertical lines are found well
# (stacks by `linemask.columns` and `oriented.UNSTACK`). Its cost so cut, the screen of 20 frames of 512 px (tuning seed
# 16901, off and on in turn twice, least of two a frame): 0.34 s a frame with text and 0.27-0.28 s without (medians), as
# without it.
TURNED_PIECES = True
PIECE_TURNS = (-6.0, -3.0, 3.0, 6.0)  # degrees: the other directions tried about a piece read as text
PIECE_SHIFTS = (-0.3, 0.3)  # of its thickness: the other places across it tried


def turned_pieces(reader: ocr.TextReader, pixels: np.ndarray, regions: list[ocr.TextRegion], keep: list[ocr.TextRegion]) -> list[ocr.TextRegion]:
    """The detector's regions whose quads run off the row (not kept as turned lines) that read as text lengthened along
    their axis (see above), each as a turned line: its quad lengthened until it is shaped like one (`oriented.is_oriented`)."""
    kept = [r for r in keep if oriented.is_oriented(r.quad)]
    boxes = {r.box for r in kept}
    covered = oriented.coverage_mask(pixels.shape, [oriented.grown(oriented.line_of(r.quad)) for r in kept]) if kept else None
    out = []
    for r in regions:
        if len(r.quad) == 0 or r.box in boxes:
            continue
        length, thickness, angle = oriented.geometry(r.quad)
        if not oriented.OFF_AXIS < min(angle, 180.0 - angle) < 90.0 - oriented.OFF_AXIS:
            continue  # a diagonal: near-vertical pieces are a stack's letters (columns, `oriented.UNSTACK`), and cost
        if covered is not None and float(covered[oriented.coverage_mask(covered.shape, [r.quad])].mean()) >= 0.5:
            continue  # a piece of a line kept (and masked) already
        piece = oriented.line_of(r.quad)
        longer = oriented.lengthened(piece, max(linemask.TURNED_ALONG * thickness, linemask.TURNED_REACH))
        text, score = oriented.read_scored(reader, pixels, longer)
        if oriented.letters_or_digits(text) >= oriented.LEGIBLE and score >= linemask.NET_CONFIDENT:
            line = aligned(reader, pixels, piece, longer, (oriented.letters_or_digits(text), score))[0]
            while not oriented.is_oriented(line.quad):  # (a detector quad is no exact rectangle: lengthened it is one)
                line = oriented.lengthened(line, 0.25 * max(thickness, 1.0))
            out.append(ocr.TextRegion(line.box(pixels.shape), r.score, quad=line.quad))
            mask = oriented.coverage_mask(pixels.shape, [oriented.grown(line, linemask.TURNED_ALONG)])  # its other pieces are read no more
            covered = mask if covered is None else covered | mask
    return out


def aligned(reader: ocr.TextReader, pixels: np.ndarray, piece: oriented.Line, longer: oriented.Line, read: tuple[int, float]) -> tuple[oriented.Line, int, float]:
    """`piece` turned (PIECE_TURNS) and moved across itself (PIECE_SHIFTS) as `longer`, the piece lengthened, reads the
    most letters or digits (then surest), with what it reads there (letters or digits, confidence); `read` is what
    `longer` itself reads. A piece's quad is a few degrees off its line's direction, and a mask grown 8 thicknesses along
    it drifts off the line's far end: the direction that reads the most is kept. And its quad lies a little off the
    line's axis (a mask 1.7 thicknesses wide left a 64 px line's ends out): then the place across it that reads the most."""
    best = (read[0], read[1], 0.0)
    for turn in PIECE_TURNS:
        t, c = oriented.read_scored(reader, pixels, oriented.turned_by(longer, turn))
        best = max(best, (oriented.letters_or_digits(t), c, turn))
    turn = best[2]
    longer, line = (oriented.turned_by(longer, turn), oriented.turned_by(piece, turn)) if turn else (longer, piece)
    best = (best[0], best[1], 0.0)
    for by in PIECE_SHIFTS:
        t, c = oriented.read_scored(reader, pixels, oriented.shifted(longer, by * piece.thickness))
        best = max(best, (oriented.letters_or_digits(t), c, by))
    return (oriented.shifted(line, best[2] * piece.thickness) if best[2] else line), best[0], best[1]


# A short diagonal turned line kept (shorter than SHORT_PIECE thicknesses: a piece of its line, 2-3 letters) is read on
# past its ends (SHORT_REACH, since 2026-12-07, session 27): in the direction and place across that read the most
# lengthened as its mask would be (`aligned`, as TURNED_PIECES does), then SHORT_AHEAD thicknesses past one end and past
# the other; where one of those reads more letters or digits (LEGIBLE or more, at the net's floor
# `linemask.NET_CONFIDENT`), the piece is extended there (so that its mask, grown TURNED_ALONG thicknesses beyond, reaches
# SHORT_AHEAD past that end) in its best direction. A long low-contrast line at 45 or 135 degrees found as one piece at its
# start was masked TURNED_ALONG (8) thicknesses about the piece and its far end left out, and a piece a few degrees off the
# line drifts off it: 5 of the 21 misses of tuning seeds 17001-17008 (benchmarks/RESULTS.md 23a, session 27) were lines of
# 12-16 px masked in part about a short piece (0.58-0.88 of their glyph pixels); the 16 px "PID 71599732  DOB 1994-06-22"
# over CT (seed 17007), kept as a 33 x 20 px piece at its start, read "PID7159022000199400" lengthened one way and was
# masked whole. On tuning seeds 17001-17010 (800 frames at 45 and 135 degrees, 512 and 1,024 px, paired with the rule off)
# it changed 19 frames and one line, masked only with it, none only without. Each such piece costs 9 reads (two recogniser
# calls each; pieces under another line kept are not read): of 10 frames of 512 px with text at 45 and 135 degrees (seed
# 17901, off and on in turn twice, least of two), one took 0.25 -> 1.14 s and the others as without it (mean 0.70 -> 0.78
# s); 6 of 1,024 px and 16 text-free frames as without it. A cheap check first (the piece read past its ends as it lies,
# aligned only where its line reads on there: 3 reads) lost the line above: not kept.
# Off: out of sample (seeds 17501-17571, 1,704 frames at 45 and 135 degrees, 2,044 lines, paired) it changed 15 frames
# and no line, and it costs CPU where it reads; `python -m benchmarks.deid_ocr --short-reach` measures it on.
SHORT_REACH = False
SHORT_PIECE = 3.0  # thicknesses: a turned line kept that is shorter than this is a piece of its line
SHORT_AHEAD = 16.0  # thicknesses: how far past one end of such a piece its line is read


def short_reached(reader: ocr.TextReader, pixels: np.ndarray, keep: list[ocr.TextRegion]) -> list[tuple[int, ocr.TextRegion]]:
    """The short diagonal turned lines of `keep` (shorter than SHORT_PIECE thicknesses, less than half under another
    line kept) whose line reads on past one end (see above), each as (its place in `keep`, the line extended there)."""
    lines = [r for r in keep if oriented.is_oriented(r.quad)]
    out = []
    for i, r in enumerate(keep):
        length, thickness, angle = oriented.geometry(r.quad) if any(r is q for q in lines) else (0.0, 0.0, 0.0)
        if length == 0.0 or length >= SHORT_PIECE * thickness or not oriented.OFF_AXIS < min(angle, 180.0 - angle) < 90.0 - oriented.OFF_AXIS:
            continue
        others = [oriented.grown(oriented.line_of(q.quad)) for q in lines if q is not r]
        if others and float(oriented.coverage_mask(pixels.shape, others)[oriented.coverage_mask(pixels.shape, [r.quad])].mean()) >= 0.5:
            continue
        piece = oriented.line_of(r.quad)
        reach = max(linemask.TURNED_ALONG * thickness, linemask.TURNED_REACH)
        text, score = oriented.read_scored(reader, pixels, oriented.lengthened(piece, reach))
        line, letters, sure = aligned(reader, pixels, piece, oriented.lengthened(piece, reach), (oriented.letters_or_digits(text), score))
        best = (letters if sure >= linemask.NET_CONFIDENT else 0, 0.0, 0.0)
        for behind, ahead in ((SHORT_AHEAD * thickness, thickness), (thickness, SHORT_AHEAD * thickness)):
            t, c = oriented.read_scored(reader, pixels, oriented.extended(line, behind, ahead))
            if c >= linemask.NET_CONFIDENT and oriented.letters_or_digits(t) >= oriented.LEGIBLE and oriented.letters_or_digits(t) > best[0]:  # more read that way
                best = (oriented.letters_or_digits(t), max(0.0, behind - reach), max(0.0, ahead - reach))
        if best[1] or best[2]:  # moved or turned only where its line reads on past one end
            line = oriented.extended(line, best[1], best[2])
            out.append((i, ocr.TextRegion(line.box(pixels.shape), r.score, quad=line.quad)))
    return out


def _lone_regions(reader: ocr.TextReader, pixels: np.ndarray) -> list[ocr.TextRegion]:
    return [ocr.TextRegion(line.box(pixels.shape), 1.0, quad=line.quad) for line in oriented.lone_lines(reader, pixels)]


def _judged(reader: ocr.TextReader, pixels: np.ndarray, found: list[ocr.TextRegion]) -> list[ocr.TextRegion]:
    """The regions of `found` taken for text: blobs read as 3 letters or digits, lone letters and short rows read
    (`_lone_letters_read`, `short_dropped`), and with STACKED_DROPPED the dropped ones that stand in a stack."""
    shape = pixels.shape
    blobs = [r for r in found if _blob(r, shape)]
    keep = [r for r in found if not _blob(r, shape)]
    for r in multiscale.read(reader, pixels, blobs):
        if oriented.letters_or_digits(r.text) >= 3:
            keep.append(ocr.TextRegion(r.box, r.score, quad=r.quad))
    keep = _lone_letters_read(reader, pixels, keep)
    if SHORT_READ:
        dropped = short_dropped(reader, pixels, keep)
        keep = [r for r in keep if not any(r is d for d in dropped)]
    if STACKED_DROPPED:
        keep += _stacked_dropped(found, keep, shape)
    return keep


# Regions the blob and lone-letter rules dropped are kept when STACKED_LEAST or more of them, each no longer than
# `proposals.MAX_LINE` (a letter, not a band of anatomy), lie one under another as a stack's letters do
# (`linemask.columns`). A stack of upright letters comes back from the detector letter by letter, each piece a short
# square quad that the blob rule reads as one character ("H", "6", "6", "6" for the 64 px low-contrast stack
# "19-MAR-1996": tuning seed 10026, 2026-12-06), and dropped, each alone, the whole stack was exported. Two pieces
# are what a column of the regions kept needs (`_lone_letters_read`); a disc of anatomy read as a letter beside
# another is that too, three in a row with a letter's gaps is not what a body shows.
# Off: on the demo archive's text-free frames of the build tests (tests/construction/test_build_burned_text.py) it
# kept a column of dropped regions over anatomy, a frame masked (and, refusing, left out) with no text on it; on the
# synthetic frames it masked 4 tuning misses and changed no line out of sample (benchmarks/RESULTS.md 23a,
# 2026-12-06, seeds 10701-10720). `python -m benchmarks.deid_ocr --stacked-dropped` measures it on.
STACKED_DROPPED = False
STACKED_LEAST = 3


def _stacked_dropped(found: list[ocr.TextRegion], keep: list[ocr.TextRegion], shape: tuple[int, ...]) -> list[ocr.TextRegion]:
    """The dropped regions (of `found`, not in `keep`) that lie in a column of STACKED_LEAST or more of them (see above)."""
    kept = {r.box for r in keep}
    dropped = [r for r in found if r.box not in kept and max(r.box[2] - r.box[0], r.box[3] - r.box[1]) <= proposals.MAX_LINE]
    stacked = linemask.columns(dropped, shape, least=STACKED_LEAST) if len(dropped) >= STACKED_LEAST else []
    return [r for r in dropped if any(_inside(r.box, c) for c in stacked)]


def _inside(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return b[0] <= a[0] and b[1] <= a[1] and a[2] <= b[2] and a[3] <= b[3]


# A region no wider than LONE_WIDE times its height, not in a column of such regions (`linemask.columns`),
# is one glyph or a disc of anatomy: an organ in a crop enlarged and contrast-stretched comes back as a
# letter-sized region (6 of 40 text-free 1,024 px CT and MR frames were masked for one, read as "V", "D",
# "C", "7", "2" at confidences 0.14-0.86; measured 2026-12-05, seed 4345). It is kept only when the
# recogniser reads 2 letters or digits in it, or one at a confidence of LONE_CONFIDENT or more.
LONE_WIDE = 1.5
LONE_CONFIDENT = 0.9


def _lone_letters_read(reader: ocr.TextReader, pixels: np.ndarray, regions: list[ocr.TextRegion]) -> list[ocr.TextRegion]:
    def square(r: ocr.TextRegion) -> bool:
        w, h = r.box[2] - r.box[0], r.box[3] - r.box[1]
        return not oriented.is_oriented(r.quad) and w <= LONE_WIDE * h

    squares = [r for r in regions if square(r)]
    if not squares:
        return regions
    stacked = linemask.columns(regions, pixels.shape)
    out = [r for r in regions if not square(r)]
    for r in squares:
        if any(c[0] <= r.box[0] and c[1] <= r.box[1] and r.box[2] <= c[2] and r.box[3] <= c[3] for c in stacked):
            out.append(r)
            continue
        text, score = reader.recognise_scored(multiscale.crop(pixels, r.box))
        if oriented.letters_or_digits(text) >= 2 or (oriented.letters_or_digits(text) == 1 and score >= LONE_CONFIDENT):
            out.append(r)
    return out


# A row region more than LONE_WIDE and at most SHORT_WIDE times as wide as tall, in no column, is read as a lone letter
# is (SHORT_READ, since 2026-12-07, session 24): kept only when the recogniser reads 2 letters or digits in it, or one at
# LONE_CONFIDENT or more. The top of a radiograph's dome (a bright arc over a dark field) came back from the detector as
# a row region 2.2-2.8 times as wide as tall (21-32 px high), read "2", "1" and "D" at 0.20-0.39, and masked grown along
# the row: 3 of 6 text-free frames masked in 600 of tuning seeds 14001-14010 (512 and 1,024 px). A line of 3
# characters or more is wider than SHORT_WIDE times its height in every face of the benchmark; a 2-character piece of
# a line is read as its 2 characters. Out of sample (seeds 14501-14529, paired with `linemask.COLUMN_DISTINCT` on the
# same frames; benchmarks/RESULTS.md 23a, session 24): text-free frames masked 23 -> 10 of 2,320 (17 -> 4 at 512 px), no
# line lost to it (the one line lost was the column rule's). `python -m benchmarks.deid_ocr --no-short-read` measures
# without it.
SHORT_READ = True
SHORT_WIDE = 3.0


def short_dropped(reader: ocr.TextReader, pixels: np.ndarray, regions: list[ocr.TextRegion]) -> list[ocr.TextRegion]:
    """The row regions of `regions` more than LONE_WIDE and at most SHORT_WIDE times as wide as tall, in no column
    (`linemask.columns`), where the recogniser reads neither 2 letters or digits nor one at LONE_CONFIDENT (see above)."""

    def short(r: ocr.TextRegion) -> bool:
        w, h = r.box[2] - r.box[0], r.box[3] - r.box[1]
        return not oriented.is_oriented(r.quad) and LONE_WIDE * h < w <= SHORT_WIDE * h

    shorts = [r for r in regions if short(r)]
    if not shorts:
        return []
    stacked = linemask.columns(regions, pixels.shape)
    out = []
    for r in shorts:
        if any(_inside(r.box, c) for c in stacked):
            continue
        text, score = reader.recognise_scored(multiscale.crop(pixels, r.box))
        if not (oriented.letters_or_digits(text) >= 2 or (oriented.letters_or_digits(text) == 1 and score >= LONE_CONFIDENT)):
            out.append(r)
    return out


# The net under the detector: the stroke map's candidate lines, and the faint-line map's
# (`proposals.faint_lines`: lines too faint for any stroke to show, frames up to 2,048 px),
# outside every mask (5 px or taller, `linemask.NET_MIN_HEIGHT`) are read by the recogniser; one read as text is masked
# like a detector's region, and a frame where one is still read after that is refused
# (`linemask.plan`). On: a line the detector missed entirely would otherwise be exported
# unmasked (benchmarks/RESULTS.md section 16 has what it costs and catches).
UNCOVERED_NET = True


def mask_plan(reader: ocr.TextReader, pixels: np.ndarray, net: bool | None = None, turned: bool | None = None) -> tuple[linemask.MaskPlan, int]:
    """What the screen masks on a frame (after the region rules): the plan, and how many blobs were not text.
    `net` (default UNCOVERED_NET): also refuse a frame where a stroke-map line outside every mask is read as text.
    `turned` (default multiscale.TURNED): also find, mask and net lines that run off the row (`oriented`)."""
    turned = multiscale.TURNED if turned is None else turned
    found, ignored = text_regions(reader, pixels, turned)
    if not (UNCOVERED_NET if net is None else net):
        return (linemask.plan(reader, pixels, found) if found else linemask.MaskPlan([], 0, False)), ignored
    # The band map's lines only go on along lines the detector found (`linemask.chained`): none found, none looked for.
    lines, faint = (oriented.candidates(pixels), oriented.faint_candidates(pixels) if found else []) if turned else ([], [])
    return linemask.plan(reader, pixels, found, proposals.candidates(pixels) + proposals.faint_lines(pixels), lines, faint), ignored


def header_statement(img: SourceImage) -> str:
    """What the source itself says about burned-in text (information, not the decision)."""
    if img.origin != "dicom":
        return f"not stated ({img.origin} source)"
    flag = str(img.meta.get("BurnedInAnnotation", "") or "").strip().upper()
    return f"BurnedInAnnotation = {flag}" if flag else "BurnedInAnnotation absent"


@dataclass
class TextLog:
    """What the detector found on every frame it read: the manifest's `text_in_pixels`."""

    engine: str = ""
    action: str = "mask"
    region_rules: dict[str, Any] = field(default_factory=lambda: NO_RULES.to_dict())
    frames_screened: int = 0
    seconds: float = 0.0
    frames: list[dict[str, Any]] = field(default_factory=list)  # one entry per frame with text

    def to_dict(self, timing: bool = False) -> dict[str, Any]:
        """The log as JSON; `timing` adds seconds per frame (the build report has it, the manifest
        does not: a rebuild writes the same release bytes)."""
        with_text = [f for f in self.frames if f["regions"]]
        by_header: dict[str, dict[str, int]] = {}
        for f in self.frames:
            row = by_header.setdefault(f["header"], {"frames": 0, "with_text": 0})
            row["frames"] += 1
            row["with_text"] += 1 if f["regions"] else 0
        out: dict[str, Any] = {
            "engine": self.engine,
            "views": "crops where strokes form lines (along rows and turned), enlarged and contrast-stretched, and the whole frame once at 480 px (large text); "
                     f"on a frame up to 1,024 px where they find nothing, the faint-line map's thin turned lines at full scale, the {oriented.LONE_READS} most "
                     f"stroke-like read upright" + (" (none read: at half scale, the " + ("most" if oriented.LONE_HALF_READS == 1 else f"{oriented.LONE_HALF_READS} most")
                                                + " stroke-like)" if oriented.LONE_HALF else "")
                     + ("; a detector piece that runs off the row, too short for a line, read lengthened along it (in the direction and place "
                        "across that read most) and kept as a turned line when read as text" if TURNED_PIECES else "")
                     + ("; a short diagonal piece of a turned line kept read on past each end, and extended where its line reads on" if SHORT_REACH else ""),
            "masking": "regions grown along the line" + (" (rows followed along the row first)" if linemask.FOLLOW_ROWS else "") + ", lines joined, "
                       "regions one under another masked as one column"
                       + (" (the turned stroke maps' near-vertical lines counted as pieces of a column that holds a region)" if linemask.COLUMN_PIECES else "")
                       + (f" ({STACKED_LEAST} or more of those read as one character or none too)" if STACKED_DROPPED else "")
                       + ", a stroke-map line partly under a mask masked whole, "
                       "a faint line (the band map, turned and coarse) that goes on along a detected line and partly under its mask masked whole, "
                       "the strips beside each mask read by the recogniser and masked when legible; "
                       "the stroke map's candidate lines (and, on frames up to 2,048 px, the faint-line map's; turned, and the band map's thin lines in the direction of a turned line or column found, read upright) outside every mask read by the recogniser (a line partly under a mask read unmasked) and masked the same way when legible at a confidence of 0.5 or more (0.3 for the band map's lines 12 px thick or thinner), turned masks grown 60 px at least along"
                       + ("; a near-vertical line also read as a stack, its letters cut at their pitch and set side by side, at 0.6 or more and one letter or digit a cell at most" if oriented.UNSTACK else "")
                       + "; a frame still legible is refused",
            "action": self.action,
            "region_rules": self.region_rules,
            "frames_blanked_by_rules": sum(1 for f in self.frames if f.get("rule_zones")),
            "frames_screened": self.frames_screened,
            "frames_with_text": len(with_text),
            "regions": sum(len(f["regions"]) for f in with_text),
            "frames_refused": sum(1 for f in with_text if f["action"] == "refuse"),
            "frames_refused_still_readable": sum(1 for f in with_text if f.get("still_readable_after_masking")),
            "by_header": dict(sorted(by_header.items())),
            "tall_regions_not_text": sum(f.get("tall_regions_not_text", 0) for f in self.frames),
            "frames": [f for f in self.frames if f["regions"] or f.get("rule_zones") or f.get("tall_regions_not_text")],
        }
        if timing:
            out["cpu_seconds_per_frame"] = round(self.seconds / self.frames_screened, 3) if self.frames_screened else None
        return out

    def link(self, dataset: str, ref: str, image: str) -> None:
        """Name the exported image (`images/007.png`) a screened frame became."""
        for f in self.frames:
            if f["dataset"] == dataset and f["source"] == ref:
                f["image"] = image

    def mark_exported(self, exported: set[tuple[str, str]]) -> None:
        """Say which of the frames' images are in the export ((dataset, image key) pairs)."""
        for f in self.frames:
            f["exported"] = (f["dataset"], f.get("image", "")) in exported


class TextScreen:
    """The build's pixel text screen: `screen(image)` masks the image's text in place, or refuses it."""

    def __init__(self, action: str = "mask", reader: ocr.TextReader | None = None, log: TextLog | None = None,
                 regions: RegionTable = NO_RULES, turned: bool | None = None):  # fmt: skip
        if action not in ("mask", "refuse"):
            raise ValueError(f"privacy.text is {action!r}; expected 'mask' or 'refuse'")
        self.reader = reader if reader is not None else ocr.shared_reader()
        self.log = log if log is not None else TextLog()
        self.log.engine = self.log.engine or ocr.engine_name()
        self.log.action = action
        self.log.region_rules = regions.to_dict()
        self.action = action
        self.regions = regions
        self.turned = turned  # lines off the row too (default multiscale.TURNED); False: rows only
        self.reason = ""  # why the last frame was refused, in the build log's words

    def _blank_zones(self, img: SourceImage, modality: str) -> list[tuple[tuple[int, int, int, int], str]]:
        """Blank the region rules' zones of the frame (not a frame already cropped to its ultrasound tissue region)."""
        if any(p.startswith("cropped to") for p in img.processing):
            return []
        zones = self.regions.zones_for(img.pixels.shape, {str(img.meta.get("Modality", "") or ""), modality},
                                       str(img.meta.get("Manufacturer", "") or ""), str(img.meta.get("ManufacturerModelName", "") or ""))  # fmt: skip
        if zones:
            img.pixels = linemask.paint(img.pixels, [b for b, _ in zones])
            img.processing.append(f"region rules: blanked {len(zones)} zone(s)")
        return zones

    def screen(self, img: SourceImage, modality: str = "") -> bool:
        """Blank the region rules' zones, detect text in `img.pixels`; mask it (True) or refuse the frame
        (False, when the recipe says so). `modality` is the cube modality the frame was mapped to."""
        zones = self._blank_zones(img, modality)
        t0 = time.process_time()
        plan, ignored = mask_plan(self.reader, img.pixels, turned=self.turned)
        self.log.seconds += time.process_time() - t0
        self.log.frames_screened += 1
        shape = img.pixels.shape
        # Turned lines are masked as quads; the manifest lists each by its box too (and the quad itself).
        boxes = plan.boxes + [oriented.bbox(q, shape) for q in plan.quads]
        action = "refuse" if plan.readable or (boxes and self.action == "refuse") else "none" if not boxes else "mask"
        entry: dict[str, Any] = {"dataset": img.dataset, "source": img.ref, "frame": [int(shape[1]), int(shape[0])],
                                 "header": header_statement(img), "action": action,
                                 "regions": [list(b) for b in boxes]}  # fmt: skip
        if plan.quads:
            entry["turned_regions"] = [[[round(x), round(y)] for x, y in q] for q in plan.quads]
        if plan.extended:
            entry["strips_masked_after_recheck"] = plan.extended
        if plan.netted:
            entry["lines_masked_by_net"] = plan.netted  # lines the detector missed, read by the recogniser
        if plan.readable:
            entry["still_readable_after_masking"] = True
        if zones:
            entry["rule_zones"] = [list(b) for b, _ in zones]
            entry["rules"] = sorted({why for _, why in zones})
        if ignored:
            entry["tall_regions_not_text"] = ignored
        self.log.frames.append(entry)
        if action == "refuse":
            self.reason = "still legible after masking" if plan.readable and self.action == "mask" else "text found in the pixels"
            return False
        if not boxes:
            img.processing.append("OCR: no text found")
            return True
        img.pixels = plan.paint(img.pixels)
        img.processing.append(f"OCR: masked {len(boxes)} text region(s)")
        return True
