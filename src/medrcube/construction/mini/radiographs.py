"""Computed radiographs from pydicom-data (NEMA WG04): a PA chest film and the AP film of a
distal tibia whose StudyDescription names its diagnosis, non-ossifying fibroma (the one
real diagnosis that ships in any of these packages)."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from medrcube.construction import imageio
from medrcube.construction.mini.common import Picture, dicom_modality, expect, output_shape, pydicom_data_file, tagref
from medrcube.construction.privacy import deid
from medrcube.construction.readers.sources import frames, read_dicom
from medrcube.construction.stages.questions import (
    BONE_LESION_DIAGNOSES,
    CHEST_PROJECTIONS,
    LIMB_PROJECTIONS,
    Fact,
    projection_fact,
    region_fact,
)

DATASET = "pydicom-data-cr"


def _chest() -> list[Picture]:
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
    return [
        Picture(
            DATASET, f"chestxr_{n + 1:02d}", img, modality, "Chest", pf, "the single frame",
            f"inverted (MONOCHROME1), window 1-99th percentile, gamma 1.6, resampled to {img.shape[1]}x{img.shape[0]}; "
            "nodules only inside the darker lung fields",
            [mfact, vfact, organ], lesion=True, allowed=lungs, contrast=0.45,
            lesion_tasks=("Abnormality Diagnosis",),
        )
        for n in range(3)
    ]


def _tibia() -> list[Picture]:
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
        "What is the most likely diagnosis of the lesion shown in this image?",
        "Non-ossifying fibroma", BONE_LESION_DIAGNOSES,
        f"Documented diagnosis: StudyDescription (0008,1030) = {diagnosis!r} (NEMA WG04 sample RG3).",
        "documented diagnosis",
    )  # fmt: skip
    raw = frames(ds)[0]
    disp = 1.0 - imageio.percentile_window(raw, 0.5, 99.5)
    # The lead side marker "R" is burned into the film right of the leg: blank it.
    disp = deid.mask_boxes(disp, [(1120, 1355, 1222, 1500)], value=float(np.median(disp[1355:1500, 1060:1110])))
    # One image of the film: a second crop of the same lesion would be a second Disease
    # Diagnosis item with the same answer, and the one would give the other away to a text
    # model (a leak: an options-only prior of 1.0 on the two).
    fields = [((470, 0, 1220, 1760), "the exposed field")]
    pics = []
    for n, (box, label) in enumerate(fields):
        part = deid.crop(disp, box)
        img = imageio.resize(part, output_shape(part.shape[0], part.shape[1], 448))
        pics.append(
            Picture(
                DATASET, f"tibia_{n + 1:02d}", img, modality, "Lower Limb", pf, f"the single frame, {label}",
                f"inverted (MONOCHROME1), window 0.5-99.5th percentile, side marker masked, cropped to x {box[0]}-{box[2]}, "
                f"y {box[1]}-{box[3]}, resampled to {img.shape[1]}x{img.shape[0]}",
                [mfact, vfact, organ, dd],
            )
        )
    return pics


def cr_radiographs() -> list[Picture]:
    return _chest() + _tibia()
