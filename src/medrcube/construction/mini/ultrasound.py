"""Ultrasound from pydicom and pydicom-data: an echocardiogram cine (B-mode), a
transesophageal colour-Doppler frame and a dual-panel pelvic scan.

Burned-in text is never copied: every frame is cropped inside its tissue region
(SequenceOfUltrasoundRegions), and the crop is checked against that region at build time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy import ndimage

from medrcube.construction import imageio
from medrcube.construction.dicom_attributes import SourceError, ultrasound_modes, ultrasound_regions
from medrcube.construction.mini.common import (
    Picture,
    dicom_modality,
    output_shape,
    pydicom_data_file,
    pydicom_file,
    tagref,
)
from medrcube.construction.mini.placement import copies
from medrcube.construction.privacy import deid
from medrcube.construction.readers.sources import PackageFile, frames, read_dicom
from medrcube.construction.stages import lesions
from medrcube.construction.stages.questions import Q_US_MODE, US_MODES, Fact, protocol_fact, region_fact

if TYPE_CHECKING:
    from pydicom.dataset import Dataset


def _us_mode_fact(ds: Dataset, pf: PackageFile, answer: str) -> Fact:
    image_type = ds.ImageType
    modes = ultrasound_modes(image_type)
    expected = {"B-mode only (no Doppler)": ("2D",), "Colour Doppler": ("2D", "Color Doppler")}[answer]
    if modes != expected:
        raise SourceError(f"{pf.citation()}: ImageType {list(image_type)} decodes to modes {modes}, expected {expected}")
    return protocol_fact(
        Q_US_MODE, US_MODES, answer,
        f"{tagref('ImageType', image_type)}: value 4 is the ultrasound mode bitmap (DICOM PS3.3 C.8.5.6.1.1), "
        f"{image_type[3]!r} = {' + '.join(modes)}.",
        "DICOM ImageType mode bitmap",
    )  # fmt: skip


def _echo_cine() -> list[Picture]:
    """Every frame of the 30-frame B-mode echocardiogram; every other frame gets a lesion."""
    pf = pydicom_file("examples_ybr_color.dcm")
    ds = read_dicom(pf.path())
    if not deid.needs_pixel_review(ds):
        raise SourceError(f"{pf.citation()}: expected an ultrasound capture needing a crop")
    modality, mfact = dicom_modality(ds, pf)
    ipr = _us_mode_fact(ds, pf, "B-mode only (no Doppler)")
    it = ds.ImageType
    if it[2] != "EPICARDIAL":
        raise SourceError(f"{pf.citation()}: ImageType value 3 is {it[2]!r}")
    organ = region_fact("Heart", f"{tagref('ImageType', it)}: value 3 'EPICARDIAL' is a cardiac (echocardiography) study type.", "DICOM ImageType")
    # The regions were written for the 640 x 480 original; this copy is downsized by half.
    ((rx0, ry0, rx1, ry1),) = ultrasound_regions(ds, scale=0.5)
    box = (50, 10, 270, 208)  # inside the tissue region, clear of the on-screen text at both sides
    if not (rx0 <= box[0] and ry0 <= box[1] + 6 and box[2] <= rx1 and box[3] <= ry1 + 1):
        raise SourceError(f"{pf.citation()}: crop {box} leaves the ultrasound region {(rx0, ry0, rx1, ry1)}")
    data = frames(ds)
    pics = []
    for f in range(len(data)):
        gray = deid.crop(data[f].astype(np.float64).mean(axis=2) / 255.0, box)
        img = imageio.resize(gray, output_shape(gray.shape[0], gray.shape[1], 330))
        pics.append(
            Picture(
                "echo-us", f"echo_{f + 1:02d}", img, modality, "Heart", pf, f"frame {f + 1} of {len(data)}",
                f"cropped to the sector x {box[0]}-{box[2]}, y {box[1]}-{box[3]} (on-screen text removed), gray, "
                f"resampled to {img.shape[1]}x{img.shape[0]}",
                [mfact, ipr, organ], lesion=f % 2 == 1, normal_ok=True, contrast=0.55,
            )
        )
    return pics


def _tee() -> list[Picture]:
    """The single colour-Doppler frame: lesion placements inside its textured sector."""
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
    base = Picture(
        "echo-us", "tee", img, modality, "Heart", pf, "the single frame",
        f"cropped to x {box[0]}-{box[2]} (focal-zone marker removed), pixel aspect {aspect[0]}:{aspect[1]} "
        f"corrected, colour kept, resampled to {img.shape[1]}x{img.shape[0]}",
        [mfact, ipr, organ], normal_ok=True, contrast=0.5, allowed=sector,
    )  # fmt: skip
    return copies(base, 14, normal=True, presence=1)


def echo_us() -> list[Picture]:
    return _echo_cine() + _tee()


def pelvis_us() -> list[Picture]:
    pf = pydicom_data_file("gdcm-US-ALOKA-16.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    ipr = _us_mode_fact(ds, pf, "B-mode only (no Doppler)")
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
    pics: list[Picture] = []
    for p, box in enumerate(boxes):
        base = Picture(
            "pelvis-us", f"pelvis_{p + 1}", deid.crop(gray, box), modality, "Pelvis", pf,
            f"{'left' if p == 0 else 'right'} panel of the dual display",
            f"cropped to x {box[0]}-{box[2]}, y {box[1]}-{box[3]} (all on-screen text removed), gray, native size",
            [mfact, ipr, organ], normal_ok=True, contrast=0.55,
        )  # fmt: skip
        pics += copies(base, 18, normal=True, presence=1)
    return pics
