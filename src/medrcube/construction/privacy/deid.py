"""De-identification: what must never leave the building, and checks that it did not.

The profile below is a documented subset of the DICOM Basic Application Level
Confidentiality Profile (PS3.15 Annex E): the attributes that name or locate a person
(patient, staff, institution, device), the dates and times that could re-identify a study,
the UIDs that link it back to the archive, free-text comments, private tags, overlays
and icon images (which may carry burned-in text). A cube never copies DICOM headers:
items are written from an allow-list of technical attributes only. These functions serve
both the mini cube's builder and a hospital's own recipe:

- `deidentify(ds)` returns a cleaned copy and a manifest of what was removed;
- `identifying_values(ds)` lists the identifying strings of a file, so an export can be
  searched for them (`find_leaks`);
- `crop` and `mask_boxes` remove burned-in text regions from pixels, and
  `needs_pixel_review` says when a frame may carry such text.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pydicom.dataelem import DataElement
    from pydicom.dataset import Dataset

PROFILE_NAME = "medrcube basic profile (subset of DICOM PS3.15 Annex E)"

# Attributes removed by `deidentify` and searched for by `identifying_values`.
IDENTIFYING_KEYWORDS: tuple[str, ...] = (
    # the patient
    "PatientName", "PatientID", "IssuerOfPatientID", "OtherPatientIDs", "OtherPatientIDsSequence",
    "OtherPatientNames", "PatientBirthName", "PatientMotherBirthName", "PatientBirthDate", "PatientBirthTime",
    "PatientAge", "PatientSex", "PatientSize", "PatientWeight", "PatientAddress", "PatientTelephoneNumbers",
    "MilitaryRank", "EthnicGroup", "Occupation", "MedicalRecordLocator", "PatientComments",
    "AdditionalPatientHistory", "PatientReligiousPreference", "CountryOfResidence", "RegionOfResidence",
    # staff
    "ReferringPhysicianName", "ReferringPhysicianAddress", "ReferringPhysicianTelephoneNumbers",
    "PerformingPhysicianName", "NameOfPhysiciansReadingStudy", "PhysiciansOfRecord", "OperatorsName",
    "RequestingPhysician", "ScheduledPerformingPhysicianName",
    # institution and device
    "InstitutionName", "InstitutionAddress", "InstitutionalDepartmentName", "StationName",
    "DeviceSerialNumber", "InstitutionCodeSequence",
    # identifiers of the study
    "AccessionNumber", "StudyID", "RequestAttributesSequence", "PerformedProcedureStepID",
    "ScheduledProcedureStepID", "RequestedProcedureID", "AdmissionID",
    # dates and times
    "StudyDate", "SeriesDate", "AcquisitionDate", "ContentDate", "InstanceCreationDate", "OverlayDate",
    "StudyTime", "SeriesTime", "AcquisitionTime", "ContentTime", "InstanceCreationTime",
    "AcquisitionDateTime", "PerformedProcedureStepStartDate", "PerformedProcedureStepStartTime",
    "PerformedProcedureStepEndDate", "PerformedProcedureStepEndTime", "DateOfLastCalibration",
    "TimeOfLastCalibration", "TimezoneOffsetFromUTC",
    # links back to the archive
    "StudyInstanceUID", "SeriesInstanceUID", "SOPInstanceUID", "MediaStorageSOPInstanceUID",
    "FrameOfReferenceUID", "InstanceCreatorUID", "IrradiationEventUID", "ReferencedImageSequence",
    "SourceImageSequence", "ReferencedStudySequence", "ReferencedPatientSequence",
    # free text that may name anyone
    "ImageComments", "StudyComments", "RequestedProcedureDescription", "PerformedProcedureStepDescription",
    "DerivationDescription",
    # pixels outside the main image
    "IconImageSequence",
)  # fmt: skip

# The only attributes a recipe may read into an item (answers and their derivations).
TECHNICAL_KEYWORDS: tuple[str, ...] = (
    "Modality", "BodyPartExamined", "ViewPosition", "ImageType", "ProtocolName", "SequenceName",
    "ScanningSequence", "SequenceVariant", "ScanOptions", "MRAcquisitionType", "RepetitionTime", "EchoTime",
    "PulseSequenceName", "AcquisitionContrast", "ImageOrientationPatient", "PixelSpacing",
    "PhotometricInterpretation", "SOPClassUID", "BurnedInAnnotation", "Laterality", "PatientPosition",
    "PositionReferenceIndicator", "SliceLocation",
)  # fmt: skip
# Free-text attributes that document what an image shows (a study titled with its
# diagnosis, a series named after its organ). Free text can name anyone, so a recipe reads
# them only through `checked_description`, which insists on the value it expects.
DESCRIPTIVE_KEYWORDS: tuple[str, ...] = (
    "StudyDescription", "SeriesDescription", "AcquisitionDeviceProcessingDescription",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class DeidResult:
    dataset: Dataset  # cleaned
    removed: tuple[str, ...]  # "PatientName", "private tags (12)", "overlay group 6000", ...
    profile: str = PROFILE_NAME
    notes: tuple[str, ...] = field(default_factory=tuple)
    # How many elements of each kind were removed ("PatientName": 1, "private tags": 12);
    # attribute keywords and counts only, never values: this is what an export's manifest carries.
    counts: dict[str, int] = field(default_factory=dict)


def _walk(ds: Dataset) -> Iterator[DataElement]:
    """Every data element of a dataset, descending into sequences."""
    for elem in ds:
        yield elem
        if elem.VR == "SQ":
            for item in elem.value:
                yield from _walk(item)


# UIDs that name a kind of object, not an instance of one: kept (a recipe reads SOPClassUID).
_CLASS_UIDS = frozenset({"SOPClassUID", "ReferencedSOPClassUID", "TransferSyntaxUID", "CodingSchemeUID", "ContextGroupExtensionCreatorUID"})


def _beyond_the_list(elem: DataElement) -> bool:
    """A person name, date, time or instance UID that IDENTIFYING_KEYWORDS does not name."""
    if elem.tag.group in (0x0002,) or elem.tag.is_private:
        return False
    if elem.VR in ("PN", "DA", "DT", "TM"):
        return True
    return elem.VR == "UI" and not (elem.keyword.endswith("ClassUID") or elem.keyword in _CLASS_UIDS)


def deidentify(ds: Dataset) -> DeidResult:
    """A copy of `ds` without identifying attributes, private tags, overlays or icons.

    Sets PatientIdentityRemoved = YES and names the profile in DeidentificationMethod.
    The manifest lists each removed keyword once (however often it occurred).
    """
    out = copy.deepcopy(ds)
    removed: dict[str, int] = {}

    def clean(d: Dataset) -> None:
        for kw in IDENTIFYING_KEYWORDS:
            if kw in d:
                del d[kw]
                removed[kw] = removed.get(kw, 0) + 1
        # Beyond the list: every other person name, date, time and instance UID, wherever it is (a
        # console's own attributes, a name in an SR or a request sequence). No header is exported.
        for elem in [e for e in d if _beyond_the_list(e)]:
            del d[elem.tag]
            kind = {"PN": "other person names", "UI": "other instance UIDs"}.get(elem.VR, "other dates and times")
            removed[kind] = removed.get(kind, 0) + 1
        for group in sorted({e.tag.group for e in d if 0x6000 <= e.tag.group <= 0x60FF and e.tag.group % 2 == 0}):
            # An overlay in the pixel data's unused high bits (retired, but written by old consoles):
            # the decoder keeps BitsStored bits only, so the drawing is dropped with the group.
            bit = d.get((group, 0x0102))
            if (group, 0x3000) not in d and bit is not None and int(bit.value or 0) > 0:
                removed[f"overlay in the pixel data's high bits, group {group:04X} (cleared)"] = 1
        for tag in [e.tag for e in d if 0x6000 <= e.tag.group <= 0x60FF and e.tag.group % 2 == 0]:
            del d[tag]
            removed[f"overlay group {tag.group:04X}"] = 1
        # Curves (retired groups 50xx) can carry annotations drawn by a workstation.
        for tag in [e.tag for e in d if 0x5000 <= e.tag.group <= 0x50FF and e.tag.group % 2 == 0]:
            del d[tag]
            removed[f"curve group {tag.group:04X}"] = 1
        for elem in list(d):
            if elem.VR == "SQ":
                for item in elem.value:
                    clean(item)

    n_private = sum(1 for e in _walk(out) if e.tag.is_private)
    out.remove_private_tags()
    clean(out)
    if hasattr(out, "file_meta") and "MediaStorageSOPInstanceUID" in out.file_meta:
        del out.file_meta["MediaStorageSOPInstanceUID"]
        removed["MediaStorageSOPInstanceUID"] = removed.get("MediaStorageSOPInstanceUID", 0) + 1
    out.PatientIdentityRemoved = "YES"
    out.DeidentificationMethod = PROFILE_NAME
    manifest = sorted(removed)
    counts = dict(sorted(removed.items()))
    if n_private:
        manifest.append(f"private tags ({n_private})")
        counts["private tags"] = n_private
    return DeidResult(dataset=out, removed=tuple(manifest), counts=counts)


# The attributes whose values identify someone or something, searched for in exports.
# (Free-text comments are removed by `deidentify` but not searched for: their words,
# "Uncompressed" say, are not identities; sex, age, size and weight alone are not either.)
LEAK_KEYWORDS: frozenset[str] = frozenset(IDENTIFYING_KEYWORDS) - {
    "PatientSex", "PatientAge", "PatientSize", "PatientWeight", "TimezoneOffsetFromUTC", "ImageComments",
    "StudyComments", "RequestedProcedureDescription", "PerformedProcedureStepDescription", "DerivationDescription",
    "AdditionalPatientHistory", "PatientComments", "IconImageSequence", "ReferencedImageSequence",
    "SourceImageSequence",
}  # fmt: skip


def identifying_items(ds: Dataset, min_length: int = 4, min_digits: int = 5) -> dict[str, str]:
    """The identifying strings of a dataset, each with the keyword it came from (value -> keyword).

    As `identifying_values`; the keyword lets a leak be reported without printing the value.
    """
    items: dict[str, str] = {}
    for elem in _walk(ds):
        person = elem.VR == "PN" and not elem.tag.is_private  # any person's name, listed or not
        if (elem.keyword not in LEAK_KEYWORDS and not person) or elem.VR == "SQ" or elem.value is None:
            continue
        raw = elem.value if elem.VM > 1 else [elem.value]
        for v in raw:
            text = str(v).strip()
            candidates = {text}
            if elem.VR == "PN":
                candidates.add(" ".join(text.replace("^", " ").replace("=", " ").split()))
            for c in sorted(candidates):
                if len(c) >= min_length and not (c.isdigit() and len(c) < min_digits):
                    items.setdefault(c, elem.keyword or "a person name")
    return items


def identifying_values(ds: Dataset, min_length: int = 4, min_digits: int = 5) -> set[str]:
    """The identifying strings of a dataset (names, IDs, institutions, dates, UIDs), for leak checks.

    A person name is also listed with its '^' separators as spaces ("Doe^John" and
    "Doe John"). Values shorter than `min_length`, and all-digit values shorter than
    `min_digits` (an ID such as "0010" is also a DICOM group number), are dropped so that
    a search does not flag every short word or number.
    """
    return set(identifying_items(ds, min_length, min_digits))


def technical_metadata(ds: Dataset, keywords: Sequence[str] = TECHNICAL_KEYWORDS) -> dict[str, object]:
    """The allow-listed technical attributes present in `ds`, as plain JSON values."""
    out: dict[str, object] = {}
    for kw in keywords:
        if kw not in ds or ds[kw].value in (None, ""):
            continue
        v = ds[kw].value
        if isinstance(v, (list, tuple)) or getattr(ds[kw], "VM", 1) > 1:
            out[kw] = [_plain(x) for x in v]
        else:
            out[kw] = _plain(v)
    return out


def checked_description(ds: Dataset, keyword: str, expected: str) -> str:
    """A descriptive free-text attribute, returned only when it equals `expected` (case- and space-insensitive).

    Raises ValueError naming the attribute otherwise, so that a changed source file
    stops the build instead of carrying unreviewed text into a cube.
    """
    if keyword not in DESCRIPTIVE_KEYWORDS:
        raise ValueError(f"{keyword} is not a descriptive attribute; expected one of {DESCRIPTIVE_KEYWORDS}")
    got = str(ds.get(keyword, "") or "")
    if " ".join(got.split()).casefold() != " ".join(expected.split()).casefold():
        raise ValueError(f"{keyword} is {got!r}; expected {expected!r} (the source file changed: review it before use)")
    return " ".join(got.split())


def _plain(v: Any) -> object:  # a DICOM element's value: any of pydicom's value types
    if isinstance(v, (int, float, str)):
        return v
    try:
        return float(v)  # DSfloat, IS
    except (TypeError, ValueError):
        return str(v)


def find_leaks(text: str, values: Iterable[str]) -> list[str]:
    """The identifying values that occur in `text` as whole tokens (case-insensitive), sorted.

    "ward" (a referring physician) is found in "ward" but not in "towards".
    """
    found = []
    for v in sorted(set(values)):
        if v and re.search(r"(?<![0-9A-Za-z])" + re.escape(v) + r"(?![0-9A-Za-z])", text, flags=re.IGNORECASE):
            found.append(v)
    return found


def needs_pixel_review(ds: Dataset) -> bool:
    """True unless the file states BurnedInAnnotation = NO for a non-ultrasound image.

    Ultrasound and secondary-capture frames carry on-screen text so often that a
    recipe must always crop or mask them; elsewhere an explicit YES (or no statement on
    a capture) also requires it.
    """
    modality = str(ds.get("Modality", "")).upper()
    flag = str(ds.get("BurnedInAnnotation", "")).upper()
    if modality in {"US", "OT", "SC"}:
        return True
    return flag == "YES"


def crop(img: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """Keep the pixels of box (x0, y0, x1, y1), end-exclusive; raises if the box leaves the image."""
    x0, y0, x1, y1 = box
    h, w = img.shape[:2]
    if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
        raise ValueError(f"crop box {box} is outside the {w}x{h} image")
    return np.ascontiguousarray(img[y0:y1, x0:x1])


def mask_boxes(img: np.ndarray, boxes: Sequence[tuple[int, int, int, int]], value: float = 0) -> np.ndarray:
    """A copy of `img` with each box (x0, y0, x1, y1, end-exclusive) filled with `value`."""
    out = np.array(img, copy=True)
    h, w = out.shape[:2]
    for x0, y0, x1, y1 in boxes:
        if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
            raise ValueError(f"mask box {(x0, y0, x1, y1)} is outside the {w}x{h} image")
        out[y0:y1, x0:x1] = value
    return out
