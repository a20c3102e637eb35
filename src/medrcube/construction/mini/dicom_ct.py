"""CT from pydicom and pydicom-data: a chest slice in a lung window, an abdominal slice from a
pancreas study, and a two-frame CT perfusion map of the brain.

Each source holds one or two slices, so its lesion items come from many lesion placements
on the same slice (`placement.copies`): one copy per slice also asks presence, balancing
the one unmodified copy asked "no lesion".
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from medrcube.construction import imageio
from medrcube.construction.dicom_attributes import SourceError
from medrcube.construction.mini.common import (
    Picture,
    dicom_modality,
    expect,
    iop_plane_fact,
    pydicom_data_file,
    pydicom_file,
    resize_mask,
    tagref,
)
from medrcube.construction.mini.placement import copies
from medrcube.construction.readers.sources import display_axial, frame_orientation, frame_window, frames, read_dicom
from medrcube.construction.stages.questions import CT_PROTOCOLS, Q_CT_PROTOCOL, protocol_fact, region_fact

DATASET = "pydicom-ct"
# Lesion placements per single-slice source. 36, not 24: an image asks one modality, view,
# protocol or organ question (unleak.one_perception_item), so the perception cells of a
# source fill from a quarter of its images each.
LESION_COPIES = 36


def _chest() -> list[Picture]:
    """CT_small: a chest CT slice (NEMA WG04 CT1, downsized), shown in a lung window."""
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
    # The slice's lung fields fill only its upper half (the lower half is spine and back
    # muscle), so on the whole slice every nodule would lie "upper left" or "upper right"
    # and a model that only sees lungs would be right half the time (a leak). Cropped to
    # the rows that hold lung, each quadrant of the image holds lung.
    lung_rows = np.flatnonzero((hu < -400).any(axis=1))
    bottom = int(lung_rows.max()) + 1
    if not hu.shape[0] // 3 <= bottom <= hu.shape[0]:
        raise SourceError(f"{pf.citation()}: the lung fields end at row {bottom} of {hu.shape[0]}; review the crop")
    hu = hu[:bottom]
    shape = (2 * bottom, 2 * hu.shape[1])
    img = imageio.resize(imageio.window_center_width(hu, -600, 1500), shape)
    lungs = ndimage.binary_erosion(resize_mask(hu < -400, shape), iterations=2)
    base = Picture(
        DATASET, "chestct", img, modality, "Lungs", pf, "the single slice",
        f"cropped to rows 0-{bottom - 1} (the lung fields; the spine and back muscles below left out), "
        f"lung window -600/1500 HU, resampled 2x to {shape[1]}x{shape[0]} px; lesions (nodules) only inside the lungs (< -400 HU)",
        [mfact, iop_plane_fact(ds, 0), organ], normal_ok=True, allowed=lungs, contrast=0.8,
    )  # fmt: skip
    return copies(base, LESION_COPIES, normal=True, presence=1)


def _abdomen() -> list[Picture]:
    """An abdominal CT slice from a pancreas study (TCIA, via pydicom's issue tracker)."""
    pf = pydicom_data_file("explicit_VR-UN.dcm")
    ds = read_dicom(pf.path())
    modality, mfact = dicom_modality(ds, pf)
    body = expect(ds, "BodyPartExamined", "PANCREAS")
    organ = region_fact("Upper abdomen", f"{tagref('BodyPartExamined', body)}: the pancreas lies in the upper abdomen.", "DICOM BodyPartExamined")
    iop = frame_orientation(ds, 0)
    if iop is None:
        raise SourceError(f"{pf.citation()}: no ImageOrientationPatient")
    hu, turned = display_axial(frames(ds)[0], iop)
    img = imageio.resize(imageio.window_center_width(hu, 40, 400), (384, 384))
    base = Picture(
        DATASET, "abdct", img, modality, "Abdomen", pf, "the single slice",
        f"{turned} to the radiological display (anterior up), soft-tissue window 40/400 HU, resampled 512 -> 384 px",
        [mfact, iop_plane_fact(ds, 0), organ], normal_ok=True,
    )  # fmt: skip
    return copies(base, LESION_COPIES, normal=True, presence=1)


def _perfusion() -> list[Picture]:
    """eCT_Supplemental: an enhanced CT perfusion map (regional cerebral blood flow), 2 frames.
    A perfusion study is never asked "no lesion", so every copy carries one."""
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
    pics: list[Picture] = []
    for f in range(len(data)):
        window, iop = frame_window(ds, f), frame_orientation(ds, f)
        if window is None or iop is None:
            raise SourceError(f"{pf.citation()}: frame {f + 1} has no window or orientation")
        center, width = window
        cbf, turned = display_axial(data[f], iop)
        img = imageio.resize(imageio.window_center_width(cbf, center, width), (384, 384))
        base = Picture(
            DATASET, f"perfct_{f + 1}", img, modality, "Brain", pf, f"frame {f + 1} of {len(data)}",
            f"{turned} to the radiological display, frame window {center:g}/{width:g}, resampled 512 -> 384 px",
            [mfact, iop_plane_fact(ds, f), ipr, organ], contrast=0.6,
        )  # fmt: skip
        pics += copies(base, LESION_COPIES // len(data), normal=False, presence=1)
    return pics


def pydicom_ct() -> list[Picture]:
    return _chest() + _abdomen() + _perfusion()
