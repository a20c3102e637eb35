"""Reading real DICOM and NIfTI files into 2-D arrays, with the metadata that answers come from.

The functions here are what a cube recipe calls on a source: locate a file inside an
installed package, read a DICOM dataset (refusing codecs we must not depend on), get its
frames with the modality LUT applied, find a frame's orientation and display window, name
the anatomical plane of a slice from a NIfTI affine, turn an axial slice to the display
(what the attribute values themselves mean, the plane from ImageOrientationPatient and the
ultrasound modes and regions, is in construction/dicom_attributes.py). None of them
guesses: a value that the metadata does not determine comes back as None.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from medrcube.construction.dicom_attributes import OBLIQUE_LIMIT_DEG, SourceError, view_from_iop

if TYPE_CHECKING:
    from pydicom.dataset import Dataset, FileDataset

# Transfer syntaxes whose only pure-pip decoder (pylibjpeg-libjpeg) is GPL: never decode them.
GPL_ONLY_SYNTAXES: dict[str, str] = {
    "1.2.840.10008.1.2.4.57": "JPEG Lossless (Process 14)",
    "1.2.840.10008.1.2.4.70": "JPEG Lossless (Process 14, SV1)",
    "1.2.840.10008.1.2.4.80": "JPEG-LS Lossless",
    "1.2.840.10008.1.2.4.81": "JPEG-LS Near-Lossless",
}
# Files that must never go into a cube: a non-commercial licence (CQ500) or a patient ID
# without a de-identification flag.
EXCLUDED_FILE_PREFIXES: tuple[str, ...] = ("693_", "J2K_pixelrep_mismatch")

PLANES: tuple[str, ...] = ("axial", "coronal", "sagittal")


@dataclass(frozen=True, slots=True)
class PackageFile:
    """A data file shipped inside an installed Python package."""

    distribution: str  # what `pip install` calls it: "pydicom-data"
    module: str  # the importable module that holds it: "data_store"
    relpath: str  # posix path inside the module directory

    @property
    def name(self) -> str:
        return self.relpath.rsplit("/", 1)[-1]

    def path(self) -> Path:
        spec = importlib.util.find_spec(self.module)
        if spec is None or spec.origin is None:
            raise SourceError(
                f"{self.relpath}: the package {self.distribution!r} is not installed; "
                f"install it with `pip install {self.distribution}` (medrcube's [fixtures] extra)"
            )
        p = Path(spec.origin).parent / self.relpath
        if not p.is_file():
            raise SourceError(f"{p}: not found in the installed {self.distribution!r}; a different version may ship other files")
        return p

    def citation(self) -> str:
        return f"{self.distribution}: {self.module}/{self.relpath}"


# -- DICOM -------------------------------------------------------------------------------


def read_dicom(path: str | Path, *, stop_before_pixels: bool = False, package_rules: bool = True) -> FileDataset:
    """Read a DICOM file (optionally gzip-compressed), refusing GPL-only codecs and, with
    `package_rules`, the package files excluded from cubes (EXCLUDED_FILE_PREFIXES).

    `stop_before_pixels` reads the header only (a first pass over a large archive); else
    the pixels are decoded here (pydicom keeps the array for `frames`), so that a damaged
    or truncated file fails as a SourceError naming it, not later as pydicom's own error.
    """
    import pydicom

    p = Path(path)
    if package_rules and p.name.startswith(EXCLUDED_FILE_PREFIXES):
        raise SourceError(f"{p}: this file is excluded from cubes (licence or patient identifier); pick another source")
    try:
        raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else None
        ds = pydicom.dcmread(io.BytesIO(raw) if raw is not None else p, stop_before_pixels=stop_before_pixels)
    except Exception as exc:  # noqa: BLE001 - a damaged file raises anything from struct to KeyError
        raise SourceError(f"{p}: not a readable DICOM file ({type(exc).__name__}: {exc})") from exc
    ts = str(getattr(ds.file_meta, "TransferSyntaxUID", "")) if hasattr(ds, "file_meta") else ""
    if ts in GPL_ONLY_SYNTAXES:
        raise SourceError(
            f"{p}: transfer syntax {GPL_ONLY_SYNTAXES[ts]} ({ts}) needs a GPL decoder, which medrcube does not "
            "depend on; use an uncompressed or JPEG 2000 copy of the image"
        )
    if not stop_before_pixels:
        try:
            _ = ds.pixel_array  # the first pixel access: truncated pixel data, a missing element
        except Exception as exc:  # noqa: BLE001 - decoders fail in many ways (codec, length, attributes)
            raise SourceError(f"{p}: the pixel data cannot be decoded ({type(exc).__name__}: {exc})") from exc
    return ds


def _functional_item(ds: Dataset, index: int, sequence: str, attribute: str) -> Any:
    """An attribute from a frame's functional groups: per-frame first, then shared."""
    for groups_kw, i in (("PerFrameFunctionalGroupsSequence", index), ("SharedFunctionalGroupsSequence", 0)):
        groups = ds.get(groups_kw)
        if groups is None or len(groups) <= i:
            continue
        seq = groups[i].get(sequence)
        if seq and attribute in seq[0]:
            return seq[0][attribute].value
    return None


def frame_attribute(ds: Dataset, index: int, sequence: str, attribute: str) -> Any:
    """A top-level attribute, else the frame's functional-group value (None when absent)."""
    if attribute in ds:
        return ds[attribute].value
    return _functional_item(ds, index, sequence, attribute)


def number_of_frames(ds: Dataset) -> int:
    try:
        return max(1, int(ds.get("NumberOfFrames", 1) or 1))
    except (TypeError, ValueError):
        return 1


def frames(ds: Dataset) -> np.ndarray:
    """All frames as (n, rows, cols) float64 with the rescale applied, or (n, rows, cols, 3) uint8 RGB.

    Palette-colour images are expanded through their lookup table; YBR images arrive as
    RGB (pydicom converts them).
    """
    from pydicom.pixels.processing import apply_color_lut

    arr = ds.pixel_array
    n = number_of_frames(ds)
    pi = str(ds.get("PhotometricInterpretation", ""))
    if pi == "PALETTE COLOR":
        rgb = np.asarray(apply_color_lut(arr, ds), dtype=np.float64)
        peak = 65535.0 if rgb.max() > 255 else 255.0
        arr = np.floor(rgb / peak * 255.0 + 0.5).astype(np.uint8)
    if int(ds.get("SamplesPerPixel", 1)) == 3 or pi == "PALETTE COLOR":
        return arr.reshape((n, *arr.shape[-3:])).astype(np.uint8)
    out = arr.reshape((n, *arr.shape[-2:])).astype(np.float64)
    for i in range(n):
        slope = frame_attribute(ds, i, "PixelValueTransformationSequence", "RescaleSlope")
        intercept = frame_attribute(ds, i, "PixelValueTransformationSequence", "RescaleIntercept")
        out[i] = out[i] * float(slope if slope is not None else 1.0) + float(intercept if intercept is not None else 0.0)
    return out


def frame_window(ds: Dataset, index: int = 0) -> tuple[float, float] | None:
    """The first (centre, width) display window of a frame, or None when the file has none."""
    c = frame_attribute(ds, index, "FrameVOILUTSequence", "WindowCenter")
    w = frame_attribute(ds, index, "FrameVOILUTSequence", "WindowWidth")
    if c is None or w is None:
        return None
    return _first_number(c), _first_number(w)


def _first_number(value: Any) -> float:
    """A DICOM element's number, or the first of a multi-valued one (DS/IS values arrive as either)."""
    return float(value[0]) if isinstance(value, Sequence) and not isinstance(value, str) else float(value)


def frame_orientation(ds: Dataset, index: int = 0) -> tuple[float, ...] | None:
    """ImageOrientationPatient of a frame (top level or plane-orientation functional group)."""
    iop = frame_attribute(ds, index, "PlaneOrientationSequence", "ImageOrientationPatient")
    if iop is None or len(iop) != 6:
        return None
    return tuple(float(v) for v in iop)


def display_axial(img: np.ndarray, iop: Sequence[float]) -> tuple[np.ndarray, str]:
    """Turn an axial slice to the radiological display: anterior up, patient's right on the left.

    That is: image rows run +x (towards the patient's left) and columns +y (posterior)
    in DICOM patient coordinates. Returns the image and what was done ("" if nothing).
    """
    row, col = np.asarray(iop[:3], dtype=float), np.asarray(iop[3:], dtype=float)
    if view_from_iop(iop) != "axial":
        raise SourceError(f"display_axial: ImageOrientationPatient {list(iop)} is not axial")
    steps = []
    out = img
    if abs(row[0]) < abs(row[1]):  # rows run front-back: swap the image axes
        out, row, col = np.swapaxes(out, 0, 1), col, row
        steps.append("transposed")
    if row[0] < 0:
        out = out[:, ::-1]
        steps.append("flipped left-right")
    if col[1] < 0:
        out = out[::-1]
        steps.append("flipped up-down")
    return np.ascontiguousarray(out), ", ".join(steps)


# -- NIfTI -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Volume:
    """A 3-D volume reoriented to RAS+ (axis 0 to the right... axis 2 to the head)."""

    data: np.ndarray  # float64, axes (x, y, z) in RAS+ order
    zooms: tuple[float, float, float]  # voxel size (mm) along those axes
    source_axcodes: tuple[str, str, str]  # nibabel.aff2axcodes of the file's affine
    plane_of_source_axis: tuple[str, str, str]  # plane obtained by fixing each file axis
    source_of_axis: tuple[tuple[int, bool], ...]  # per RAS axis: (file axis, reversed?)
    affine: np.ndarray  # the file's voxel -> world (RAS mm) affine

    def source_index(self, plane: str, index: int) -> tuple[int, int]:
        """(file voxel axis, index along it) of the RAS slice `index` in `plane`."""
        axis = plane_axis(plane)
        src, flipped = self.source_of_axis[axis]
        return src, (self.data.shape[axis] - 1 - index) if flipped else index


def plane_of_axcode(code: str) -> str:
    """Fixing a voxel axis that runs L-R gives a sagittal slice, A-P coronal, S-I axial."""
    return {"L": "sagittal", "R": "sagittal", "A": "coronal", "P": "coronal", "S": "axial", "I": "axial"}[code]


def load_volume(path: str | Path, volume_index: int = 0) -> Volume:
    """Load a NIfTI file's 3-D volume (the `volume_index`-th of a 4-D series) in RAS+ orientation."""
    import nibabel as nib
    from nibabel.orientations import apply_orientation, axcodes2ornt, io_orientation, ornt_transform
    from nibabel.spatialimages import SpatialImage

    img = nib.load(str(path))
    if not isinstance(img, SpatialImage):  # a NIfTI file always loads as one; a CIFTI or other file does not
        raise SourceError(f"{path}: not a NIfTI volume (nibabel read it as {type(img).__name__})")
    data = np.asanyarray(img.dataobj, dtype=np.float64)
    if data.ndim == 4:
        data = data[..., volume_index]
    elif data.ndim != 3:
        raise SourceError(f"{path}: expected a 3-D or 4-D NIfTI volume, got {data.ndim} dimensions")
    axcodes = tuple(nib.aff2axcodes(img.affine))
    if None in axcodes:
        raise SourceError(f"{path}: the affine does not determine the axis directions ({axcodes})")
    ornt = io_orientation(img.affine)
    transform = ornt_transform(ornt, axcodes2ornt(("R", "A", "S")))
    zooms_src = [float(z) for z in img.header.get_zooms()[:3]]
    zooms = [0.0, 0.0, 0.0]
    source_of: list[tuple[int, bool]] = [(0, False)] * 3
    for src_axis, (dst_axis, flip) in enumerate(transform):
        zooms[int(dst_axis)] = zooms_src[src_axis]
        source_of[int(dst_axis)] = (src_axis, bool(flip < 0))
    code_x, code_y, code_z = axcodes  # one code per spatial axis of the 4x4 affine
    return Volume(
        data=apply_orientation(data, transform),
        zooms=(zooms[0], zooms[1], zooms[2]),
        source_axcodes=(code_x, code_y, code_z),
        plane_of_source_axis=(plane_of_axcode(code_x), plane_of_axcode(code_y), plane_of_axcode(code_z)),
        source_of_axis=tuple(source_of),
        affine=np.asarray(img.affine, dtype=np.float64),
    )


def plane_of_file_axis(affine: np.ndarray, axis: int, limit_deg: float = OBLIQUE_LIMIT_DEG) -> str | None:
    """The plane of the slices cut by fixing voxel `axis`, from the affine; None when oblique.

    The slice is spanned by the other two voxel axes; its normal (their cross product in
    world space) must lie within `limit_deg` of a world axis, as for DICOM orientations.
    aff2axcodes alone names the nearest axis of each voxel axis, which a sheared or
    rotated affine can make misleading.
    """
    a, b = (i for i in range(3) if i != axis)
    n = np.cross(np.asarray(affine)[:3, a], np.asarray(affine)[:3, b])
    norm = np.linalg.norm(n)
    if norm == 0:
        raise SourceError(f"affine columns {a} and {b} are parallel")
    n = np.abs(n) / norm
    world = int(np.argmax(n))
    if n[world] < np.cos(np.radians(limit_deg)):
        return None
    return ("sagittal", "coronal", "axial")[world]


def volume_slice(vol: Volume, plane: str, index: int) -> tuple[np.ndarray, tuple[float, float]]:
    """A display slice of a RAS+ volume and its (row, column) pixel size in mm.

    Radiological display: axial and coronal slices put the patient's right on the image's
    left, superior (or anterior, for axial) at the top; sagittal slices face left.
    """
    x, y, z = vol.zooms
    d = vol.data
    if plane == "axial":
        sl, spacing = d[:, :, index].T[::-1, ::-1], (y, x)
    elif plane == "coronal":
        sl, spacing = d[:, index, :].T[::-1, ::-1], (z, x)
    elif plane == "sagittal":
        sl, spacing = d[index, :, :].T[::-1, ::-1], (z, y)
    else:
        raise ValueError(f"plane must be one of {PLANES}, got {plane!r}")
    return np.ascontiguousarray(sl), spacing


def plane_axis(plane: str) -> int:
    """The RAS+ axis that is fixed to cut a slice in `plane`."""
    return {"sagittal": 0, "coronal": 1, "axial": 2}[plane]
