"""A synthetic hospital archive to try the construction pipeline on (and to test it with).

    python -m medrcube.construction.demo build/demo-site
    medrcube build recipes/site-example.yaml

writes, under the given folder:

- `dicom/`: a DICOM archive of eight series (chest CT, brain MR T1 and T2, a chest
  radiograph flagged BurnedInAnnotation = YES with "text" burned into its top strip, a
  liver CT with a contrast agent, an echocardiogram with ultrasound regions and text
  outside them; a brain MR whose pixels carry its patient's name, record number and
  birth date with no BurnedInAnnotation attribute, and whose ProtocolName holds the name
  in another order and case; a CT whose BodyPartExamined holds it), every file carrying invented identifying tags (names, IDs, dates,
  institution, UIDs, private tags) on purpose, plus a stray text file; and
  `dicom_labels.csv` (diagnosis and severity per series folder);
- `volumes/`: two brain MR volumes (NIfTI, BIDS names `_T1w`, `_FLAIR`; the second tilted 35
  degrees), with `volume_labels.csv`;
- `images/`: chest radiographs as PNG and JPEG (one JPEG carries an EXIF artist name)
  with `labels.csv`: diagnosis, severity, projection, boxes, a mask, a burned-in flag, and
  two identifying columns (patient id and name) that a recipe must declare private.

Every pixel is drawn here (ellipses, blobs, noise): no real patient data. All names are
invented. `identifying_values()` lists what must never appear in an export.
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pydicom.dataset import Dataset

    from medrcube.construction.privacy.synthetic import Burned

PATIENTS = (
    {"PatientName": "Beeblebrox^Zaphod", "PatientID": "MRN-48151623", "PatientBirthDate": "19610523", "AccessionNumber": "ACC-27182818"},
    {"PatientName": "Dent^Arthurina", "PatientID": "MRN-90210337", "PatientBirthDate": "19740211", "AccessionNumber": "ACC-31415926"},
    {"PatientName": "Prefect^Fordelia", "PatientID": "MRN-57721566", "PatientBirthDate": "19830930", "AccessionNumber": "ACC-16180339"},
)
INSTITUTION = "Saint Elsewhere Memorial Hospital"
PHYSICIAN = "Quincyworth^Marvella"
STATION = "CT-ELSEWHERE-7"
STUDY_DATE = "20230714"
PRIVATE_NOTE = "Reviewed by Dr Quincyworth for Beeblebrox"
CSV_PATIENTS = (("MRN-66260701", "Trillian^Astra"), ("MRN-22029929", "Slartibart^Fastina"), ("MRN-14142135", "Jeltz^Prostetnica"))
EXIF_ARTIST = "Marvin Paranoidson"


@dataclass
class DemoSite:
    root: Path
    dicom: Path
    dicom_labels: Path
    images: Path
    image_labels: Path
    values: set[str] = field(default_factory=set)  # every identifying value written


def _uid(i: int, j: int = 0, k: int = 0) -> str:
    # Fixed UIDs under the "2.25" root (UUID-derived form), so the archive is reproducible.
    return f"2.25.{31415926535 + 1000003 * i}{j:03d}{k:04d}"


def _body(h: int, w: int, rng: np.random.Generator, *, lungs: bool) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    cy, cx = h / 2, w / 2
    img = np.where(((yy - cy) / (0.42 * h)) ** 2 + ((xx - cx) / (0.45 * w)) ** 2 <= 1, 0.6, 0.0)
    if lungs:
        for sx in (-1, 1):
            m = ((yy - cy) / (0.3 * h)) ** 2 + ((xx - cx - sx * 0.2 * w) / (0.14 * w)) ** 2 <= 1
            img[m] = 0.15
    return np.clip(img + rng.normal(0, 0.03, (h, w)), 0, 1)


def _blob(img: np.ndarray, cy: float, cx: float, r: float, value: float) -> None:
    h, w = img.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    img[(yy - cy) ** 2 + (xx - cx) ** 2 <= r * r] = value


def _dataset(patient: Mapping[str, str], series: int, instance: int, modality: str, rows: int, cols: int) -> Dataset:
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import UID, ExplicitVRLittleEndian

    sop_class = {"CT": "1.2.840.10008.5.1.4.1.1.2", "MR": "1.2.840.10008.5.1.4.1.1.4", "CR": "1.2.840.10008.5.1.4.1.1.1",
                 "US": "1.2.840.10008.5.1.4.1.1.6.1"}[modality]  # fmt: skip
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = UID(sop_class)
    meta.MediaStorageSOPInstanceUID = UID(_uid(series, instance, 1))
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID = sop_class, _uid(series, instance, 1)
    ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = _uid(series, 0, 2), _uid(series, 0, 3), _uid(series, 0, 4)
    for k, v in patient.items():
        setattr(ds, k, v)
    ds.PatientSex, ds.PatientAge = "O", "052Y"
    ds.InstitutionName, ds.InstitutionAddress = INSTITUTION, "42 Magrathea Way, Elsewhere"
    ds.ReferringPhysicianName = PHYSICIAN
    ds.OperatorsName = "Kwaltz^Gagrakacka"
    ds.StationName = STATION
    ds.StudyDate = ds.SeriesDate = ds.ContentDate = STUDY_DATE
    ds.StudyTime = "101112"
    ds.StudyID = f"STUDY-{series:04d}-ELSE"
    ds.Modality = modality
    ds.SeriesNumber, ds.InstanceNumber = series, instance
    ds.Rows, ds.Columns = rows, cols
    ds.add_new(0x00090010, "LO", "ELSEWHERE PRIVATE")
    ds.add_new(0x00091001, "LO", PRIVATE_NOTE)
    return ds


def _gray(ds: Dataset, img01: np.ndarray, *, monochrome1: bool = False) -> None:
    data = np.round(np.clip(img01, 0, 1) * 4000).astype(np.uint16)
    if monochrome1:
        data = (4000 - data).astype(np.uint16)
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME1" if monochrome1 else "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.PixelData = data.tobytes()


def _save(ds: Dataset, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.save_as(path, enforce_file_format=True)


def _axial_iop() -> list[float]:
    return [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]


def write_dicom(root: Path) -> list[tuple[str, str, str]]:
    """The DICOM archive; returns (series folder, diagnosis, severity) label rows."""
    rng = np.random.default_rng(7)
    labels = []
    # 1. chest CT, 4 axial slices, a nodule-like opacity (labelled pneumonia)
    for i in range(4):
        ds = _dataset(PATIENTS[0], 1, i + 1, "CT", 64, 64)
        img = _body(64, 64, rng, lungs=True)
        _blob(img, 26, 20, 5, 0.55)
        ds.BodyPartExamined, ds.ImageOrientationPatient = "CHEST", _axial_iop()
        ds.ImagePositionPatient, ds.PixelSpacing = [0.0, 0.0, float(10 * i)], [0.7, 0.7]
        ds.RescaleSlope, ds.RescaleIntercept, ds.WindowCenter, ds.WindowWidth = 1, -1000, -400, 1600
        ds.BurnedInAnnotation = "NO"
        _gray(ds, img)
        _save(ds, root / "study-a" / "series-1" / f"IM{i + 1:04d}.dcm")
    labels.append(("study-a/series-1", "pneumonia", ""))
    # 2. brain MR, T2 spin echo, axial, 3 slices (glioma)
    for i in range(3):
        ds = _dataset(PATIENTS[1], 2, i + 1, "MR", 64, 64)
        img = _body(64, 64, rng, lungs=False)
        _blob(img, 22, 40, 6, 0.95)
        ds.BodyPartExamined, ds.ImageOrientationPatient = "BRAIN", _axial_iop()
        ds.ImagePositionPatient, ds.PixelSpacing = [0.0, 0.0, float(5 * i)], [1.0, 1.0]
        ds.ScanningSequence, ds.SequenceVariant = "SE", "SK"
        ds.RepetitionTime, ds.EchoTime, ds.ProtocolName = 4000, 100, "t2_tse_tra"
        ds.BurnedInAnnotation = "NO"
        _gray(ds, img)
        _save(ds, root / "study-b" / "series-2" / f"IM{i + 1:04d}.dcm")
    labels.append(("study-b/series-2", "glioma", "severe"))
    # 3. brain MR, T1 spin echo, sagittal, 3 slices (meningioma)
    for i in range(3):
        ds = _dataset(PATIENTS[1], 3, i + 1, "MR", 64, 64)
        img = _body(64, 64, rng, lungs=False)
        _blob(img, 18, 20, 5, 0.9)
        ds.BodyPartExamined, ds.ImageOrientationPatient = "BRAIN", [0.0, 1.0, 0.0, 0.0, 0.0, -1.0]
        ds.ImagePositionPatient, ds.PixelSpacing = [float(5 * i), 0.0, 0.0], [1.0, 1.0]
        ds.ScanningSequence, ds.SequenceVariant = "SE", "NONE"
        ds.RepetitionTime, ds.EchoTime, ds.ProtocolName = 500, 15, "t1_se_sag"
        ds.BurnedInAnnotation = "NO"
        _gray(ds, img)
        _save(ds, root / "study-b" / "series-3" / f"IM{i + 1:04d}.dcm")
    labels.append(("study-b/series-3", "meningioma", "mild"))
    # 4. chest radiograph PA, MONOCHROME1, BurnedInAnnotation = YES: "text" in the top strip
    ds = _dataset(PATIENTS[2], 4, 1, "CR", 96, 80)
    img = _body(96, 80, rng, lungs=True)
    img[int(0.62 * 96) :, :] = np.maximum(img[int(0.62 * 96) :, :], 0.5)  # a fluid level at a lung base
    img[1:7, 4:76] = np.tile(np.array([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0]), 9)[None, :72]  # burned-in "text"
    ds.BodyPartExamined, ds.ViewPosition, ds.BurnedInAnnotation = "CHEST", "PA", "YES"
    ds.PixelSpacing = [0.5, 0.5]
    _gray(ds, img, monochrome1=True)
    _save(ds, root / "study-c" / "series-4" / "IM0001.dcm")
    labels.append(("study-c/series-4", "pleural effusion", "moderate"))
    # 5. liver CT with a contrast agent, 2 slices (hepatocellular carcinoma)
    for i in range(2):
        ds = _dataset(PATIENTS[2], 5, i + 1, "CT", 64, 64)
        img = _body(64, 64, rng, lungs=False)
        _blob(img, 30, 22, 8, 0.85)
        ds.BodyPartExamined, ds.ImageOrientationPatient = "ABDOMEN", _axial_iop()
        ds.ImagePositionPatient, ds.PixelSpacing = [0.0, 0.0, float(8 * i)], [0.8, 0.8]
        ds.ContrastBolusAgent = "Omnipaque 350"
        ds.RescaleSlope, ds.RescaleIntercept, ds.WindowCenter, ds.WindowWidth = 1, -1000, 60, 400
        ds.BurnedInAnnotation = "NO"
        _gray(ds, img)
        _save(ds, root / "study-c" / "series-5" / f"IM{i + 1:04d}.dcm")
    labels.append(("study-c/series-5", "hepatocellular carcinoma", ""))
    # 6. echocardiogram, B-mode, RGB, tissue region inside text margins
    from pydicom.dataset import Dataset

    ds = _dataset(PATIENTS[0], 6, 1, "US", 60, 80)
    rgb = np.zeros((60, 80, 3), dtype=np.uint8)
    rgb[10:55, 10:70] = (rng.random((45, 60, 1)) * 120 + 40).astype(np.uint8)
    rgb[1:6, 2:78] = 255  # burned-in text above the sector
    ds.SamplesPerPixel, ds.PhotometricInterpretation, ds.PlanarConfiguration = 3, "RGB", 0
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 8, 8, 7, 0
    ds.PixelData = rgb.tobytes()
    ds.ImageType = ["ORIGINAL", "PRIMARY", "EPICARDIAL", "0001"]
    ds.BodyPartExamined = "HEART"
    region = Dataset()
    region.RegionSpatialFormat, region.RegionDataType, region.RegionFlags = 1, 1, 0
    region.RegionLocationMinX0, region.RegionLocationMinY0, region.RegionLocationMaxX1, region.RegionLocationMaxY1 = 10, 10, 69, 54
    ds.SequenceOfUltrasoundRegions = [region]
    _save(ds, root / "study-a" / "series-6" / "IM0001.dcm")
    # 7. brain MR, T2 spin echo, 2 slices whose pixels name the patient (no BurnedInAnnotation
    # attribute at all), and whose ProtocolName carries the name in another order and case
    for i in range(2):
        ds = _dataset(PATIENTS[0], 7, i + 1, "MR", BURNED_SIDE, BURNED_SIDE)
        img = _body(BURNED_SIDE, BURNED_SIDE, rng, lungs=False)
        _blob(img, 70, 120, 14, 0.95)
        for line in burned_lines():
            img = np.where(line.glyphs, line.value, img)
        ds.BodyPartExamined, ds.ImageOrientationPatient = "BRAIN", _axial_iop()
        ds.ImagePositionPatient, ds.PixelSpacing = [0.0, 0.0, float(5 * i)], [1.0, 1.0]
        ds.ScanningSequence, ds.SequenceVariant = "SE", "SK"
        ds.RepetitionTime, ds.EchoTime, ds.ProtocolName = 4000, 100, PROTOCOL_WITH_NAME
        _gray(ds, img)
        _save(ds, root / "study-d" / "series-7" / f"IM{i + 1:04d}.dcm")
    labels.append(("study-d/series-7", "glioma", "severe"))
    # 8. a CT whose BodyPartExamined holds the patient's name (a vocabulary miss the report must not quote)
    ds = _dataset(PATIENTS[1], 8, 1, "CT", 64, 64)
    ds.BodyPartExamined, ds.ImageOrientationPatient = PART_WITH_NAME, _axial_iop()
    ds.ImagePositionPatient, ds.PixelSpacing = [0.0, 0.0, 0.0], [0.7, 0.7]
    ds.RescaleSlope, ds.RescaleIntercept, ds.WindowCenter, ds.WindowWidth = 1, -1000, 40, 400
    _gray(ds, _body(64, 64, rng, lungs=False))
    _save(ds, root / "study-d" / "series-8" / "IM0001.dcm")
    (root / "README.txt").write_text(f"Archive export of {INSTITUTION}\n", encoding="utf-8")
    return labels


# Series 7's burned-in lines: the first patient's name (family name first, as a console
# writes it), record number, birth date and accession number, in four fonts, sizes and
# gray levels, at the corners where scanners write.
BURNED_SIDE = 192
BURNED_TEXT = (
    ("BEEBLEBROX, ZAPHOD", (4, 3), "dejavu-sans", 12, 1.0),
    ("MRN 48151623", (4, 19), "dejavu-sans-mono", 11, 0.85),
    ("23.05.1961", (118, 176), "pillow-default", 11, 0.9),
    ("ACC-27182818", (4, 178), "pillow-bitmap", 11, 0.75),
)
PROTOCOL_WITH_NAME = "t2_tse_tra zaphod BEEBLEBROX"
PART_WITH_NAME = "ARTHURINA DENT"  # CS: at most 16 characters


def burned_lines() -> list[Burned]:
    """The burned-in lines of series 7 (`synthetic.Burned`: text, tight box, glyph mask)."""
    from medrcube.construction.privacy.synthetic import burn

    zero = np.zeros((BURNED_SIDE, BURNED_SIDE))
    return [burn(zero, text, xy, font, size, value)[1] for text, xy, font, size, value in BURNED_TEXT]


def write_images(root: Path) -> list[dict[str, str]]:
    """Chest radiographs (PNG and JPEG) and their label rows."""
    from PIL import Image

    rng = np.random.default_rng(11)
    rows = []
    plan = [
        ("normal", "", "", "", "PA", ""),
        ("normal", "", "", "", "AP", ""),
        ("pneumonia", "moderate", "12 16 28 32", "consolidation", "PA", ""),
        ("pneumonia", "severe", "44 40 60 58", "consolidation", "AP", ""),
        ("tuberculosis", "mild", "14 10 26 22", "cavity", "PA", "yes"),
        ("pleural effusion", "moderate", "", "", "PA", ""),
        ("cardiomegaly", "mild", "", "", "AP", ""),
        ("lung cancer", "severe", "40 12 56 28", "mass", "LAT", ""),
        ("pulmonary edema", "moderate", "", "", "AP", ""),
        ("sarcoidosis", "mild", "", "", "PA", ""),
        ("pneumothorax", "severe", "", "", "PA", ""),
        ("normal", "", "", "", "LATERAL", ""),
        ("bronchiectasis", "", "", "", "PA", ""),  # not in the bundled ontology: reported as unmapped
    ]
    for i, (dx, grade, box, finding, view, burned) in enumerate(plan):
        img = _body(72, 72, rng, lungs=True)
        if box:
            x0, y0, x1, y1 = (int(v) for v in box.split())
            _blob(img, (y0 + y1) / 2, (x0 + x1) / 2, min(x1 - x0, y1 - y0) / 2.2, 0.7)
        if burned:
            img[0:5, 10:60] = 1.0
        u8 = (img * 255).astype(np.uint8)
        name = f"cxr_{i + 1:03d}.{'jpg' if i == 3 else 'png'}"
        if i == 3:
            exif = Image.Exif()
            exif[0x013B] = EXIF_ARTIST  # Artist
            Image.fromarray(u8).save(root / name, quality=95, exif=exif.tobytes())
        else:
            Image.fromarray(u8).save(root / name)
        mask = ""
        if i == 2:  # one finding outlined by a mask instead of a box
            m = np.zeros_like(u8)
            m[16:32, 12:28] = 255
            mask = f"masks/cxr_{i + 1:03d}_mask.png"
            (root / "masks").mkdir(exist_ok=True)
            Image.fromarray(m).save(root / mask)
            box = ""
        pid, pname = CSV_PATIENTS[i % len(CSV_PATIENTS)]
        rows.append({"file": name, "patient_id": pid, "patient_name": pname, "dx": dx, "grade": grade, "bbox": box,
                     "finding": finding if box else "", "mask": mask, "mask_finding": finding if mask else "", "view": view,
                     "burned_in": burned})  # fmt: skip
    return rows


def write_volumes(root: Path) -> None:
    """Two brain MR volumes: a T1w on a plain 2 mm grid, and a FLAIR tilted 35 degrees about the
    left-right axis (only its sagittal cuts are true planes)."""
    import nibabel as nib

    rng = np.random.default_rng(5)
    x, y, z = np.mgrid[0:32, 0:40, 0:28]
    head = (((x - 15.5) / 13) ** 2 + ((y - 19.5) / 17) ** 2 + ((z - 13.5) / 12) ** 2 <= 1).astype(np.float32)
    vol = head * (600 + 80 * rng.standard_normal(head.shape)).astype(np.float32)
    vol[((x - 10) ** 2 + (y - 26) ** 2 + (z - 16) ** 2) <= 9] = 1100  # a bright lesion
    affine = np.diag([2.0, 2.0, 2.0, 1.0])
    nib.save(nib.Nifti1Image(vol, affine), root / "sub-01_T1w.nii.gz")
    a = np.radians(35)
    tilt = np.array([[2.0, 0, 0, 0], [0, 2 * np.cos(a), -2 * np.sin(a), 0], [0, 2 * np.sin(a), 2 * np.cos(a), 0], [0, 0, 0, 1]])
    nib.save(nib.Nifti1Image(vol, tilt), root / "sub-02_FLAIR.nii.gz")


# A clinical-size archive (de-identification at scale): radiographs of 2,048 px or more with a name burned in at
# the size consoles write, in a folder named after a person who appears in no header.
LARGE_FOLDER = "VOGONSKY_JELTZINA"
LARGE_TEXT = (("VOGONSKY, JELTZINA | MRN 73317331", "dejavu-sans", 40), ("DOB 02.11.1957", "dejavu-sans-mono", 28))
LARGE_PATIENT = {"PatientName": "Vogonsky^Jeltzina", "PatientID": "MRN-73317331", "PatientBirthDate": "19571102"}


def write_large_site(root: str | Path, side: int = 2048, angle: float = 0.0) -> Path:
    """A DICOM folder with one chest radiograph of `side` px carrying burned-in identifying lines
    (no BurnedInAnnotation attribute) and one without text, below a folder named after a person;
    returns the source folder. `angle`: the lines turned counter-clockwise (degrees), placed side
    by side along the frame's left edge. The recipe: `large_site_recipe`."""
    from medrcube.construction.privacy.synthetic import background, burn

    src = Path(root) / "dicom"
    rng = np.random.default_rng(27)
    for i, with_text in enumerate((True, False)):
        ds = _dataset(LARGE_PATIENT, 30 + i, 1, "CR", side, round(side * 5 / 6))
        img = background("xray", side, round(side * 5 / 6), rng)
        if with_text:
            y = side // 40
            for text, face, size in LARGE_TEXT:
                if angle:
                    img, _ = burn(img, text, (y, side // 12), face, round(size * side / 2048), 1.0, angle)
                else:
                    img, _ = burn(img, text, (side // 12, y), face, round(size * side / 2048), 1.0)
                y += round(1.6 * size * side / 2048)
        ds.BodyPartExamined, ds.ViewPosition, ds.PixelSpacing = "CHEST", "PA", [0.15, 0.15]
        _gray(ds, img)
        _save(ds, src / LARGE_FOLDER / f"series-{i + 1}" / "IM0001.dcm")
    (src / LARGE_FOLDER / "notes.txt").write_text("scanned at the front desk\n", encoding="utf-8")  # not DICOM: a console line names it
    return src


def large_site_recipe(root: str | Path, out: str | Path) -> Path:
    """The recipe building `write_large_site(root)` (no reviewer, no region rules: the OCR screen alone is tested)."""
    import yaml

    root = Path(root)
    recipe = {"version": 1, "name": "large-site", "out": str(out),
              "sources": [{"kind": "dicom-folder", "dataset": "large-cr", "path": str(root / "dicom"), "slices": 1}],
              "privacy": {"burned_in": "refuse", "text": "mask", "region_rules": "none", "review_frames": 2},
              "export": {"max_side": 512}}  # fmt: skip
    path = root / "large-site.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    return path


def make_demo_site(root: str | Path) -> DemoSite:
    """Write the demo archive under `root` (replacing a previous one)."""
    import shutil

    base = Path(root)
    if base.exists():
        shutil.rmtree(base)
    dicom, images = base / "dicom", base / "images"
    dicom.mkdir(parents=True)
    images.mkdir(parents=True)
    dicom_rows = write_dicom(dicom)
    with open(base / "dicom_labels.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["folder", "diagnosis", "severity"])
        w.writerows(dicom_rows)
    (base / "volumes").mkdir()
    write_volumes(base / "volumes")
    with open(base / "volume_labels.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["file", "diagnosis"], ["sub-01_T1w.nii.gz", "glioma"], ["sub-02_FLAIR.nii.gz", "multiple sclerosis"]])
    image_rows = write_images(images)
    with open(base / "labels.csv", "w", newline="", encoding="utf-8") as f:
        dw = csv.DictWriter(f, fieldnames=list(image_rows[0]))
        dw.writeheader()
        dw.writerows(image_rows)
    return DemoSite(base, dicom, base / "dicom_labels.csv", images, base / "labels.csv", identifying_values())


def identifying_values() -> set[str]:
    """Every identifying value the demo archive carries (what an export must never contain)."""
    values = {INSTITUTION, PHYSICIAN, PHYSICIAN.replace("^", " "), STATION, PRIVATE_NOTE, EXIF_ARTIST, "42 Magrathea Way, Elsewhere",
              "Kwaltz^Gagrakacka", "Kwaltz Gagrakacka", STUDY_DATE}  # fmt: skip
    for p in PATIENTS:
        values |= set(p.values()) | {p["PatientName"].replace("^", " ")}
    for pid, name in CSV_PATIENTS:
        values |= {pid, name, name.replace("^", " ")}
    values |= {f"STUDY-{s:04d}-ELSE" for s in range(1, 9)}
    values |= {_uid(s, i, 1) for s in range(1, 9) for i in range(1, 5)} | {_uid(s, 0, k) for s in range(1, 9) for k in (2, 3, 4)}
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medrcube.construction.demo", description="Write a synthetic hospital archive to build a cube from.")
    parser.add_argument("root", nargs="?", default="build/demo-site", help="where to write it (default: %(default)s)")
    args = parser.parse_args(argv)
    site = make_demo_site(args.root)
    print(f"demo archive written to {site.root} (dicom/, dicom_labels.csv, volumes/, volume_labels.csv, images/, labels.csv)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
