"""What every source family of the mini cube shares: the Picture it hands to the assembly,
where its package files live, and the helpers that turn DICOM attributes into Facts.

A `Picture` is one output image before lesion insertion, with everything known about it.
The family modules (`volumes`, `dicom_mr`, `dicom_ct`, `radiographs`, `ultrasound`) only
read sources and say what the metadata supports; `placement` multiplies a picture into
lesion copies and draws the lesions; `assembly` turns pictures into items and files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

import numpy as np

from medrcube.construction import imageio
from medrcube.construction.dicom_attributes import SourceError, view_from_iop
from medrcube.construction.readers.sources import PackageFile, frame_orientation
from medrcube.construction.stages.questions import Fact, modality_fact, plane_fact

if TYPE_CHECKING:
    from pydicom.dataset import Dataset

MAX_SIDE = 512
SEED = "medrcube-mini-v1"
DICOM_MODALITY: dict[str, str] = {"CT": "CT", "MR": "MRI", "CR": "X-Ray", "DX": "X-Ray", "US": "US"}
LESION_TASKS: tuple[str, ...] = ("Abnormality Diagnosis", "ROI Grounding", "Severity Grading")
# A lesion copy beyond the first few of a slice asks where and how large, not whether:
# "is there a lesion?" on every copy would make the presence cells almost all "Yes".
LOCATION_TASKS: tuple[str, ...] = ("ROI Grounding", "Severity Grading")


def pydicom_file(name: str) -> PackageFile:
    return PackageFile("pydicom", "pydicom", f"data/test_files/{name}")


def pydicom_data_file(name: str) -> PackageFile:
    return PackageFile("pydicom-data", "data_store", f"data/{name}")


def nibabel_file(rel: str) -> PackageFile:
    return PackageFile("nibabel", "nibabel", rel)


def dipy_file(name: str) -> PackageFile:
    return PackageFile("dipy", "dipy", f"data/files/{name}")


@dataclass
class Picture:
    """One output image before lesion insertion, with what is known about it."""

    dataset: str
    stem: str  # internal label (seeds, README); the file itself is numbered, hinting at no answer
    pixels: np.ndarray  # [0, 1] floats at output size, H x W or H x W x 3
    modality: str  # canonical axis value
    part: str
    source: PackageFile
    locator: str  # where in the source: "frame 3 of 10", "axial slice 12 of 25"
    processing: str  # window, crop, mask, resize (for the README)
    facts: list[Fact]
    lesion: bool = False  # draw a synthetic lesion into this picture
    normal_ok: bool = False  # an unmodified copy may be asked "no lesion"
    allowed: np.ndarray | None = None  # where a lesion may go (default: the body)
    polarity: int = 1
    contrast: float = 0.5
    # Which lesion items to ask. Presence alone when the source shows real round
    # opacities of its own, which would make "the lesion" of a location or size item ambiguous.
    lesion_tasks: tuple[str, ...] = LESION_TASKS


# -- metadata helpers ----------------------------------------------------------------------


def _is_multi(value: object) -> TypeGuard[Iterable[object]]:
    return isinstance(value, (list, tuple)) or type(value).__name__ == "MultiValue"


def tagref(keyword: str, value: object) -> str:
    """'Modality (0008,0060) = 'CT'' for derivation texts."""
    from pydicom.datadict import tag_for_keyword

    tag = tag_for_keyword(keyword)
    where = f"({tag >> 16:04X},{tag & 0xFFFF:04X})" if tag is not None else ""
    if _is_multi(value):
        shown = "[" + ", ".join(repr(str(v)) for v in value) + "]"
    else:
        shown = repr(str(value))
    return f"{keyword} {where} = {shown}"


def _norm(value: object) -> object:
    return [str(x).strip() for x in value] if _is_multi(value) else str(value).strip()


def expect(ds: Dataset, keyword: str, expected: object) -> object:
    """The value of a technical attribute, which must equal `expected` (the recipe's premise)."""
    got = ds.get(keyword)
    value = got if not hasattr(got, "value") else got.value
    if got is None or _norm(value) != _norm(expected):
        raise SourceError(f"{keyword} is {value!r}, expected {expected!r}: the source file changed; review the recipe")
    return value


def dicom_modality(ds: Dataset, pf: PackageFile) -> tuple[str, Fact]:
    raw = str(ds.Modality)
    if raw not in DICOM_MODALITY:
        raise SourceError(f"{pf.citation()}: Modality {raw!r} has no canonical value")
    note = " (computed radiography: an X-ray technique)" if raw == "CR" else ""
    return DICOM_MODALITY[raw], modality_fact(DICOM_MODALITY[raw], f"DICOM {tagref('Modality', raw)}{note}.")


def iop_plane_fact(ds: Dataset, frame: int) -> Fact:
    iop = frame_orientation(ds, frame)
    plane = view_from_iop(iop) if iop else None
    if plane is None or iop is None:
        raise SourceError(f"ImageOrientationPatient {iop} does not name a plane")
    axis = "head-foot" if plane == "axial" else "front-back" if plane == "coronal" else "left-right"
    return plane_fact(
        plane,
        f"ImageOrientationPatient {list(iop)}: the slice normal (row x column) lies along the patient's "
        f"{axis} axis, so the slice is {plane}.",
        "DICOM ImageOrientationPatient",
    )


def output_shape(rows_mm: float, cols_mm: float, long_side: int) -> tuple[int, int]:
    if long_side > MAX_SIDE:
        raise ValueError(f"long side {long_side} exceeds the cube's {MAX_SIDE} px limit")
    return imageio.fit_shape(rows_mm, cols_mm, long_side)


def resize_mask(mask: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    return np.asarray(imageio.resize(mask.astype(np.float64), shape) > 0.5)


def fractions(n: int, low: float, high: float) -> Sequence[float]:
    """`n` evenly spaced fractions from `low` to `high` (slice positions in a volume)."""
    return [low + (high - low) * i / max(n - 1, 1) for i in range(n)]
