"""MRI from DICOM files in pydicom, pydicom-data and nibabel: the enhanced T1 head volume,
a time-of-flight angiogram, a T1 spin-echo shoulder and the liver slice with a marked lesion.

Protocol and region answers quote the sequence tags and reviewed descriptions they rest on;
`expect` stops the build if a source file ever changes under the recipe.
"""

from __future__ import annotations

import numpy as np

from medrcube.construction import imageio
from medrcube.construction.dicom_attributes import SourceError
from medrcube.construction.mini.common import (
    Picture,
    dicom_modality,
    expect,
    iop_plane_fact,
    nibabel_file,
    output_shape,
    pydicom_data_file,
    pydicom_file,
    tagref,
)
from medrcube.construction.mini.placement import copies
from medrcube.construction.privacy import deid
from medrcube.construction.readers.sources import frame_window, frames, read_dicom
from medrcube.construction.stages.questions import MRI_PROTOCOLS, Q_MRI_PROTOCOL, Fact, protocol_fact, region_fact

DATASET = "pydicom-mr"


def _emri() -> list[Picture]:
    """emri_small: an enhanced MR head volume (3D T1 TFE), 10 frames of 64 x 64."""
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
    pics = []
    # Frames 2-9 of 10: the first and last frames of the slab hold the least brain.
    for n, f in enumerate(range(1, 9)):
        img = imageio.resize(imageio.percentile_window(data[f]), (256, 256))
        pics.append(
            Picture(
                DATASET, f"emri_{n + 1:02d}", img, modality, "Brain", pf, f"frame {f + 1} of {len(data)}",
                "window 1-99.5th percentile, resampled 64 -> 256 px", [mfact, ipr, organ],
                lesion=n % 2 == 1, normal_ok=True,
            )
        )
    return pics


def _tof() -> list[Picture]:
    """A time-of-flight angiogram MIP shipped with nibabel's DICOM tests."""
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
    base = Picture(
        DATASET, "tof", img, modality, "Brain", pf, "the single MIP frame",
        f"empty rows (outside the projected slab) cropped, window 1-99.8th percentile, {img.shape[1]}x{img.shape[0]}",
        [mfact, ipr, organ], normal_ok=True,
    )  # fmt: skip
    return copies(base, 1, normal=True)


def _shoulder() -> list[Picture]:
    """MR2: a T1-weighted spin-echo shoulder image (NEMA WG04), uncompressed copy. One slice:
    many lesion placements, of which one asks presence (balancing its one "no lesion")."""
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
    base = Picture(
        DATASET, "mr2", img, modality, "Shoulder", pf, "the single frame",
        "window 0.5-99.5th percentile, resampled 1024 -> 384 px", [mfact, ipr, organ], normal_ok=True,
    )  # fmt: skip
    return copies(base, 30, normal=True, presence=1)


def _abdomen() -> list[Picture]:
    """An abdominal T1 VIBE slice whose overlay circles a liver lesion (a real, documented finding)."""
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
    window = frame_window(ds, 0)
    if window is None:
        raise SourceError(f"{pf.citation()}: no display window")
    center, width = window
    img = imageio.window_center_width(frames(ds)[0], center, width)
    return [
        Picture(
            DATASET, "abdomen_01", img, modality, "Abdomen", pf, "the single frame",
            f"DICOM window {center:g}/{width:g}, native {img.shape[1]}x{img.shape[0]}",
            [mfact, iop_plane_fact(ds, 0), ipr, organ, finding],
        )
    ]


def pydicom_mr() -> list[Picture]:
    return _emri() + _tof() + _shoulder() + _abdomen()
