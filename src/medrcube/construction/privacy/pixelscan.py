"""The final leak scan of the exported pixels: a second reading that the masking never saw.

The text scan (`safeguards.scan_tree`) reads every byte of every exported file, but an
identifying line burned into a frame is pixels, not bytes. Reading the exported frames
again exactly as the masking read them would repeat its blind spots: a line its detector
missed would be missed again, and the build would pass. So every exported PNG is read
as images the masking never saw (`TRANSFORMS`): turned a quarter and inverted (light text
on dark becomes dark on light), and turned half round at another scale. The detector
meets different pixels at a different size, so what it missed once it does not miss for
the same reason; a line at any right angle is a row or a column in each, and rows and
columns are read upright, both ways round (`oriented.read`), so no direction is favoured.

An image fails the scan when what is read there holds an identifying value of the build
in any spelling (`screening.Identities`: the headers' values, the labels' private columns,
the folder and file names of the sources, the header free text), or when any region reads
as LEGIBLE letters or digits or more with the recogniser's confidence at least CONFIDENT:
an export should carry no legible text at all, identifying or not. A hit names the file
and the channel ("pixels (PatientName)", or "pixels: legible text in region (x0, y0, x1,
y1)" in the exported image's pixels), never the text; the build then deletes its export.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medrcube.construction.privacy import multiscale, ocr, oriented
from medrcube.construction.privacy.safeguards import Leak
from medrcube.construction.privacy.screening import Identities

# (name, quarter turns counter-clockwise, inverted, long side of the whole view): readings the
# masking never makes (it reads the frame as shown, upright, its whole view at multiscale.WHOLE_SIDE).
TRANSFORMS: tuple[tuple[str, int, bool, int], ...] = (
    ("turned a quarter, inverted", 1, True, multiscale.WHOLE_SIDE),
    ("turned half round, at 736 px", 2, False, 736),
)
LEGIBLE = 4  # letters or digits in one region: legible text (as linemask.LEGIBLE)
CONFIDENT = 0.8  # the recogniser's confidence a legible region must reach (anatomy read as "IIII" stays below)
# px: a larger exported image is also read in the stroke map's crops (small text); an export up to
# this size is read whole at or above full resolution, where its smallest text is legible to the detector.
CROPS_ABOVE = 1024


@dataclass(frozen=True, slots=True)
class Reading:
    """One region read by the scan: its box in the exported image's pixels, the text (never written) and the confidence."""

    box: tuple[int, int, int, int]
    text: str
    score: float


@dataclass(frozen=True, slots=True)
class PixelScan:
    images: int  # distinct exported images read
    regions: int  # text regions the reader found in them (after masking)
    leaks: tuple[Leak, ...]


def _pixels(data: bytes) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("L"), dtype=np.float64) / 255.0


def _back(quad: np.ndarray, turns: int, shape: tuple[int, int]) -> np.ndarray:
    """Points of an image turned `turns` quarters counter-clockwise (np.rot90) back in the original's pixels."""
    h, w = shape
    x, y = quad[:, 0], quad[:, 1]
    if turns % 4 == 1:
        return np.stack([w - 1 - y, x], axis=1)
    if turns % 4 == 2:
        return np.stack([w - 1 - x, h - 1 - y], axis=1)
    if turns % 4 == 3:
        return np.stack([y, h - 1 - x], axis=1)
    return quad


def _read_both_ways(reader: ocr.TextReader, img: np.ndarray, region: ocr.TextRegion) -> tuple[str, float]:
    if region.quad and oriented.is_oriented(region.quad):
        text = oriented.read(reader, img, oriented.line_of(region.quad))
        return text, (1.0 if text else 0.0)  # a turned line: read upright, both ways (its own confidence is not kept)
    part = multiscale.crop(img, region.box)
    reads = [reader.recognise_scored(part), reader.recognise_scored(np.ascontiguousarray(np.asarray(part)[::-1, ::-1]))]
    return max(reads, key=lambda r: (oriented.letters_or_digits(r[0]) if r[1] >= CONFIDENT else 0, r[1]))


def independent_read(reader: ocr.TextReader, pixels: np.ndarray) -> list[Reading]:
    """What the scan reads in an image (gray [0, 1]): every region of every transformed view, its box mapped back."""
    h, w = pixels.shape[:2]
    out: list[Reading] = []
    for _, turns, inverted, side in TRANSFORMS:
        img = np.ascontiguousarray(np.rot90(pixels, turns))
        if inverted:
            img = 1.0 - img
        regions = multiscale.detect_whole(reader, img, side)
        if max(h, w) > CROPS_ABOVE:
            regions += multiscale.detect(reader, img, turned=False)
        for r in regions:
            text, score = _read_both_ways(reader, img, r)
            quad = np.asarray(r.quad if r.quad else [(r.box[0], r.box[1]), (r.box[2], r.box[3])], dtype=np.float64)
            out.append(Reading(oriented.bbox(_back(quad, turns, img.shape[:2]), (h, w)), text, score))
    return out


def legible(reading: Reading) -> bool:
    return oriented.letters_or_digits(reading.text) >= LEGIBLE and reading.score >= CONFIDENT


def scan_images(root: Path, files: Iterable[Path], identities: Identities, reader: ocr.TextReader) -> PixelScan:
    """Read every image (PNG files under `root`) as the masking never did; find identifying values and legible text."""
    seen: dict[str, list[str]] = {}  # image digest -> channels found (an image exported twice is read once)
    leaks: list[Leak] = []
    regions = 0
    for path in sorted(files):
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest not in seen:
            found = independent_read(reader, _pixels(data))
            regions += len(found)
            channels = [f"pixels ({src})" for src in identities.find(" ".join(r.text for r in found))] if found else []
            channels += [f"pixels: legible text in region {r.box}" for r in found if legible(r)]
            seen[digest] = sorted(set(channels))
        rel = path.relative_to(root).as_posix()
        leaks += [Leak(rel, channel) for channel in seen[digest]]
    return PixelScan(len(seen), regions, tuple(leaks))
