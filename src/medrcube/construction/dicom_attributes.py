"""What DICOM attribute values say, read as values: the plane of a slice from
ImageOrientationPatient, the modes of an ultrasound Image Type, the tissue regions of an
ultrasound frame; and `SourceError`, the error of a source that cannot be used.

Pure functions of attribute values (numpy only), at the bottom of construction/: the
readers (readers/sources.py), the Stage I mapper (stages/mapping.py) and the privacy
screens (privacy/safeguards.py) all read them, so none of those imports another for them.
None of them guesses: a value that the attributes do not determine comes back as None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pydicom.dataset import Dataset

__all__ = ["OBLIQUE_LIMIT_DEG", "SourceError", "slice_normal", "ultrasound_modes", "ultrasound_regions",
           "view_from_iop"]

# A plane is named only when the slice normal lies within this angle of a patient axis;
# beyond it the slice is oblique and no single plane is the true answer.
OBLIQUE_LIMIT_DEG = 20.0


class SourceError(ValueError):
    """A source file cannot be used; the message names the file and why."""


def slice_normal(iop: Sequence[float]) -> np.ndarray:
    row, col = np.asarray(iop[:3], dtype=float), np.asarray(iop[3:], dtype=float)
    n = np.cross(row, col)
    norm = np.linalg.norm(n)
    if norm == 0:
        raise SourceError(f"ImageOrientationPatient {list(iop)} has parallel row and column vectors")
    unit: np.ndarray = n / norm
    return unit


def view_from_iop(iop: Sequence[float], limit_deg: float = OBLIQUE_LIMIT_DEG) -> str | None:
    """The anatomical plane of a slice from ImageOrientationPatient, or None when oblique.

    DICOM patient axes: x to the patient's left, y posterior, z head. A normal along z is
    axial, along y coronal, along x sagittal.
    """
    n = np.abs(slice_normal(iop))
    axis = int(np.argmax(n))
    if n[axis] < np.cos(np.radians(limit_deg)):
        return None
    return ("sagittal", "coronal", "axial")[axis]


def ultrasound_modes(image_type: Sequence[str] | None) -> tuple[str, ...]:
    """The imaging modes of an ultrasound image from Image Type value 4 (a hex bitmap).

    DICOM PS3.3 C.8.5.6.1.1 defines the bits: 0001 2D imaging, 0002 M-mode, 0004 CW
    Doppler, 0008 PW Doppler, 0010 colour Doppler, 0020 colour M-mode, 0040 3D
    rendering, 0100 colour power mode, 0200 tissue characterisation, 0400 spatially
    related frames. An absent or malformed value gives ().
    """
    bits = {
        0x0001: "2D", 0x0002: "M-mode", 0x0004: "CW Doppler", 0x0008: "PW Doppler",
        0x0010: "Color Doppler", 0x0020: "Color M-mode", 0x0040: "3D Rendering",
        0x0100: "Color Power Mode", 0x0200: "Tissue Characterization", 0x0400: "Spatially-related frames",
    }  # fmt: skip
    if not image_type or len(image_type) < 4:
        return ()
    try:
        value = int(str(image_type[3]).strip(), 16)
    except ValueError:
        return ()
    return tuple(name for bit, name in bits.items() if value & bit)


def ultrasound_regions(ds: Dataset, scale: float = 1.0) -> list[tuple[int, int, int, int]]:
    """Image regions (x0, y0, x1, y1 inclusive) of an ultrasound frame, from SequenceOfUltrasoundRegions.

    Only tissue regions (Region Data Type 1 = tissue, 2 = colour flow) are returned:
    everything outside them is annotation (text, scales, logos). `scale` maps the stored
    coordinates to the pixel grid when an image was downsized after they were written.
    """
    out: list[tuple[int, int, int, int]] = []
    for r in ds.get("SequenceOfUltrasoundRegions", []):
        if int(r.get("RegionDataType", 0)) not in (1, 2):
            continue
        box = (r.RegionLocationMinX0, r.RegionLocationMinY0, r.RegionLocationMaxX1, r.RegionLocationMaxY1)
        x0, y0, x1, y1 = (int(round(int(v) * scale)) for v in box)
        out.append((x0, y0, x1, y1))
    return out
