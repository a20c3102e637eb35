"""The bundled mini cube: real images from installed PyPI packages, answers from real metadata.

    python -m medrcube.construction.mini.cube [OUT_DIR]        # default: fixtures/mini

rebuilds `OUT_DIR` (release layout: `<dataset>/test.json` + `<dataset>/images/*.png`,
plus README.md and NOTICE) deterministically from pydicom, pydicom-data, nibabel and
dipy: fixed seeds, sorted iteration, and a metadata-free PNG encoder, so the same
installed packages always give the same bytes.

This module is one *recipe*: it says which files to read, which frame or slice to cut,
how to window and crop them, and which Fact each piece of metadata supports. The reusable
parts live beside it (`sources`, `deid`, `lesions`, `questions`, `imageio`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

from medrcube.construction.privacy import deid
from medrcube.construction.readers import imageio
from medrcube.construction.stages import lesions
from medrcube.construction.mini import docs as mini_docs
from medrcube.construction.stages.questions import (
    BONE_LESION_DIAGNOSES,
    CHEST_PROJECTIONS,
    CT_PROTOCOLS,
    LIMB_PROJECTIONS,
    MRI_PROTOCOLS,
    Q_CT_PROTOCOL,
    Q_MRI_PROTOCOL,
    Q_US_MODE,
    US_MODES,
    Fact,
    ItemWriter,
    lesion_facts,
    modality_fact,
    plane_fact,
    projection_fact,
    protocol_fact,
    region_fact,
    stable_seed,
)
from medrcube.construction.readers.sources import (
    PackageFile,
    SourceError,
    frame_orientation,
    frame_window,
    frames,
    OBLIQUE_LIMIT_DEG,
    load_volume,
    plane_axis,
    plane_of_file_axis,
    read_dicom,
    display_axial,
    ultrasound_modes,
    ultrasound_regions,
    view_from_iop,
    volume_slice,
)
from medrcube.taxonomy import TASK_NAMES, Level, task_abbrev, task_level

DEFAULT_OUT = Path("fixtures/mini")
MAX_SIDE = 512
SEED = "medrcube-mini-v1"
DICOM_MODALITY: dict[str, str] = {"CT": "CT", "MR": "MRI", "CR": "X-Ray", "DX": "X-Ray", "US": "US"}


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
    lesion_tasks: tuple[str, ...] = ("Abnormality Diagnosis", "ROI Grounding", "Severity Grading")


# -- metadata helpers ----------------------------------------------------------------------


def tagref(keyword: str, value: object) -> str:
    """'Modality (0008,0060) = 'CT'' for derivation texts."""
    from pydicom.datadict import tag_for_keyword

    tag = tag_for_keyword(keyword)
    where = f"({tag >> 16:04X},{tag & 0xFFFF:04X})" if tag is not None else ""
    if isinstance(value, (list, tuple)) or type(value).__name__ == "MultiValue":
        shown = "[" + ", ".join(repr(str(v)) for v in value) + "]"
    else:
        shown = repr(str(value))
    return f"{keyword} {where} = {shown}"


def expect(ds, keyword: str, expected: object) -> object:
    """The value of a technical attribute, which must equal `expected` (the recipe's premise)."""
    got = ds.get(keyword)
    value = got if not hasattr(got, "value") else got.value
    norm = lambda v: [str(x).strip() for x in v] if isinstance(v, (list, tuple)) or type(v).__name__ == "MultiValue" else str(v).strip()  # noqa: E731
    if got is None or norm(value) != norm(expected):
        raise SourceError(f"{keyword} is {value!r}, expected {expected!r}: the source file changed; review the recipe")
    return value


def dicom_modality(ds, pf: PackageFile) -> tuple[str, Fact]:
    raw = str(ds.Modality)
    if raw not in DICOM_MODALITY:
        raise SourceError(f"{pf.citation()}: Modality {raw!r} has no canonical value")
    note = " (computed radiography: an X-ray technique)" if raw == "CR" else ""
    return DICOM_MODALITY[raw], modality_fact(DICOM_MODALITY[raw], f"DICOM {tagref('Modality', raw)}{note}.")


def iop_plane_fact(ds, frame: int) -> Fact:
    iop = frame_orientation(ds, frame)
    plane = view_from_iop(iop) if iop else None
    if plane is None:
        raise SourceError(f"ImageOrientationPatient {iop} does not name a plane")
    return plane_fact(
        plane,
        f"ImageOrientationPatient {list(iop)}: the slice normal (row x column) lies along the patient's "
        f"{'head-foot' if plane == 'axial' else 'front-back' if plane == 'coronal' else 'left-right'} axis, "
        f"so the slice is {plane}.",
        "DICOM ImageOrientationPatient",
    )


def output_shape(rows_mm: float, cols_mm: float, long_side: int) -> tuple[int, int]:
    if long_side > MAX_SIDE:
        raise ValueError(f"long side {long_side} exceeds the cube's {MAX_SIDE} px limit")
    return imageio.fit_shape(rows_mm, cols_mm, long_side)


def resize_mask(mask: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    return imageio.resize(mask.astype(np.float64), shape) > 0.5


# -- nibabel and dipy: brain volumes -------------------------------------------------------

_VOLUME_DOCS: dict[str, str] = {
    "anatomical.nii": "nibabel's structural (anatomical) brain test volume, SPM-normalised ('spm - 3D normalized' in its header)",
    "example4d.nii.gz": "nibabel's 4-D functional brain test series (an FSL NIfTI file; the first volume is used)",
    "S0_10slices.nii.gz": "dipy's 10-slice S0 (non-diffusion-weighted) brain test volume",
    "aniso_vox.nii.gz": "dipy's anisotropic-voxel brain test volume",
}


def _volume_pictures(dataset: str, pf: PackageFile, cuts: list[tuple[str, float]], long_side: int = 256) -> list[Picture]:
    vol = load_volume(pf.path())
    body = vol.data[vol.data > 0]
    low, high = np.percentile(body if body.size else vol.data, [1.0, 99.5])
    doc = _VOLUME_DOCS[pf.name]
    stem_base = pf.name.split(".")[0].lower()
    out = []
    for n, (plane, frac) in enumerate(cuts):
        size = vol.data.shape[plane_axis(plane)]
        index = int(round(frac * (size - 1)))
        src_axis, src_index = vol.source_index(plane, index)
        if vol.plane_of_source_axis[src_axis] != plane or plane_of_file_axis(vol.affine, src_axis) != plane:
            raise SourceError(f"{pf.citation()}: fixing file axis {src_axis} does not cut a true {plane} slice")
        sl, (dr, dc) = volume_slice(vol, plane, index)
        img = imageio.resize(imageio.window(sl, low, high), output_shape(sl.shape[0] * dr, sl.shape[1] * dc, long_side))
        facts = [
            modality_fact("MRI", f"NIfTI has no modality field; documented source: {doc}.", "documented source"),
            plane_fact(
                plane,
                f"nibabel.aff2axcodes(affine) = {vol.source_axcodes}: voxel axis {src_axis} runs towards "
                f"{vol.source_axcodes[src_axis]}, so fixing it (at index {src_index}, 0-based, of {size}) cuts "
                f"{'an' if plane == 'axial' else 'a'} {plane} slice (its normal, from the affine, lies within "
                f"{OBLIQUE_LIMIT_DEG:g} degrees of that axis).",
                "NIfTI affine",
            ),
            region_fact("Brain", f"Documented source: {doc}.", "documented source"),
        ]
        out.append(
            Picture(
                dataset=dataset, stem=f"{stem_base}_{n + 1:02d}", pixels=img, modality="MRI", part="Brain", source=pf,
                locator=f"voxel axis {src_axis} index {src_index} (0-based) of {size}",
                processing=f"reoriented to RAS, window 1-99.5th percentile of the volume, resampled to {img.shape[1]}x{img.shape[0]}",
                facts=facts, lesion=n % 2 == 1, normal_ok=True,
            )  # fmt: skip
        )
    return out


def nibabel_brain() -> list[Picture]:
    cuts_anat = [("axial", 0.5), ("coronal", 0.4), ("coronal", 0.5), ("coronal", 0.62), ("sagittal", 0.38), ("sagittal", 0.5), ("sagittal", 0.64)]
    # example4d covers a 53 mm slab: only its axial slices show a whole cross-section.
    cuts_4d = [("axial", 0.45), ("axial", 0.62)]
    pics = _volume_pictures("nibabel-brain", nibabel_file("tests/data/anatomical.nii"), cuts_anat)
    pics += _volume_pictures("nibabel-brain", nibabel_file("tests/data/example4d.nii.gz"), cuts_4d)
    return pics


def dipy_brain() -> list[Picture]:
    pics = _volume_pictures("dipy-brain", dipy_file("S0_10slices.nii.gz"), [("axial", 0.44), ("axial", 0.67)])
    # aniso_vox is acquired 35 degrees off the axial plane: only its sagittal cuts are true
    # planes (plane_of_file_axis refuses the others), so only those are used.
    cuts = [("sagittal", 0.35), ("sagittal", 0.5), ("sagittal", 0.64)]
    pics += _volume_pictures("dipy-brain", dipy_file("aniso_vox.nii.gz"), cuts)
    return pics


# -- pydicom / pydicom-data / nibabel DICOM: MRI -------------------------------------------


def pydicom_mr() -> list[Picture]:
    ds_name = "pydicom-mr"
    pics: list[Picture] = []

    # emri_small: an enhanced MR head volume (3D T1 TFE), 10 frames of 64 x 64.
    pf = pydicom_data_file("emri_small.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    it = expect(ds, "ImageType", ["ORIGINAL", "PRIMARY", "T1", "NONE"])
    contrast = expect(ds, "AcquisitionContrast", "T1")
    seq = expect(ds, "PulseSequenceName", "T1TFE")
    body = expect(ds, "BodyPartExamined", "HEAD")
    ipr = protocol_fact(
        Q_MRI_PROTOCOL, MRI_PROTOCOLS, "T1-weighted",
        f"{tagref('ImageType', it)} (value 3 'T1'), {tagref('AcquisitionContrast', contrast)} and "
        f"{tagref('PulseSequenceName', seq)} (T1 turbo field echo).",
        "DICOM sequence tags",
    )  # fmt: skip
    organ = region_fact("Brain", f"{tagref('BodyPartExamined', body)}; the frames show cerebral cortex.", "DICOM BodyPartExamined")
    data = frames(ds)
    for n, f in enumerate((1, 3, 6, 8)):
        img = imageio.resize(imageio.percentile_window(data[f]), (256, 256))
        pics.append(
            Picture(
                ds_name, f"emri_{n + 1:02d}", img, modality, "Brain", pf, f"frame {f + 1} of {len(data)}",
                "window 1-99.5th percentile, resampled 64 -> 256 px", [mfact, ipr, organ],
                lesion=n % 2 == 1, normal_ok=True,
            )  # fmt: skip
        )

    # A time-of-flight angiogram MIP shipped with nibabel's DICOM tests.
    pf = nibabel_file("nicom/tests/data/slicethickness_empty_string.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    proto = expect(ds, "ProtocolName", "TOF_3D_multi-slab")
    it = ds.ImageType
    if "PROJECTION IMAGE" not in it or "CSA MIP" not in it:
        raise SourceError(f"{pf.citation()}: ImageType {list(it)} is not a MIP projection")
    body = expect(ds, "BodyPartExamined", "BRAIN")
    ipr = protocol_fact(
        Q_MRI_PROTOCOL, MRI_PROTOCOLS, "Time-of-flight MR angiography",
        f"{tagref('ProtocolName', proto)}; ImageType contains 'PROJECTION IMAGE' and 'CSA MIP' "
        "(a maximum-intensity projection of the time-of-flight acquisition).",
        "DICOM sequence tags",
    )  # fmt: skip
    organ = region_fact("Brain", f"{tagref('BodyPartExamined', body)}.", "DICOM BodyPartExamined")
    raw = frames(ds)[0]
    rows = np.nonzero(raw.max(axis=1) > 0)[0]
    strip = raw[rows.min() : rows.max() + 1]
    img = imageio.percentile_window(strip, 1.0, 99.8)
    img = imageio.resize(img, output_shape(strip.shape[0], strip.shape[1], 512))
    for n, lesion in enumerate((False, True)):
        pics.append(
            Picture(
                ds_name, f"tof_{n + 1:02d}", img, modality, "Brain", pf, "the single MIP frame",
                f"empty rows (outside the projected slab) cropped, window 1-99.8th percentile, {img.shape[1]}x{img.shape[0]}",
                [mfact, ipr, organ], lesion=lesion, normal_ok=True,
            )  # fmt: skip
        )

    # MR2: a T1-weighted spin-echo shoulder image (NEMA WG04), uncompressed copy.
    pf = pydicom_data_file("MR2_UNCR.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    proto = expect(ds, "ProtocolName", "T1W/SE/1024")
    scan = expect(ds, "ScanningSequence", "SE")
    tr, te = float(ds.RepetitionTime), float(ds.EchoTime)
    ipr = protocol_fact(
        Q_MRI_PROTOCOL, MRI_PROTOCOLS, "T1-weighted",
        f"{tagref('ProtocolName', proto)}, {tagref('ScanningSequence', scan)}, RepetitionTime {tr:g} ms and "
        f"EchoTime {te:g} ms (short TR and TE: T1 weighting).",
        "DICOM sequence tags",
    )  # fmt: skip
    desc = deid.checked_description(ds, "StudyDescription", "SHOULDER")
    organ = region_fact("Shoulder", f"StudyDescription (0008,1030) = {desc!r}.", "DICOM StudyDescription")
    img = imageio.resize(imageio.percentile_window(frames(ds)[0], 0.5, 99.5), (384, 384))
    for n, lesion in enumerate((False, True, True)):
        pics.append(
            Picture(
                ds_name, f"mr2_{n + 1:02d}", img, modality, "Shoulder", pf, "the single frame",
                "window 0.5-99.5th percentile, resampled 1024 -> 384 px", [mfact, ipr, organ],
                lesion=lesion, normal_ok=True,
            )  # fmt: skip
        )

    # An abdominal T1 VIBE slice whose overlay circles a liver lesion (a real, documented finding).
    pf = pydicom_file("examples_overlay.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    proto = expect(ds, "ProtocolName", "t1_vibe_fs_tra_bh_dyn")
    scan = expect(ds, "ScanningSequence", "GR")
    opts = expect(ds, "ScanOptions", ["SAT2", "FS"])
    ipr = protocol_fact(
        Q_MRI_PROTOCOL, MRI_PROTOCOLS, "T1-weighted",
        f"{tagref('ProtocolName', proto)} (T1 VIBE, fat-suppressed, transverse), {tagref('ScanningSequence', scan)}, "
        f"{tagref('ScanOptions', opts)} (FS = fat saturation).",
        "DICOM sequence tags",
    )  # fmt: skip
    body = expect(ds, "BodyPartExamined", "ABDOMEN")
    desc = deid.checked_description(ds, "StudyDescription", "abdomen^liver")
    organ = region_fact("Upper abdomen", f"{tagref('BodyPartExamined', body)} and StudyDescription (0008,1030) = {desc!r}.", "DICOM BodyPartExamined")
    series = deid.checked_description(ds, "SeriesDescription", "marked lesion<MPR Collection>")
    overlay = ds.overlay_array(0x6000)
    if overlay.sum() == 0:
        raise SourceError(f"{pf.citation()}: the overlay plane is empty; the documented lesion mark is gone")
    finding = Fact(
        "Abnormality Diagnosis", "Does this image show a focal liver lesion?", "Yes", ("No",),
        f"Documented finding: SeriesDescription (0008,103E) = {series!r}, and the file's overlay plane (6000,3000) "
        "circles a focal lesion in the liver (the overlay itself is not drawn into the image).",
        "documented finding",
    )  # fmt: skip
    center, width = frame_window(ds, 0)
    img = imageio.window_center_width(frames(ds)[0], center, width)
    pics.append(
        Picture(
            ds_name, "abdomen_01", img, modality, "Abdomen", pf, "the single frame",
            f"DICOM window {center:g}/{width:g}, native {img.shape[1]}x{img.shape[0]}",
            [mfact, iop_plane_fact(ds, 0), ipr, organ, finding],
        )  # fmt: skip
    )
    return pics


# -- CT ------------------------------------------------------------------------------------


def pydicom_ct() -> list[Picture]:
    ds_name = "pydicom-ct"
    pics: list[Picture] = []

    # CT_small: a chest CT slice (NEMA WG04 CT1, downsized), shown in a lung window.
    pf = pydicom_file("CT_small.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    ref = expect(ds, "PositionReferenceIndicator", "SN")
    loc = float(ds.SliceLocation)
    if not -250 < loc < -20:
        raise SourceError(f"{pf.citation()}: SliceLocation {loc} is not in the thorax below the sternal notch")
    organ = region_fact(
        "Chest",
        f"{tagref('PositionReferenceIndicator', ref)} (sternal notch) and SliceLocation (0020,1041) = {loc:.1f} mm: "
        f"an axial slice {abs(loc):.0f} mm below the sternal notch, through the thorax; the lung window shows both lungs.",
        "DICOM position reference",
    )  # fmt: skip
    hu = frames(ds)[0]
    img = imageio.resize(imageio.window_center_width(hu, -600, 1500), (256, 256))
    lungs = ndimage.binary_erosion(resize_mask(hu < -400, (256, 256)), iterations=2)
    for n, lesion in enumerate((False, True, True, True)):
        pics.append(
            Picture(
                ds_name, f"chestct_{n + 1:02d}", img, modality, "Lungs", pf, "the single slice",
                "lung window -600/1500 HU, resampled 128 -> 256 px; lesions (nodules) only inside the lungs (< -400 HU)",
                [mfact, iop_plane_fact(ds, 0), organ], lesion=lesion, normal_ok=True, allowed=lungs, contrast=0.8,
            )  # fmt: skip
        )

    # An abdominal CT slice from a pancreas study (TCIA, via pydicom's issue tracker).
    pf = pydicom_data_file("explicit_VR-UN.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    body = expect(ds, "BodyPartExamined", "PANCREAS")
    organ = region_fact("Upper abdomen", f"{tagref('BodyPartExamined', body)}: the pancreas lies in the upper abdomen.", "DICOM BodyPartExamined")
    hu, turned = display_axial(frames(ds)[0], frame_orientation(ds, 0))
    img = imageio.resize(imageio.window_center_width(hu, 40, 400), (384, 384))
    for n, lesion in enumerate((False, True, True, True)):
        pics.append(
            Picture(
                ds_name, f"abdct_{n + 1:02d}", img, modality, "Abdomen", pf, "the single slice",
                f"{turned} to the radiological display (anterior up), soft-tissue window 40/400 HU, resampled 512 -> 384 px",
                [mfact, iop_plane_fact(ds, 0), organ],
                lesion=lesion, normal_ok=True,
            )  # fmt: skip
        )

    # eCT_Supplemental: an enhanced CT perfusion map (regional cerebral blood flow), 2 frames.
    pf = pydicom_data_file("eCT_Supplemental.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    it = expect(ds, "ImageType", ["DERIVED", "PRIMARY", "PERFUSION", "RCBF"])
    rwvm = ds.SharedFunctionalGroupsSequence[0].RealWorldValueMappingSequence[0]
    if str(rwvm.LUTExplanation) != "Regional Cerebral Blood Flow":
        raise SourceError(f"{pf.citation()}: LUTExplanation is {rwvm.LUTExplanation!r}")
    ipr = protocol_fact(
        Q_CT_PROTOCOL, CT_PROTOCOLS, "CT perfusion (cerebral blood flow map)",
        f"{tagref('ImageType', it)} and the real-world value map's LUTExplanation (0028,3003) = "
        "'Regional Cerebral Blood Flow' (ml/100ml/s).",
        "DICOM ImageType",
    )  # fmt: skip
    region = ds.SharedFunctionalGroupsSequence[0].FrameAnatomySequence[0].AnatomicRegionSequence[0]
    if str(region.CodeMeaning) != "Brain":
        raise SourceError(f"{pf.citation()}: anatomic region is {region.CodeMeaning!r}")
    organ = region_fact(
        "Brain",
        f"FrameAnatomySequence > AnatomicRegionSequence (0008,2218): code {region.CodeValue} "
        f"({region.CodingSchemeDesignator}) = {str(region.CodeMeaning)!r}.",
        "DICOM AnatomicRegionSequence",
    )  # fmt: skip
    data = frames(ds)
    for n, f in enumerate((0, 0, 1, 1)):
        center, width = frame_window(ds, f)
        cbf, turned = display_axial(data[f], frame_orientation(ds, f))
        img = imageio.resize(imageio.window_center_width(cbf, center, width), (384, 384))
        pics.append(
            Picture(
                ds_name, f"perfct_{n + 1:02d}", img, modality, "Brain", pf, f"frame {f + 1} of {len(data)}",
                f"{turned} to the radiological display, frame window {center:g}/{width:g}, resampled 512 -> 384 px",
                [mfact, iop_plane_fact(ds, f), ipr, organ], lesion=True, contrast=0.6,
            )  # fmt: skip
        )
    return pics


# -- radiographs ---------------------------------------------------------------------------


def cr_radiographs() -> list[Picture]:
    ds_name = "pydicom-data-cr"
    pics: list[Picture] = []

    pf = pydicom_data_file("RG1_UNCR.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    expect(ds, "PhotometricInterpretation", "MONOCHROME1")
    view = expect(ds, "ViewPosition", "PA")
    body = expect(ds, "BodyPartExamined", "CHEST")
    vfact = projection_fact("Posteroanterior (PA)", CHEST_PROJECTIONS, f"DICOM {tagref('ViewPosition', view)}.")
    organ = region_fact("Chest", f"{tagref('BodyPartExamined', body)}.", "DICOM BodyPartExamined")
    raw = frames(ds)[0]
    img = 1.0 - imageio.percentile_window(raw, 1.0, 99.0)  # MONOCHROME1: low values are white
    img = imageio.resize(img**1.6, output_shape(raw.shape[0], raw.shape[1], 448))
    # This film shows several real round opacities in both lungs (no finding is documented),
    # so synthetic nodules support a presence item only; "no lesion" is never asked of it.
    # They go into the lung fields: the darker parts of the central chest.
    smooth = ndimage.gaussian_filter(img, 4)
    lungs = (smooth < np.percentile(smooth, 45)) & (smooth > 0.05)
    h, w = lungs.shape
    lungs[: int(0.1 * h)] = lungs[int(0.75 * h) :] = False
    lungs[:, : int(0.08 * w)] = lungs[:, int(0.92 * w) :] = False
    for n in range(3):
        pics.append(
            Picture(
                ds_name, f"chestxr_{n + 1:02d}", img, modality, "Chest", pf, "the single frame",
                f"inverted (MONOCHROME1), window 1-99th percentile, gamma 1.6, resampled to {img.shape[1]}x{img.shape[0]}; "
                "nodules only inside the darker lung fields",
                [mfact, vfact, organ], lesion=True, allowed=lungs, contrast=0.45,
                lesion_tasks=("Abnormality Diagnosis",),
            )  # fmt: skip
        )

    pf = pydicom_data_file("RG3_UNCR.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    expect(ds, "PhotometricInterpretation", "MONOCHROME1")
    view = expect(ds, "ViewPosition", "AP")
    body = expect(ds, "BodyPartExamined", "EXTREMITY")
    proc = deid.checked_description(ds, "AcquisitionDeviceProcessingDescription", "[LOWER LEG ]")
    diagnosis = deid.checked_description(ds, "StudyDescription", "Non-ossifying fibroma of distal tibia")
    vfact = projection_fact("Anteroposterior (AP)", LIMB_PROJECTIONS, f"DICOM {tagref('ViewPosition', view)}.")
    organ = region_fact(
        "Lower leg",
        f"{tagref('BodyPartExamined', body)}, AcquisitionDeviceProcessingDescription (0018,1400) = {proc!r} "
        f"and StudyDescription (0008,1030) = {diagnosis!r}.",
        "DICOM BodyPartExamined",
    )  # fmt: skip
    dd = Fact(
        "Disease Diagnosis",
        "This radiograph of the lower leg shows a lesion of the distal tibia. What is the most likely diagnosis?",
        "Non-ossifying fibroma", BONE_LESION_DIAGNOSES,
        f"Documented diagnosis: StudyDescription (0008,1030) = {diagnosis!r} (NEMA WG04 sample RG3).",
        "documented diagnosis",
    )  # fmt: skip
    raw = frames(ds)[0]
    disp = 1.0 - imageio.percentile_window(raw, 0.5, 99.5)
    # The lead side marker "R" is burned into the film right of the leg: blank it.
    disp = deid.mask_boxes(disp, [(1120, 1355, 1222, 1500)], value=float(np.median(disp[1355:1500, 1060:1110])))
    fields = [((470, 0, 1220, 1760), "the exposed field"), ((470, 800, 1220, 1760), "the distal half of the exposed field")]
    for n, (box, label) in enumerate(fields):
        part = deid.crop(disp, box)
        img = imageio.resize(part, output_shape(part.shape[0], part.shape[1], 448))
        pics.append(
            Picture(
                ds_name, f"tibia_{n + 1:02d}", img, modality, "Lower Limb", pf, f"the single frame, {label}",
                f"inverted (MONOCHROME1), window 0.5-99.5th percentile, side marker masked, cropped to x {box[0]}-{box[2]}, "
                f"y {box[1]}-{box[3]}, resampled to {img.shape[1]}x{img.shape[0]}",
                [mfact, vfact, organ, dd],
            )  # fmt: skip
        )
    return pics


# -- ultrasound ----------------------------------------------------------------------------


def _us_mode_fact(ds, pf: PackageFile, answer: str) -> Fact:
    modes = ultrasound_modes(ds.ImageType)
    expected = {"B-mode (2D grayscale)": ("2D",), "Colour Doppler": ("2D", "Color Doppler")}[answer]
    if modes != expected:
        raise SourceError(f"{pf.citation()}: ImageType {list(ds.ImageType)} decodes to modes {modes}, expected {expected}")
    return protocol_fact(
        Q_US_MODE, US_MODES, answer,
        f"{tagref('ImageType', ds.ImageType)}: value 4 is the ultrasound mode bitmap (DICOM PS3.3 C.8.5.6.1.1), "
        f"{ds.ImageType[3]!r} = {' + '.join(modes)}.",
        "DICOM ImageType mode bitmap",
    )  # fmt: skip


def echo_us() -> list[Picture]:
    ds_name = "echo-us"
    pics: list[Picture] = []

    pf = pydicom_file("examples_ybr_color.dcm")
    ds = read_dicom(pf.path())
    if not deid.needs_pixel_review(ds):
        raise SourceError(f"{pf.citation()}: expected an ultrasound capture needing a crop")
    modality, mfact = dicom_modality(ds, pf)
    ipr = _us_mode_fact(ds, pf, "B-mode (2D grayscale)")
    it = ds.ImageType
    if it[2] != "EPICARDIAL":
        raise SourceError(f"{pf.citation()}: ImageType value 3 is {it[2]!r}")
    organ = region_fact("Heart", f"{tagref('ImageType', it)}: value 3 'EPICARDIAL' is a cardiac (echocardiography) study type.", "DICOM ImageType")
    # The regions were written for the 640 x 480 original; this copy is downsized by half.
    (rx0, ry0, rx1, ry1), = ultrasound_regions(ds, scale=0.5)
    box = (50, 10, 270, 208)  # inside the tissue region, clear of the on-screen text at both sides
    if not (rx0 <= box[0] and ry0 <= box[1] + 6 and box[2] <= rx1 and box[3] <= ry1 + 1):
        raise SourceError(f"{pf.citation()}: crop {box} leaves the ultrasound region {(rx0, ry0, rx1, ry1)}")
    data = frames(ds)
    for n, f in enumerate((0, 5, 10, 15, 20, 25)):
        gray = deid.crop(data[f].astype(np.float64).mean(axis=2) / 255.0, box)
        img = imageio.resize(gray, output_shape(gray.shape[0], gray.shape[1], 330))
        pics.append(
            Picture(
                ds_name, f"echo_{n + 1:02d}", img, modality, "Heart", pf, f"frame {f + 1} of {len(data)}",
                f"cropped to the sector x {box[0]}-{box[2]}, y {box[1]}-{box[3]} (on-screen text removed), gray, "
                f"resampled to {img.shape[1]}x{img.shape[0]}",
                [mfact, ipr, organ], lesion=n % 2 == 1, normal_ok=True, contrast=0.55,
            )  # fmt: skip
        )

    pf = pydicom_data_file("color-pl.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    ipr = _us_mode_fact(ds, pf, "Colour Doppler")
    study = deid.checked_description(ds, "StudyDescription", "Echocardiogram")
    series = deid.checked_description(ds, "SeriesDescription", "Transesophageal Echocardiogram")
    organ = region_fact("Heart", f"StudyDescription (0008,1030) = {study!r}, SeriesDescription (0008,103E) = {series!r}.", "DICOM StudyDescription")
    aspect = [int(v) for v in ds.PixelAspectRatio]  # vertical : horizontal pixel size
    box = (0, 0, 232, 120)  # drops the focal-zone marker at the right edge
    rgb = deid.crop(frames(ds)[0].astype(np.float64) / 255.0, box)
    img = imageio.resize(rgb, output_shape(rgb.shape[0] * aspect[0] / aspect[1], rgb.shape[1], 348))
    # The sector sits on a flat gray fill: lesions go into the textured sector only.
    sector = ndimage.binary_erosion(lesions.textured_mask(img), iterations=3)
    for n, lesion in enumerate((False, True, True)):
        pics.append(
            Picture(
                ds_name, f"tee_{n + 1:02d}", img, modality, "Heart", pf, "the single frame",
                f"cropped to x {box[0]}-{box[2]} (focal-zone marker removed), pixel aspect {aspect[0]}:{aspect[1]} "
                f"corrected, colour kept, resampled to {img.shape[1]}x{img.shape[0]}",
                [mfact, ipr, organ], lesion=lesion, normal_ok=True, contrast=0.5, allowed=sector,
            )  # fmt: skip
        )
    return pics


def pelvis_us() -> list[Picture]:
    ds_name = "pelvis-us"
    pics: list[Picture] = []
    pf = pydicom_data_file("gdcm-US-ALOKA-16.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    ipr = _us_mode_fact(ds, pf, "B-mode (2D grayscale)")
    it = ds.ImageType
    organ = region_fact(
        "Pelvis",
        f"The scanner's on-screen body-marker label '3:PELVIS' below the image (outside the published crop) and "
        f"{tagref('ImageType', it)} (value 3 'ABDOM/RAD': abdominal application).",
        "on-screen label",
    )  # fmt: skip
    regions = ultrasound_regions(ds)
    gray = frames(ds)[0].astype(np.float64).mean(axis=2) / 255.0
    # Inside each of the two tissue regions, below the frame-rate text and the cursor,
    # right of the gray-scale bar and left of the depth arrows.
    boxes = [(64, 96, 332, 408), (342, 96, 626, 408)]
    for (x0, y0, x1, y1), (rx0, ry0, rx1, ry1) in zip(boxes, regions[:2], strict=True):
        if not (rx0 <= x0 and ry0 <= y0 and x1 <= rx1 + 1 and y1 <= ry1 + 1):
            raise SourceError(f"{pf.citation()}: crop {(x0, y0, x1, y1)} leaves its region {(rx0, ry0, rx1, ry1)}")
    for p, box in enumerate(boxes):
        img = deid.crop(gray, box)
        for v, lesion in enumerate((False, True)):
            pics.append(
                Picture(
                    ds_name, f"pelvis_{2 * p + v + 1:02d}", img, modality, "Pelvis", pf,
                    f"{'left' if p == 0 else 'right'} panel of the dual display",
                    f"cropped to x {box[0]}-{box[2]}, y {box[1]}-{box[3]} (all on-screen text removed), gray, native size",
                    [mfact, ipr, organ], lesion=lesion, normal_ok=True, contrast=0.55,
                )  # fmt: skip
            )
    return pics


RECIPE: tuple[Callable[[], list[Picture]], ...] = (nibabel_brain, dipy_brain, pydicom_mr, pydicom_ct, cr_radiographs, echo_us, pelvis_us)


# -- assembling the cube --------------------------------------------------------------------


def _lesion_plan() -> Iterator[tuple[str, str]]:
    """(quadrant, size) combinations in an order that spreads both evenly."""
    n = len(lesions.SIZE_CLASSES)
    combos = [(q, lesions.SIZE_CLASSES[(i + j) % n].name) for j in range(n) for i, q in enumerate(lesions.QUADRANTS)]
    while True:
        yield from combos


@dataclass
class BuildReport:
    out_dir: Path
    items: int = 0
    images: int = 0
    bytes: int = 0
    per_task: Counter = field(default_factory=Counter)
    per_modality: Counter = field(default_factory=Counter)
    per_part: Counter = field(default_factory=Counter)
    cells: Counter = field(default_factory=Counter)
    chains: int = 0

    def summary(self) -> str:
        lines = [
            f"mini cube written to {self.out_dir}: {self.items} items, {self.images} images, "
            f"{len(self.cells)} cells, {self.chains} chains, {self.bytes / 1e6:.2f} MB",
            "per task: " + ", ".join(f"{k} {v}" for k, v in sorted(self.per_task.items())),
            "per modality: " + ", ".join(f"{k} {v}" for k, v in sorted(self.per_modality.items())),
            "per part: " + ", ".join(f"{k} {v}" for k, v in sorted(self.per_part.items())),
        ]
        return "\n".join(lines)


def _prepare_out(out: Path) -> None:
    """Empty `out` if it is a previous build (or empty); refuse anything else."""
    if out.exists():
        if not out.is_dir():
            raise SystemExit(f"{out}: exists and is not a directory")
        entries = list(out.iterdir())
        readme = out / "README.md"
        ours = readme.is_file() and readme.read_text(encoding="utf-8").startswith(mini_docs.README_TITLE)
        if entries and not ours:
            raise SystemExit(f"{out}: not empty and not a previous mini-cube build; choose an empty or new directory")
        shutil.rmtree(out)
    out.mkdir(parents=True)


def _draw_lesion(pic: Picture, plan: Iterator[tuple[str, str]], rng: np.random.Generator) -> tuple[np.ndarray, dict | None]:
    """The picture's pixels with its synthetic lesion (if it gets one) and the lesion's metadata."""
    if not pic.lesion:
        return pic.pixels, None
    allowed = pic.allowed if pic.allowed is not None else lesions.body_mask(pic.pixels)
    for _ in range(len(lesions.QUADRANTS) * len(lesions.SIZE_CLASSES)):  # a combination that does not fit is skipped
        quadrant, size = next(plan)
        try:
            pixels, lesion = lesions.insert_lesion(
                pic.pixels, allowed, quadrant, size, rng, contrast=pic.contrast, polarity=pic.polarity
            )
        except lesions.NoRoom:
            continue
        return pixels, lesion.to_meta()
    raise RuntimeError(f"{pic.dataset}/{pic.stem}: no quadrant and size fits a lesion")


def _facts(pic: Picture, lesion_meta: dict | None, views_asked: set[tuple[str, str, str]]) -> list[Fact]:
    """The facts asked of one output image, in taxonomy order; checks that they form a chain."""
    high = [f for f in lesion_facts(lesion_meta) if f.task in pic.lesion_tasks] if (pic.lesion or pic.normal_ok) else []
    # A view is asked once per source slice: variants of one slice differ only by a
    # lesion, and repeating "axial" on each would flood the View Recognition cells.
    view_key = (pic.dataset, pic.source.relpath, pic.locator)
    facts = [f for f in pic.facts if f.task != "View Recognition" or view_key not in views_asked] + high
    if any(f.task == "View Recognition" for f in pic.facts):
        views_asked.add(view_key)
    levels = {task_level(f.task) for f in facts}
    if Level.HIGH not in levels or not levels & {Level.LOW, Level.MID}:
        raise RuntimeError(f"{pic.dataset}/{pic.stem}: an image needs a low/mid-level and a high-level item (chain)")
    return sorted(facts, key=lambda f: TASK_NAMES.index(f.task))


def build(out_dir: str | Path = DEFAULT_OUT) -> BuildReport:
    """Rebuild the mini cube into `out_dir` (replacing a previous build there)."""
    out = Path(out_dir)
    pictures = [p for make in RECIPE for p in make()]  # read every source before touching `out`
    _prepare_out(out)
    writer, plan, report = ItemWriter(), _lesion_plan(), BuildReport(out)
    records: dict[str, list[dict[str, Any]]] = {}
    rows: dict[str, list[dict[str, Any]]] = {}
    numbers: Counter = Counter()
    views_asked: set[tuple[str, str, str]] = set()
    for pic in pictures:
        numbers[pic.dataset] += 1
        name = f"{numbers[pic.dataset]:03d}"  # numbered files hint at no answer
        pixels, lesion_meta = _draw_lesion(pic, plan, np.random.default_rng(stable_seed(SEED, pic.dataset, pic.stem)))
        if max(pixels.shape[:2]) > MAX_SIDE:
            raise RuntimeError(f"{pic.dataset}/{pic.stem}: {pixels.shape[1]}x{pixels.shape[0]} exceeds {MAX_SIDE} px")
        facts = _facts(pic, lesion_meta, views_asked)
        rel = f"images/{name}.png"
        (out / pic.dataset / "images").mkdir(parents=True, exist_ok=True)
        report.bytes += imageio.write_png(out / pic.dataset / rel, imageio.to_uint8(pixels))
        report.images += 1
        report.chains += 1
        source_meta = {"package": pic.source.distribution, "file": f"{pic.source.module}/{pic.source.relpath}", "where": pic.locator}
        answers = []
        for fact in facts:
            meta: dict[str, Any] = {"source": source_meta, "synthetic_image": lesion_meta is not None}
            if fact.synthetic and lesion_meta is not None:
                meta["lesion"] = lesion_meta
            rec = writer.record(
                fact, item_id=f"{pic.dataset}-{name}-{task_abbrev(fact.task)}", dataset=pic.dataset,
                image_path=rel, modality=pic.modality, part=pic.part, meta=meta,
            )  # fmt: skip
            records.setdefault(pic.dataset, []).append(rec)
            answers.append((fact, rec))
            report.items += 1
            report.per_task[fact.task] += 1
            report.per_modality[pic.modality] += 1
            report.per_part[pic.part] += 1
            report.cells[(pic.part, pic.modality, fact.task)] += 1
        rows.setdefault(pic.dataset, []).append({"pic": pic, "rel": rel, "lesion": lesion_meta, "answers": answers})
    for dataset, recs in sorted(records.items()):
        text = json.dumps(recs, indent=1, ensure_ascii=False) + "\n"
        (out / dataset / "test.json").write_text(text, encoding="utf-8")
        report.bytes += len(text.encode("utf-8"))
    readme = mini_docs.render_readme(rows, report)
    (out / "README.md").write_text(readme, encoding="utf-8")
    (out / "NOTICE").write_text(mini_docs.NOTICE, encoding="utf-8")
    report.bytes += len(readme.encode("utf-8")) + len(mini_docs.NOTICE.encode("utf-8"))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m medrcube.construction.mini.cube",
        description="Rebuild the bundled mini cube from images inside installed packages (pydicom, pydicom-data, nibabel, dipy).",
    )
    parser.add_argument("out_dir", nargs="?", default=str(DEFAULT_OUT), help="output directory (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        report = build(args.out_dir)
    except SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
