"""Detection of burned-in text by the build's OCR screen, on generated frames of clinical sizes.

    .venv/bin/python -m benchmarks.deid_ocr                  # 24 frames with text and 12 without per size (~12 min CPU)
    .venv/bin/python -m benchmarks.deid_ocr --n 6 --sides 512,4096 --json out.json
    .venv/bin/python -m benchmarks.deid_ocr --merge a.json b.json --json all.json  # runs pooled (other seeds, sizes)
    .venv/bin/python -m benchmarks.deid_ocr --merge pooled.json d.json --keep 4096 --layout 65/0/27/4096 --json all.json  # a size re-run, the others kept

Frames: CT-, radiograph-, MR- and mammogram-like bodies and plain noise
(synthetic.background), 512, 1,024, 2,048, 3,072 and 4,096 pixels on the long side
(radiographs 5:6 and mammograms 4:5 portrait, the others square). Frames with text carry 1
to 4 lines of identifying text (invented names in the spellings consoles write, birth and
study dates in five formats, record, accession and study numbers) in 7 faces (Pillow's
scalable and bitmap faces; DejaVu Sans, Sans Bold, Sans Mono, Serif and STIX from
matplotlib's wheel), 8 to 64 pixels (the font size, whatever the frame size), 3 contrasts
(white or black; 0.3 or 0.15 of full scale from the local background, brighter or
darker) and 6 positions (four corners, a top strip, over the anatomy). The same generator
makes the frames without text.

What is measured, with the build's own code (textscreen.mask_plan: text_regions, then
linemask.plan: the masks grown along the line, the recogniser's check beside them), per
frame size:
- line recall: a line counts as masked when every one of its glyph pixels lies in a
  masked box (coverage 1.0); also when every visible glyph pixel does (a fixed grey over
  varying anatomy vanishes where the anatomy has that grey: synthetic.VISIBLE), with
  coverage >= 0.9, and per font, size, contrast, position and background; with the
  one-sided 95% Clopper-Pearson lower bound over lines (lines of a frame share a place and
  a ground, so the bound is optimistic);
- frames refused: those the recogniser still reads text beside a mask in after both
  passes, or in a stroke-map line outside every mask (the build leaves them out); lines
  "masked or in a refused frame", the lines no exported frame shows; frames where the net
  (a stroke-map line the detector missed, read as text) added a mask;
- readable after masking: the recogniser alone (no detector) on each line's own box,
  padded, in the masked frame of every frame the build would export; a line counts when
  4 or more of its characters in a row are read back (case and separators ignored);
- false-mask rate: the share of frames without text that get any masked region, and the
  share of their pixels masked; on frames with text, the share of pixels masked outside
  the lines' own boxes;
- CPU seconds per frame of the screen and its masking (process time: the machine is
  shared, so wall time is inflated by the others' load), with the ONNX runtime's thread
  count.

Prints a Markdown summary (benchmarks/RESULTS.md quotes it) and, with --json, the figures.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from medrcube.construction.privacy import linemask, multiscale, ocr, oriented, synthetic, textscreen
from medrcube.construction.privacy.textscreen import mask_plan

SIDES = (512, 1024, 2048, 3072, 4096)
CHECKPOINT = 10  # frames: a long run hands on its figures this often
SIZES = (8, 12, 16, 24, 32, 48, 64)  # font size in pixels, at every frame size
CONTRASTS = ("full", "medium", "low")
POSITIONS = ("top left", "top right", "bottom left", "bottom right", "top strip", "over anatomy")
ASPECT = {"xray": 5 / 6, "mammo": 4 / 5}  # width / height of portrait frames; the others are square
FAMILY = ("BEEBLEBROX", "DENT", "PREFECT", "MCMILLAN", "OBRIEN", "VAN DER BERG", "NGUYEN", "KOWALSKA", "SANTOS", "MUELLER")
GIVEN = ("ZAPHOD", "ARTHURINA", "FORD", "TRICIA", "SEAN", "ANNA", "THI LAN", "MAGDA", "JOAO", "JUERGEN")
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")


def identifying_text(rng: np.random.Generator) -> str:
    """One line a console writes: a name, a date, a record number, or two of them."""
    f, g = FAMILY[rng.integers(len(FAMILY))], GIVEN[rng.integers(len(GIVEN))]
    y, m, d = int(rng.integers(1930, 2024)), int(rng.integers(1, 13)), int(rng.integers(1, 29))
    name = [f"{f}^{g}", f"{f}, {g}", f"{g.title()} {f.title()}", f"{g[0]}. {f}", f"{f} {g}"][rng.integers(5)]
    date = [f"{d:02d}.{m:02d}.{y}", f"{y}-{m:02d}-{d:02d}", f"{m:02d}/{d:02d}/{y}", f"{d:02d}-{MONTHS[m - 1]}-{y}", f"{y}{m:02d}{d:02d}"][rng.integers(5)]
    number = [f"MRN {rng.integers(10**7, 10**8)}", f"ACC-{rng.integers(10**6, 10**7)}", f"ID: {rng.integers(10**5, 10**6)}",
              f"PID {rng.integers(10**7, 10**8)}", f"Study {rng.integers(1000, 9999)}"][rng.integers(5)]  # fmt: skip
    kind = rng.integers(5)
    return [name, date, number, f"{name}  {date}", f"{number}  DOB {date}"][kind]


def _xy(position: str, tw: int, th: int, shape: tuple[int, int], used: int, rng: np.random.Generator) -> tuple[int, int]:
    """Where a line goes; `used` is the height the position's earlier lines take (with their spacing)."""
    h, w = shape
    m = max(2, min(h, w) // 64)
    if position == "over anatomy":
        return int(rng.integers(w // 4, max(w // 4 + 1, 3 * w // 4 - tw))), int(rng.integers(h // 3, 2 * h // 3))
    x = m if "left" in position else max(m, w - m - tw)
    if position == "top strip":
        x = max(m, (w - tw) // 2)
    y = m + used if position.startswith("top") else h - m - th - used
    return x, max(0, y)


def _value(contrast: str, bg: float, rng: np.random.Generator) -> float:
    if contrast == "full":
        return 1.0 if bg < 0.6 else 0.0
    delta = 0.3 if contrast == "medium" else 0.15
    return float(np.clip(bg + delta if bg + delta <= 1.0 and (bg < 0.5 or rng.random() < 0.5) else bg - delta, 0, 1))


ANGLES = ("0", "45", "90", "135", "180", "270", "stack")  # degrees counter-clockwise; "stack": upright letters one under another
JITTER = 3.0  # degrees: a turned line is drawn within this of its angle (scanned film is never exactly square)


def _turn(angle: str, rng: np.random.Generator) -> tuple[float, bool]:
    """(degrees, stacked) a line of the angle cell is drawn at."""
    if angle == "stack":
        return 0.0, True
    a = float(angle)
    return (a + float(rng.uniform(-JITTER, JITTER)) if a % 180 else a), False


def make_frame(rng: np.random.Generator, with_text: bool, side: int | None = None, angle: str = "0") -> tuple[np.ndarray, list[tuple[synthetic.Burned, dict[str, str]]], dict[str, Any]]:
    side = int(side if side is not None else SIDES[rng.integers(len(SIDES))])
    kind = synthetic.BACKGROUNDS[rng.integers(len(synthetic.BACKGROUNDS))]
    h, w = side, round(side * ASPECT.get(kind, 1.0))
    img = synthetic.background(kind, h, w, rng)
    lines: list[tuple[synthetic.Burned, dict[str, str]]] = []
    if with_text:
        position = POSITIONS[rng.integers(len(POSITIONS))]
        used = 0
        for _ in range(int(rng.integers(1, 5)) if position != "over anatomy" else 1):
            face = list(synthetic.FONT_FILES)[rng.integers(len(synthetic.FONT_FILES))]
            size = int(SIZES[rng.integers(len(SIZES))])
            contrast = CONTRASTS[rng.integers(len(CONTRASTS))]
            text = identifying_text(rng)
            degrees, stacked = _turn(angle, rng) if angle != "0" else (0.0, False)
            if stacked:
                text = text.replace(" ", "")[:12]  # a stacked label is short (a name, a number)
            tw, th = synthetic.text_size(text, face, size, degrees, stacked)
            if tw >= w - 8 or th >= h - 8 - used:
                continue  # a line longer than the frame: consoles wrap or shorten it
            x, y = _xy(position, tw, th, (h, w), used, rng)
            used += th + max(2, th // 3)  # a console's line spacing
            region = img[y : y + th, x : x + tw]
            value = _value(contrast, float(region.mean()) if region.size else 0.3, rng)
            img, b = synthetic.burn(img, text, (x, y), face, size, value, degrees, stacked)
            if b.glyphs.any():
                lines.append((b, {"font": face, "size": f"{size} px", "contrast": contrast, "position": position,
                                  "background": kind, "side": str(side), "angle": angle}))  # fmt: skip
    return img, lines, {"side": side, "background": kind}


def _compact(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def legible(line: str, read: str) -> bool:
    """4 or more characters of the line in a row among what was read back."""
    a, b = _compact(line), _compact(read)
    return any(a[i : i + 4] in b for i in range(max(0, len(a) - 3))) if len(a) >= 4 else a in b and bool(a)


def read_line(reader: ocr.TextReader, img: np.ndarray, box: tuple[int, int, int, int], angle: str = "0", glyphs: np.ndarray | None = None) -> str:
    """The recogniser alone (no detector) on the line's own box, padded: what a reader of that spot would see.
    A turned line is turned upright first, both ways (text at 90 and 270 degrees look alike to a box); with its
    `glyphs` (the frame's bool map of them) the turned crop is cut to the line itself, padded by a quarter of its
    height (the recogniser reads a row: a diagonal line left in its square box came back as one letter); a stacked
    line is read turned a quarter (its letters then lie on their side: a weaker reader than for rows)."""
    part = multiscale.crop(img, box, pad=0.5)
    if angle == "0":
        return reader.recognise(part)
    from PIL import Image

    turn = 90.0 if angle == "stack" else float(angle)
    x0, y0, x1, y1 = box
    p = max(2, int(np.ceil(0.5 * (y1 - y0))))
    h, w = np.shape(img)[:2]
    ink = None if glyphs is None else glyphs[max(0, y0 - p) : min(h, y1 + p), max(0, x0 - p) : min(w, x1 + p)]
    g = Image.fromarray(np.clip(np.asarray(part) * 255 + 0.5, 0, 255).astype(np.uint8))
    texts = []
    for t in (turn, turn + 180):
        up = np.asarray(g.rotate(-t, expand=True, fillcolor=int(np.median(g))), dtype=np.float64) / 255.0
        if ink is not None and ink.any():
            m = np.asarray(Image.fromarray(ink.astype(np.uint8) * 255).rotate(-t, expand=True, fillcolor=0)) > 0
            rows, cols = np.flatnonzero(m.any(axis=1)), np.flatnonzero(m.any(axis=0))
            q = max(2, int(np.ceil(0.25 * (rows[-1] - rows[0] + 1))))
            up = up[max(0, rows[0] - q) : rows[-1] + 1 + q, max(0, cols[0] - q) : cols[-1] + 1 + q]
        texts.append(reader.recognise(up))
    return max(texts, key=lambda t: sum(1 for c in t if c.isalnum()))


def _side_figures() -> dict[str, Any]:
    return {"frames_with_text": 0, "frames_without_text": 0, "lines": 0, "masked": 0, "masked_visible": 0, "masked_90": 0, "refused_frames": 0,
            "lines_in_refused_frames": 0, "protected": 0, "netted_frames": 0, "netted_without_text": 0, "readable_before": 0, "readable_after": 0, "false_mask_frames": 0, "refused_without_text": 0,
            "false_area": [], "over_area": [], "cpu": [], "views": [], "misses": [],
            "paired_frames": 0, "paired_fired": 0, "paired_masked_off": 0, "paired_on_only": 0, "paired_off_only": 0, "paired_false_off": 0,
            "paired_area_frames": 0, "paired_over_on": 0.0, "paired_over_off": 0.0}  # fmt: skip


NET: bool | None = None  # --net / --no-net: the recogniser's net under the detector (default textscreen.UNCOVERED_NET)
TURNED: bool | None = None  # --turned / --no-turned: lines off the row found and masked (default multiscale.TURNED)


# --paired: every frame is screened with the paired rule as set (PAIRED_RULE: linemask.COLUMN_PIECES, or with
# --paired-rule half-turn linemask.NET_HALF_TURN, with --paired-rule band-rows linemask.BAND_ROWS, with --paired-rule
# probe linemask.TURNED_PROBE) and, where that rule changed the frame (a column, a net candidate read as text turned half
# a turn, a band line along the row read as text, a turned letter piece read as text lengthened), again with it off
# (where it did not, the plan is the same by construction: nothing else reads it), so that the rule's own share is
# measured on the same frames at the cost of the frames it touched only. Several rules named (`--paired-rule
# short-read,column-distinct`) are compared together: all on, and all off where one of them fired.
PAIRED = False
PAIRED_RULE = "column-pieces"
_FIRED = [False]


def _watch_pieces() -> None:
    """Note (in _FIRED) whether COLUMN_PIECES changed the columns of the frame being screened."""
    plain = linemask._stacked

    def watched(regions: list[ocr.TextRegion], turned: list[oriented.Line], shape: tuple[int, ...]) -> list[tuple[int, int, int, int]]:
        out = plain(regions, turned, shape)
        if linemask.COLUMN_PIECES and out != linemask.columns(regions, shape):
            _FIRED[0] = True
        return out

    linemask._stacked = watched


def _watch_reads(name: str, module: Any = linemask) -> Callable[[], None]:
    """A watch noting (in _FIRED) whether the module's reading `name` (the one a rule adds: NET_HALF_TURN's
    half_turned_legible, BAND_ROWS's band_row_hits, TURNED_PROBE's probed_legible; SHORT_READ's textscreen.short_dropped,
    the regions it drops; UNSTACK's oriented.stack_read) returned anything on the frame being screened (where it returned nothing, every decision is as
    without the rule)."""
    def watch() -> None:
        plain = getattr(module, name)

        def watched(*args: Any, **kwargs: Any) -> Any:
            out = plain(*args, **kwargs)
            _FIRED[0] = _FIRED[0] or bool(out)
            return out

        setattr(module, name, watched)

    return watch


def _watch_distinct() -> None:
    """Note (in _FIRED) whether COLUMN_DISTINCT changed the columns made on the frame being screened."""
    plain = linemask.columns

    def watched(regions: list[ocr.TextRegion], shape: tuple[int, ...], least: int = 2) -> list[tuple[int, int, int, int]]:
        out = plain(regions, shape, least)
        if linemask.COLUMN_DISTINCT:
            linemask.COLUMN_DISTINCT = False
            try:
                _FIRED[0] = _FIRED[0] or out != plain(regions, shape, least)
            finally:
                linemask.COLUMN_DISTINCT = True
        return out

    linemask.columns = watched


# The rules' switches, one line a rule: `--FLAG` / `--no-FLAG` sets the module's constant for the run (left as
# shipped without either), and a rule with a watch is one --paired can compare (`--paired-rule FLAG`).
SWITCHES: tuple[tuple[str, Any, str, Callable[[], None] | None, str], ...] = (
    ("follow-rows", linemask, "FOLLOW_ROWS", None,
     "follow row regions along the row before they are grown (default: linemask.FOLLOW_ROWS; off before 2026-12-06, evening)"),
    ("lone-half", oriented, "LONE_HALF", None,
     "on a frame where the detector finds nothing, read the half-scale band map's thin lines too "
     "(default: oriented.LONE_HALF; off before 2026-12-06, evening)"),
    ("column-pieces", linemask, "COLUMN_PIECES", _watch_pieces,
     "count the turned stroke maps' near-vertical lines as pieces of a column that holds a detector region "
     "(default: linemask.COLUMN_PIECES; off before 2026-12-06, session 20)"),
    ("half-turn", linemask, "NET_HALF_TURN", _watch_reads("half_turned_legible"),
     "read the net's row candidates turned half a turn too where as shown they are not text "
     "(default: linemask.NET_HALF_TURN; off before 2026-12-06, session 21)"),
    ("band-rows", linemask, "BAND_ROWS", _watch_reads("band_row_hits"),
     "the net reads the band map's half- and quarter-scale lines along the row on frames with a row found "
     "(default: linemask.BAND_ROWS; off before 2026-12-07, session 22)"),
    ("probe", linemask, "TURNED_PROBE", _watch_reads("probed_legible"),
     "a turned stroke-map line read as 2 or more letters or digits for sure is read again lengthened as its "
     "mask would be (default: linemask.TURNED_PROBE; off before 2026-12-07, session 23)"),
    ("short-read", textscreen, "SHORT_READ", _watch_reads("short_dropped", textscreen),
     "read a row region 1.5-3 times as wide as tall, in no column, as a lone letter is, and drop it unless read as 2 letters "
     "or digits or one for sure (default: textscreen.SHORT_READ; off before 2026-12-07, session 24)"),
    ("unstack", oriented, "UNSTACK", _watch_reads("stack_read", oriented),
     "read a near-vertical stroke-map or band-map line as a stack too, its letters cut at their pitch and set side by side "
     "as a row (default: oriented.UNSTACK; off before 2026-12-07, session 25)"),
    ("turned-pieces", textscreen, "TURNED_PIECES", _watch_reads("turned_pieces", textscreen),
     "read a detector quad that runs off the row, too short for a line or dropped, lengthened along its axis, and keep it as "
     "a turned line when read as text (default: textscreen.TURNED_PIECES; off before 2026-12-07, session 26)"),
    ("short-reach", textscreen, "SHORT_REACH", _watch_reads("short_reached", textscreen),
     "a short diagonal turned line kept is read lengthened in its best direction and place, and 16 thicknesses past each "
     "end, and extended where more is read that way (default: textscreen.SHORT_REACH, off: no line changed out of sample, 2026-12-07, session 27)"),
    ("sure-pieces", linemask, "SURE_PIECES", _watch_reads("sure_piece"),
     "a turned stroke-map or band-map line in the direction of text found, read as 2 or more letters or digits at 0.8 or "
     "more, is masked as a piece of text (default: linemask.SURE_PIECES; on since 2026-12-07, session 28)"),
    ("lone-dropped", textscreen, "LONE_DROPPED", _watch_reads("lone_dropped", textscreen),
     "on a frame whose detector regions were all dropped, read the band map's thin lines as where the detector found "
     "nothing (default: textscreen.LONE_DROPPED, off: it masked a text-free frame out of sample, 2026-12-07, session 29)"),
    ("narrow", oriented, "NARROW", _watch_reads("narrow_legible", oriented),
     "a thin band-map line (12 px or thinner) not read as text as is is read narrowed to 0.7 of its thickness, about its "
     "axis and 0.15 of it to either side (default: oriented.NARROW; new 2026-12-07, session 29)"),
    ("narrow-half", oriented, "NARROW_HALF", _watch_reads("halved_legible", oriented),
     "a thin band-map line not read as text as is nor narrowed to 0.7 of its thickness is read cut to its middle half, "
     "counted at 7 letters or digits where a 0.7 cut read 5 at 0.45 (default: oriented.NARROW_HALF, off: it changed no frame out of sample, 2026-12-08, session 30)"),
    ("column-distinct", linemask, "COLUMN_DISTINCT", _watch_distinct,
     "count two pieces of a column that are one thing found twice (nested, of about one height) as one piece "
     "(default: linemask.COLUMN_DISTINCT, off: it lost a line at 270 degrees out of sample, 2026-12-07, session 24)"),
)
RULES = {flag: (module, name) for flag, module, name, watch, _ in SWITCHES if watch is not None}
WATCH = {flag: watch for flag, _, _, watch, _ in SWITCHES if watch is not None}
LABEL = {flag: flag.replace("-", " ") for flag in RULES}  # the JSON's "lines by cell, ... off"


def _rule_off(reader: ocr.TextReader, img: np.ndarray, plan: linemask.MaskPlan, mask: np.ndarray) -> tuple[linemask.MaskPlan, np.ndarray, bool]:
    """The frame's plan and mask with the paired rule off (screened again only where it fired), and whether it fired."""
    if not _FIRED[0]:
        return plan, mask, False
    rules = [RULES[flag] for flag in PAIRED_RULE.split(",")]
    for module, name in rules:
        setattr(module, name, False)
    try:
        off, off_mask = screen(reader, img)
    finally:
        for module, name in rules:
            setattr(module, name, True)
    return off, off_mask, True


def screen(reader: ocr.TextReader, img: np.ndarray) -> tuple[linemask.MaskPlan, np.ndarray]:
    """What `medrcube build` does to a frame (textscreen.TextScreen.screen without the region rules): the plan and the mask."""
    plan, _ = mask_plan(reader, img, NET, TURNED)
    return plan, plan.covered(img.shape)


def run(n: int, seed: int, no_text: int | None = None, sides: tuple[int, ...] = SIDES, threads: int = ocr.DEFAULT_THREADS,
        on_side: Callable[[dict[str, Any]], None] | None = None, only: set[int] | None = None, angles: tuple[str, ...] = ("0",)) -> dict[str, Any]:
    """`n` frames with text and `no_text` (default n // 2) without, at each frame size of `sides`;
    `on_side` gets the figures so far every CHECKPOINT frames and after each size (a long run keeps what it measured);
    `only`: screen just these frame indices (every frame is still drawn, so a run's frame i is the same frame again)."""
    n_blank = no_text if no_text is not None else n // 2
    if n * len(angles) + n_blank == 0:  # nothing drawn: no figure to give (the summary's medians have no frame)
        raise ValueError("no frame to screen: n and no_text are both 0")
    rng = np.random.default_rng(seed)
    reader = ocr.TextReader(threads=threads)
    reader.detect_native(np.zeros((64, 64)))  # load the model outside the timing
    per: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    by_side = {str(s): _side_figures() for s in sides}
    for side in sides:
        fig = by_side[str(side)]
        cells = [(a, k) for a in angles for k in range(n)] + [("0", -1)] * n_blank  # (angle, frame of the cell); -1: no text
        for i, (angle, _) in enumerate(cells):
            with_text = i < n * len(angles)
            img, lines, info = make_frame(rng, with_text, side, angle)
            if only is not None and i not in only:
                continue
            reader.clear_memo()  # every frame is new: time the model, not the memo
            c0 = time.process_time()
            _FIRED[0] = False
            plan, mask = screen(reader, img)
            fig["cpu"].append(time.process_time() - c0)
            off, off_mask, fired = _rule_off(reader, img, plan, mask) if PAIRED else (plan, mask, False)
            fig["paired_frames"] += PAIRED
            fig["paired_fired"] += fired
            fig["views"].append(len(multiscale.views(img)))
            if not with_text:
                fig["frames_without_text"] += 1
                fig["false_mask_frames"] += bool(plan.boxes or plan.quads)  # a turned mask (a quad) is a mask too
                fig["refused_without_text"] += plan.readable
                fig["netted_without_text"] += bool(plan.netted)
                fig["false_area"].append(float(mask.mean()))
                fig["paired_false_off"] += PAIRED and bool(off.boxes or off.quads)
                continue
            fig["frames_with_text"] += 1
            fig["refused_frames"] += plan.readable
            fig["netted_frames"] += bool(plan.netted)
            truth = np.zeros(img.shape, dtype=bool)
            for b, _ in lines:
                x0, y0, x1, y1 = b.box
                truth[y0:y1, x0:x1] = True
            fig["over_area"].append(float((mask & ~truth).mean()))
            if PAIRED:  # pixels masked off the lines, with the rule and without (the same frame)
                fig["paired_area_frames"] += 1
                fig["paired_over_on"] += float((mask & ~truth).mean())
                fig["paired_over_off"] += float((off_mask & ~truth).mean())
            masked_img = np.where(mask, 0.0, img)
            whole = all(synthetic.coverage(b, mask) >= 1.0 for b, _ in lines)
            cell = per["frames by cell"][f"{side} px, {angle}"]
            cell[0] += whole or bool(plan.readable)  # every line masked, or the frame refused (not exported)
            cell[1] += 1
            for b, facets in lines:
                cov = synthetic.coverage(b, mask)
                if PAIRED:
                    cov_off = synthetic.coverage(b, off_mask)
                    fig["paired_masked_off"] += cov_off >= 1.0
                    fig["paired_on_only"] += cov >= 1.0 > cov_off
                    fig["paired_off_only"] += cov_off >= 1.0 > cov
                    label = " and ".join(LABEL[flag] for flag in PAIRED_RULE.split(","))
                    per[f"lines by cell, {label} off"][f"{side} px, {angle}"][0] += cov_off >= 1.0
                    per[f"lines by cell, {label} off"][f"{side} px, {angle}"][1] += 1
                fig["lines"] += 1
                fig["masked"] += cov >= 1.0
                fig["masked_90"] += cov >= 0.9
                fig["masked_visible"] += synthetic.coverage(b, mask, visible_only=True) >= 1.0
                fig["lines_in_refused_frames"] += plan.readable
                fig["protected"] += cov >= 1.0 or plan.readable  # masked, or in a frame the build does not export
                fig["readable_before"] += legible(b.text, read_line(reader, img, b.box, facets["angle"], b.glyphs))
                # Detector-free: the recogniser on the line's own spot of the exported (masked) frame; a refused frame is not exported.
                fig["readable_after"] += (not plan.readable) and cov < 1.0 and legible(b.text, read_line(reader, masked_img, b.box, facets["angle"], b.glyphs))
                if cov < 1.0:  # what a miss looks like, to look at it again (the frame: its index at this size and the seed)
                    fig["misses"].append({"seed": seed, "frame": i, "coverage": round(cov, 3), "box": list(b.box), "refused": plan.readable, **facets})
                for facet, value in [*facets.items(), ("lines by cell", f"{side} px, {angle}")]:
                    per[facet][value][0] += cov >= 1.0
                    per[facet][value][1] += 1
            if on_side is not None and (i + 1) % CHECKPOINT == 0:
                on_side(_summary({k: v for k, v in by_side.items() if v["cpu"]}, per, seed, threads))
        if on_side is not None:
            on_side(_summary({k: v for k, v in by_side.items() if v["cpu"]}, per, seed, threads))
    return _summary(by_side, per, seed, threads)


RAW = ("cpu", "views", "false_area", "over_area")  # per-frame lists the JSON keeps, so that runs can be pooled (`merge`)


def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs of the benchmark (their JSON: other seeds, other sizes, frames with and without text apart) pooled into one."""
    by_side: dict[str, dict[str, Any]] = {}
    per: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for r in results:
        for side, v in r["by_side"].items():
            fig = by_side.setdefault(side, _side_figures())
            for k, x in fig.items():
                fig[k] = x + (v["raw"][k] if k in RAW else v.get(k, 0))  # a run from before a figure was kept adds none
        for facet, vals in r["by"].items():
            for value, c in vals.items():
                per[facet][value][0] += c["masked"]
                per[facet][value][1] += c["lines"]
    seeds = sorted({s for r in results for s in (r["seed"] if isinstance(r["seed"], list) else [r["seed"]])})
    return _summary(dict(sorted(by_side.items(), key=lambda kv: int(kv[0]))), per, seeds, results[0]["threads"])


def lines_by_facet(n: int, seed: int, no_text: int, sides: tuple[int, ...], count: set[str]) -> dict[str, dict[str, int]]:
    """Lines per facet value on the frames with text of a run (`n`, `no_text`, `seed`, `sides` as given to `run`),
    at the sizes in `count`: the frames drawn again as `run` draws them (the generator is seeded), not screened."""
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    last = max((k for k, side in enumerate(sides) if str(side) in count), default=-1)
    for k, side in enumerate(sides[: last + 1]):  # what is drawn after the last counted line changes nothing
        for i in range(n + no_text if k < last else n):
            _, lines, _ = make_frame(rng, i < n, side)  # every frame before is drawn: the next one depends on it
            for _, facets in lines if str(side) in count else []:
                for facet, value in facets.items():
                    out[facet][value] += 1
    return out


def kept(pooled: dict[str, Any], sides: set[str], layouts: list[tuple[int, int, int, tuple[int, ...]]]) -> dict[str, Any]:
    """The figures of a pooled JSON at `sides` alone, as a run's JSON that `merge` pools with new runs of the other sizes.
    `layouts`: (n, no_text, seed, sides) of every run pooled into it. Per-size figures are the JSON's own; per facet, a
    size's lines are drawn again (`lines_by_facet`) and each counts as masked unless it is among that size's misses."""
    per: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for n, no_text, seed, run_sides in layouts:
        for facet, values in lines_by_facet(n, seed, no_text, run_sides, sides).items():
            for value, k in values.items():
                per[facet][value][0] += k
                per[facet][value][1] += k
    for side in sides:
        for miss in pooled["by_side"][side]["misses"]:
            for facet, values in per.items():
                if facet in miss:  # a run from before a facet was kept has none
                    values[str(miss[facet])][0] -= 1
    by = {facet: {v: {"masked": c[0], "lines": c[1]} for v, c in sorted(vals.items())} for facet, vals in per.items()}
    return {"seed": pooled["seed"], "threads": pooled["threads"], "by_side": {s: pooled["by_side"][s] for s in sorted(sides, key=int)}, "by": by}


def _layout(spec: str) -> tuple[int, int, int, tuple[int, ...]]:
    n, no_text, seed, sides = spec.split("/")
    return int(n), int(no_text), int(seed), tuple(int(x) for x in sides.split(","))


def _summary(by_side: dict[str, dict[str, Any]], per: dict[str, dict[str, list[int]]], seed: int | list[int], threads: int) -> dict[str, Any]:
    out_sides = {}
    for side, fig in by_side.items():
        lines_n = fig["lines"]
        out_sides[side] = {
            **{k: v for k, v in fig.items() if not isinstance(v, list)},
            "recall": fig["masked"] / lines_n if lines_n else None,
            "recall_lower_95": _lower(fig["masked"], lines_n),
            "recall_visible": fig["masked_visible"] / lines_n if lines_n else None,
            "recall_visible_lower_95": _lower(fig["masked_visible"], lines_n),
            "recall_coverage_90": fig["masked_90"] / lines_n if lines_n else None,
            "protected_rate": fig["protected"] / lines_n if lines_n else None,
            "protected_lower_95": _lower(fig["protected"], lines_n),
            "false_mask_rate": fig["false_mask_frames"] / fig["frames_without_text"] if fig["frames_without_text"] else None,
            "false_mask_area": float(np.mean(fig["false_area"])) if fig["false_area"] else None,
            "over_mask_area_on_text_frames": float(np.mean(fig["over_area"])) if fig["over_area"] else None,
            "cpu_seconds_median": float(np.median(fig["cpu"])), "cpu_seconds_max": float(np.max(fig["cpu"])),
            "views_median": float(np.median(fig["views"])),
            "misses": fig["misses"],
            "raw": {k: [round(float(x), 6) for x in fig[k]] for k in RAW},
        }  # fmt: skip
    total = lambda k: sum(v[k] for v in out_sides.values())  # noqa: E731
    return {
        "seed": seed, "threads": threads, "frames_with_text": total("frames_with_text"), "frames_without_text": total("frames_without_text"),
        "lines": total("lines"), "masked": total("masked"), "masked_visible": total("masked_visible"), "readable_after": total("readable_after"), "refused_frames": total("refused_frames"),
        "protected": total("protected"), "netted_frames": total("netted_frames"), "netted_without_text": total("netted_without_text"),
        "false_mask_frames": total("false_mask_frames"), "refused_without_text": total("refused_without_text"),
        "recall": total("masked") / total("lines") if total("lines") else None,
        "recall_visible": total("masked_visible") / total("lines") if total("lines") else None,
        "false_mask_rate": total("false_mask_frames") / total("frames_without_text") if total("frames_without_text") else None,
        "cpu_seconds_max_median": max(v["cpu_seconds_median"] for v in out_sides.values()),
        "by_side": out_sides,
        "by": {facet: {v: {"masked": c[0], "lines": c[1]} for v, c in sorted(vals.items())} for facet, vals in per.items()},
        "engine": ocr.engine_name(),
    }  # fmt: skip


def _lower(k: int, n: int) -> float | None:
    """One-sided 95% Clopper-Pearson lower bound of a proportion k / n (lines cluster by frame: a lower bound still)."""
    if n == 0:
        return None
    if k == 0:
        return 0.0
    from scipy.stats import beta

    return float(beta.ppf(0.05, k, n - k + 1))


def _upper(k: int, n: int) -> float | None:
    """One-sided 95% Clopper-Pearson upper bound of a proportion k / n."""
    if n == 0:
        return None
    if k == n:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(0.95, k + 1, n - k))


def markdown(r: dict[str, Any]) -> str:
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    out = [f"Engine: {r['engine']}; ONNX intra-op threads {r['threads']}. Seed {r['seed']}: {r['frames_with_text']} frames with "
           f"{r['lines']} lines of text, {r['frames_without_text']} frames without text.", "",
           "| long side | views (median) | frames with text | lines | masked (every glyph pixel) | 95% lower bound | "
           "masked (every visible glyph pixel) | 95% lower bound | masked (90%) | "
           "frames refused (still legible) | masked or in a refused frame | frames with a line masked by the net | "
           "readable after masking (of readable before) | false masks (frames without text) | 95% upper bound | CPU s per frame, median (max) |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for side, v in r["by_side"].items():
        out.append(f"| {side} | {v['views_median']:.0f} | {v['frames_with_text']} | {v['lines']} | {pct(v['recall'])} ({v['masked']}) | "
                   f"{pct(v['recall_lower_95'])} | {pct(v['recall_visible'])} ({v['masked_visible']}) | {pct(v['recall_visible_lower_95'])} | "
                   f"{pct(v['recall_coverage_90'])} | {v['refused_frames']} | {pct(v['protected_rate'])} ({v['protected']}) | "
                   f"{v['netted_frames']} | {v['readable_after']} (of {v['readable_before']}) | "
                   f"{pct(v['false_mask_rate'])} ({v['false_mask_frames']} of {v['frames_without_text']}) | "
                   f"{pct(_upper(v['false_mask_frames'], v['frames_without_text']))} | "
                   f"{v['cpu_seconds_median']:.2f} ({v['cpu_seconds_max']:.2f}) |")  # fmt: skip
    out.append(f"| all | | {r['frames_with_text']} | {r['lines']} | {pct(r['recall'])} ({r['masked']}) | | "
               f"{pct(r['recall_visible'])} ({r['masked_visible']}) | | | {r['refused_frames']} | "
               f"{pct(r['protected'] / r['lines'] if r['lines'] else None)} ({r['protected']}) | {r['netted_frames']} | {r['readable_after']} | {pct(r['false_mask_rate'])} ({r['false_mask_frames']}) | {pct(_upper(r['false_mask_frames'], r['frames_without_text']))} | |")  # fmt: skip
    out.append("")
    cells = r["by"].get("lines by cell", {})
    if cells:
        frames = r["by"].get("frames by cell", {})
        out += ["| cell (long side, angle) | frames with text | frames all masked or refused | 95% lower bound | lines | lines masked | 95% lower bound |",
                "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for key, c in cells.items():
            f = frames.get(key, {"masked": 0, "lines": 0})
            out.append(f"| {key} | {f['lines']} | {pct(f['masked'] / f['lines'] if f['lines'] else None)} ({f['masked']}) | {pct(_lower(f['masked'], f['lines']))} | "
                       f"{c['lines']} | {pct(c['masked'] / c['lines'])} ({c['masked']}) | {pct(_lower(c['masked'], c['lines']))} |")  # fmt: skip
        out.append("")
    for side, v in r["by_side"].items():
        if v.get("paired_frames"):
            out.append(f"- paired, {side} px ({v['paired_frames']} frames screened with the paired rule as set; {v['paired_fired']} where it changed the frame, "
                       f"screened again with it off): lines masked {v['masked']} with it, {v['paired_masked_off']} without; masked only with it "
                       f"{v['paired_on_only']}, only without {v['paired_off_only']}; text-free frames masked {v['false_mask_frames']} with it, "
                       f"{v['paired_false_off']} without" + (f"; pixels masked off the lines on frames with text {100 * v['paired_over_on'] / v['paired_area_frames']:.2f}% with it, "
                       f"{100 * v['paired_over_off'] / v['paired_area_frames']:.2f}% without ({v['paired_area_frames']} frames)" if v.get("paired_area_frames") else ""))  # fmt: skip
    for facet, vals in r["by"].items():
        if facet in ("side", "lines by cell", "frames by cell"):
            continue
        cells = ", ".join(f"{v} {pct(c['masked'] / c['lines'])} ({c['lines']})" for v, c in vals.items())
        out.append(f"- recall by {facet}: {cells}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.deid_ocr", description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=24, help="frames with text per cell (size and angle; default %(default)s); half as many without, per size")
    ap.add_argument("--no-text", type=int, default=None, help="frames without text per size (default: half of --n)")
    ap.add_argument("--sides", default=",".join(map(str, SIDES)), help="long sides of the frames (default %(default)s)")
    ap.add_argument("--threads", type=int, default=ocr.DEFAULT_THREADS, help="ONNX intra-op threads (default %(default)s)")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--only", default=None, help="screen only these frame indices (comma-separated; a miss's 'frame' in the JSON)")
    ap.add_argument("--net", action=argparse.BooleanOptionalAction, default=None,
                    help="read the stroke-map lines outside every mask; mask those read as text, refuse the frame if one is still read (default: textscreen.UNCOVERED_NET)")
    ap.add_argument("--angles", default="0", help=f"angle cells, comma-separated, of {','.join(ANGLES)} (or 'all'); --n frames with text in each, at each size (default %(default)s)")
    ap.add_argument("--turned", action=argparse.BooleanOptionalAction, default=None,
                    help="find and mask lines that run off the row (default: multiscale.TURNED); --no-turned: rows only, as before")
    ap.add_argument("--turned-along", type=float, default=None, metavar="THICKNESSES",
                    help="a turned mask's growth along its line at each end (default: linemask.TURNED_ALONG; 6 before 2026-12-06)")
    ap.add_argument("--column-along", type=float, default=None, metavar="WIDTHS",
                    help="a column's growth up and down (default: linemask.COLUMN_ALONG; 8 before 2026-12-06)")
    ap.add_argument("--stacked-dropped", action=argparse.BooleanOptionalAction, default=None,
                    help="keep the regions the blob and lone-letter rules drop where 3 or more lie one under another, and grow columns "
                         "by their letters' height, not their width (default: textscreen.STACKED_DROPPED, linemask.COLUMN_LETTER; "
                         "off before 2026-12-06, evening)")
    for flag, _, _, _, text in SWITCHES:
        ap.add_argument(f"--{flag}", action=argparse.BooleanOptionalAction, default=None, help=text)
    ap.add_argument("--paired", action="store_true",
                    help="also screen with the paired rule off the frames where it changed something (the others are the same "
                         "by construction), and report the lines masked both ways (needs the rule on)")
    ap.add_argument("--paired-rule", default="column-pieces", metavar="RULE[,RULE...]",
                    help=f"the rule --paired compares, of {', '.join(sorted(RULES))} (the flags above; default %(default)s); "
                         "several, comma-separated: all on against all off")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON", help="pool the figures of these runs (print, and write --json)")
    ap.add_argument("--keep", default=None, metavar="SIDES",
                    help="with --merge: of the first JSON (a pooled one) keep only these sizes, the others coming from the runs after it; needs --layout")
    ap.add_argument("--layout", nargs="+", default=None, metavar="N/NO_TEXT/SEED/SIDES",
                    help="with --keep: every run pooled into the first JSON, as its --n, --no-text, --seed and --sides (e.g. 65/0/27/4096)")
    args = ap.parse_args(argv)
    global NET, TURNED, PAIRED, PAIRED_RULE
    NET, TURNED = args.net, args.turned
    if args.turned_along is not None:
        linemask.TURNED_ALONG = args.turned_along
    if args.column_along is not None:
        linemask.COLUMN_ALONG = args.column_along
    if args.stacked_dropped is not None:
        textscreen.STACKED_DROPPED = linemask.COLUMN_LETTER = args.stacked_dropped
    for flag, module, name, _, _ in SWITCHES:
        if (value := getattr(args, flag.replace("-", "_"))) is not None:
            setattr(module, name, value)
    if args.paired:
        flags = args.paired_rule.split(",")
        if unknown := [f for f in flags if f not in RULES]:
            ap.error(f"--paired-rule {','.join(unknown)}: choose among {', '.join(sorted(RULES))}")
        for flag in flags:
            module, name = RULES[flag]
            if not getattr(module, name):
                ap.error(f"--paired compares {name} on with off: leave it on")
            WATCH[flag]()
        PAIRED, PAIRED_RULE = True, args.paired_rule
    angles = ANGLES if args.angles == "all" else tuple(a.strip() for a in args.angles.split(","))
    if any(a not in ANGLES for a in angles):
        ap.error(f"--angles {args.angles!r}: choose among {', '.join(ANGLES)} or 'all'")
    if not args.merge and args.n == 0 and not args.no_text:  # (--no-text left out is half of --n: none either)
        ap.error("--n 0 and --no-text 0: no frame to screen (give --n or --no-text more than 0)")
    drawn = args.n * len(angles) + (args.no_text if args.no_text is not None else args.n // 2)  # frames a size
    if not args.merge and args.only and all(int(x) >= drawn for x in args.only.split(",")):
        ap.error(f"--only {args.only}: no such frame (a size has frames 0-{drawn - 1})")
    def keep(r: dict[str, Any]) -> None:
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(r, f, indent=1)

    if args.merge:
        runs = [json.loads(open(p, encoding="utf-8").read()) for p in args.merge]
        if args.keep:
            if not args.layout:
                ap.error("--keep needs --layout: the runs the first JSON pooled")
            runs[0] = kept(runs[0], set(args.keep.split(",")), [_layout(x) for x in args.layout])
        r = merge(runs)
    else:
        r = run(args.n, args.seed, no_text=args.no_text, sides=tuple(int(x) for x in args.sides.split(",")), threads=args.threads, on_side=keep,
                only={int(x) for x in args.only.split(",")} if args.only else None, angles=angles)
    keep(r)
    sys.stdout.write(markdown(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
