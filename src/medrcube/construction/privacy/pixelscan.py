"""The final leak scan of the exported pixels: OCR over every exported image.

The text scan (`safeguards.scan_tree`) reads every byte of every exported file, but an
identifying line burned into a frame is pixels, not bytes. So every exported PNG is read
again by the OCR screen's own reader (`multiscale.read`: every view, each region
recognised) and what it reads is compared, in every spelling (`screening.Identities`),
with the identifying values of the build: the headers' values, the labels' private
columns, the folder and file names of the sources (`sourcenames`), the header free text.
A hit names the file and the channel ("pixels", and which kind of value), never the
value; the build then deletes its export.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medrcube.construction.privacy import multiscale, ocr
from medrcube.construction.privacy.safeguards import Leak
from medrcube.construction.privacy.screening import Identities


@dataclass(frozen=True, slots=True)
class PixelScan:
    images: int  # distinct exported images read
    regions: int  # text regions the reader found in them (after masking)
    leaks: tuple[Leak, ...]


def _pixels(data: bytes) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB" if im.mode in ("RGB", "RGBA", "P") else "L"), dtype=np.float64) / 255.0


def scan_images(root: Path, files: Iterable[Path], identities: Identities, reader: ocr.TextReader) -> PixelScan:
    """Read every image (PNG files under `root`) and find the identifying values in their text."""
    seen: dict[str, list[str]] = {}  # image digest -> sources found (an image exported twice is read once)
    leaks: list[Leak] = []
    regions = 0
    for path in sorted(files):
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest not in seen:
            found = multiscale.read(reader, _pixels(data))
            regions += len(found)
            seen[digest] = identities.find(" ".join(r.text for r in found)) if found else []
        rel = path.relative_to(root).as_posix()
        leaks += [Leak(rel, f"pixels ({src})") for src in seen[digest]]
    return PixelScan(len(seen), regions, tuple(leaks))
