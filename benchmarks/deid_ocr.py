"""Detection of burned-in text by the build's OCR screen, on generated frames.

    .venv/bin/python -m benchmarks.deid_ocr                 # 240 frames with text, 120 without (~4 min on 2 cores)
    .venv/bin/python -m benchmarks.deid_ocr --n 40 --json out.json

Frames: CT-, radiograph- and MR-like backgrounds and plain noise (synthetic.background),
256, 512 and 1024 pixels square. Frames with text carry 1 to 4 lines of identifying text
(invented names in the spellings consoles write, birth and study dates in five formats,
record, accession and study numbers) in 7 faces (Pillow's scalable and bitmap faces; DejaVu
Sans, Sans Bold, Sans Mono, Serif and STIX from matplotlib's wheel), 5 sizes (7 to 24
pixels at 512, scaled with the frame), 3 contrasts (white or black; 0.3 or 0.15 of full
scale from the local background, brighter or darker) and 6 positions (four corners, a
top or bottom strip, over the anatomy). The same generator makes the frames without text.

What is measured, with the build's own code (textscreen.text_regions, then grow):
- line recall: a line counts as masked when every one of its glyph pixels lies in a
  masked box (coverage 1.0); also with coverage >= 0.9, and per font, size, contrast,
  position and background;
- legible after masking: the OCR model reads the masked frame, and a line counts as
  legible when 4 or more of its characters in a row are read back (case and separators
  ignored). That read goes through the same detector, so it cannot see what the detector
  missed; hence also the detector-free check: the recogniser alone on each line's own
  box (padded), on the frame before masking and, for the lines not wholly masked, after;
- false-mask rate: the share of frames without text that get any masked region, and
  the share of their pixels masked; on frames with text, the share of pixels masked
  outside the lines' own boxes;
- seconds per frame of the screen, wall and CPU (two detection passes, plus recognition
  when a tall region is met); the machine is shared, so CPU is the steadier figure.

Prints a Markdown summary (docs/construction.md quotes it) and, with --json, the figures.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from typing import Any

import numpy as np

from medrcube.construction.privacy import ocr, synthetic
from medrcube.construction.privacy.textscreen import grow, text_regions

SIDES = (256, 512, 1024)
SIZES = (7, 9, 12, 16, 24)  # pixels at 512; scaled with the frame
CONTRASTS = ("full", "medium", "low")
POSITIONS = ("top left", "top right", "bottom left", "bottom right", "top strip", "over anatomy")
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


def _xy(position: str, tw: int, th: int, side: int, used: int, rng: np.random.Generator) -> tuple[int, int]:
    """Where a line goes; `used` is the height the position's earlier lines take (with their spacing)."""
    m = max(2, side // 64)
    if position == "over anatomy":
        return int(rng.integers(side // 4, max(side // 4 + 1, 3 * side // 4 - tw))), int(rng.integers(side // 3, 2 * side // 3))
    x = m if "left" in position or position == "top strip" else max(m, side - m - tw)
    if position == "top strip":
        x = max(m, (side - tw) // 2)
    y = m + used if position.startswith("top") else side - m - th - used
    return x, max(0, y)


def _value(contrast: str, bg: float, rng: np.random.Generator) -> float:
    if contrast == "full":
        return 1.0 if bg < 0.6 else 0.0
    delta = 0.3 if contrast == "medium" else 0.15
    return float(np.clip(bg + delta if bg + delta <= 1.0 and (bg < 0.5 or rng.random() < 0.5) else bg - delta, 0, 1))


def make_frame(rng: np.random.Generator, with_text: bool) -> tuple[np.ndarray, list[tuple[synthetic.Burned, dict[str, str]]], dict[str, Any]]:
    side = int(SIDES[rng.integers(len(SIDES))])
    kind = synthetic.BACKGROUNDS[rng.integers(len(synthetic.BACKGROUNDS))]
    img = synthetic.background(kind, side, side, rng)
    lines: list[tuple[synthetic.Burned, dict[str, str]]] = []
    if with_text:
        position = POSITIONS[rng.integers(len(POSITIONS))]
        used = 0
        for _ in range(int(rng.integers(1, 5)) if position != "over anatomy" else 1):
            face = list(synthetic.FONT_FILES)[rng.integers(len(synthetic.FONT_FILES))]
            size0 = int(SIZES[rng.integers(len(SIZES))])
            size = max(7, round(size0 * side / 512))
            contrast = CONTRASTS[rng.integers(len(CONTRASTS))]
            text = identifying_text(rng)
            tw, th = synthetic.text_size(text, face, size)
            x, y = _xy(position, tw, th, side, used, rng)
            used += th + max(2, th // 3)  # a console's line spacing
            region = img[y : y + th, x : x + tw]
            value = _value(contrast, float(region.mean()) if region.size else 0.3, rng)
            img, b = synthetic.burn(img, text, (x, y), face, size, value)
            if b.glyphs.any():
                lines.append((b, {"font": face, "size": f"{size0} px at 512", "contrast": contrast, "position": position,
                                  "background": kind, "side": str(side)}))  # fmt: skip
    return img, lines, {"side": side, "background": kind}


def _compact(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def legible(line: str, read: str) -> bool:
    """4 or more characters of the line in a row among what was read back."""
    a, b = _compact(line), _compact(read)
    return any(a[i : i + 4] in b for i in range(max(0, len(a) - 3))) if len(a) >= 4 else a in b and bool(a)


def read_line(reader: ocr.TextReader, img: np.ndarray, box: tuple[int, int, int, int]) -> str:
    """The recogniser alone (no detector) on the line's own box, padded: what a reader of that spot would see."""
    x0, y0, x1, y1 = box
    p = max(2, (y1 - y0) // 2)
    crop = img[max(0, y0 - p) : y1 + p, max(0, x0 - p) : x1 + p]
    if crop.size == 0 or float(crop.std()) == 0.0:
        return ""
    res = reader.engine(ocr.to_bgr8(crop), use_det=False, use_cls=False, use_rec=True)
    return " ".join(str(t) for t in (getattr(res, "txts", None) or ()))


def run(n: int, seed: int, no_text: int | None = None) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    reader = ocr.TextReader()
    reader.detect(np.zeros((64, 64)))  # load the model outside the timing
    per: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    lines_total = masked_full = masked_90 = legible_after = readable_before = readable_after = 0
    false_frames = 0
    false_area: list[float] = []
    over_area: list[float] = []
    seconds: dict[int, list[float]] = defaultdict(list)
    cpu: list[float] = []
    n_blank = no_text if no_text is not None else n // 2
    for i in range(n + n_blank):
        with_text = i < n
        img, lines, info = make_frame(rng, with_text)
        t0, c0 = time.perf_counter(), time.process_time()
        reader._memo.clear()  # every frame is new: time the model, not the memo
        found, _ = text_regions(reader, img)
        seconds[info["side"]].append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        boxes = [grow(r.box, img.shape) for r in found]
        mask = np.zeros(img.shape, dtype=bool)
        for x0, y0, x1, y1 in boxes:
            mask[y0:y1, x0:x1] = True
        if not with_text:
            false_frames += bool(boxes)
            false_area.append(float(mask.mean()))
            continue
        truth = np.zeros(img.shape, dtype=bool)
        for b, _ in lines:
            x0, y0, x1, y1 = b.box
            truth[y0:y1, x0:x1] = True
        over_area.append(float((mask & ~truth).mean()))
        masked_img = np.where(mask, 0.0, img)
        read = " ".join(r.text for r in reader.read(masked_img)) if lines else ""
        for b, facets in lines:
            cov = synthetic.coverage(b, mask)
            ok = cov >= 1.0
            lines_total += 1
            masked_full += ok
            masked_90 += cov >= 0.9
            leak = legible(b.text, read)
            legible_after += leak
            # The detector-free check: the recogniser on the line's own box, before and after masking.
            before = legible(b.text, read_line(reader, img, b.box))
            readable_before += before
            readable_after += before and not ok and legible(b.text, read_line(reader, masked_img, b.box))
            for facet, value in facets.items():
                per[facet][value][0] += ok
                per[facet][value][1] += 1
    all_s = [s for v in seconds.values() for s in v]
    return {
        "frames_with_text": n, "frames_without_text": n_blank, "lines": lines_total, "seed": seed,
        "recall": masked_full / lines_total if lines_total else None,
        "recall_coverage_90": masked_90 / lines_total if lines_total else None,
        "legible_after_masking": legible_after / lines_total if lines_total else None,
        "legible_lines": legible_after,
        "readable_before": readable_before,
        "readable_after": readable_after,
        "false_mask_rate": false_frames / n_blank if n_blank else None,
        "false_mask_frames": false_frames,
        "false_mask_area": float(np.mean(false_area)) if false_area else None,
        "over_mask_area_on_text_frames": float(np.mean(over_area)) if over_area else None,
        "seconds_per_frame": float(np.median(all_s)) if all_s else None,
        "cpu_seconds_per_frame": float(np.median(cpu)) if cpu else None,
        "seconds_per_frame_by_side": {str(k): float(np.median(v)) for k, v in sorted(seconds.items())},
        "by": {facet: {v: {"masked": c[0], "lines": c[1]} for v, c in sorted(vals.items())} for facet, vals in per.items()},
        "engine": ocr.engine_name(),
    }  # fmt: skip


def markdown(r: dict[str, Any]) -> str:
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    out = [f"Engine: {r['engine']}. Seed {r['seed']}: {r['frames_with_text']} frames with {r['lines']} lines of text, "
           f"{r['frames_without_text']} frames without text.", "",
           "| figure | value |", "|---|---:|",
           f"| line recall (every glyph pixel masked) | {pct(r['recall'])} |",
           f"| line recall (90% of glyph pixels masked) | {pct(r['recall_coverage_90'])} |",
           f"| lines still legible after masking (4+ characters read back) | {pct(r['legible_after_masking'])} ({r['legible_lines']}) |",
           f"| lines the recogniser reads on their own box, before masking | {r['readable_before']} of {r['lines']} |",
           f"| ... of those, still read on their own box after masking | {r['readable_after']} ({pct(r['readable_after'] / r['readable_before'] if r['readable_before'] else None)}) |",
           f"| false-mask rate (frames without text given any mask) | {pct(r['false_mask_rate'])} ({r['false_mask_frames']}) |",
           f"| share of pixels masked on frames without text | {pct(r['false_mask_area'])} |",
           f"| share of pixels masked outside the text on frames with text | {pct(r['over_mask_area_on_text_frames'])} |",
           f"| seconds per frame, wall (median; by side {', '.join(f'{k}: {v:.2f}' for k, v in r['seconds_per_frame_by_side'].items())}) | {r['seconds_per_frame']:.2f} |",
           f"| CPU seconds per frame (median, both cores counted) | {r['cpu_seconds_per_frame']:.2f} |",
           ""]  # fmt: skip
    for facet, vals in r["by"].items():
        if facet == "side":
            continue
        cells = ", ".join(f"{v} {pct(c['masked'] / c['lines'])} ({c['lines']})" for v, c in vals.items())
        out.append(f"- recall by {facet}: {cells}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.deid_ocr", description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=240, help="frames with text (default %(default)s); half as many without")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args(argv)
    r = run(args.n, args.seed)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(r, f, indent=1)
    sys.stdout.write(markdown(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
