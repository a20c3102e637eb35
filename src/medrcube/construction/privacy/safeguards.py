"""Privacy of a build: the de-identification profile, burned-in text, the manifest, the final scan.

The profile (`PROFILE`) lists every attribute `deid.deidentify` removes, with the action
the DICOM Basic Application Level Confidentiality Profile (PS3.15 Annex E, Table E.1-1)
gives it and the action medrcube takes. medrcube never exports a DICOM header (items
carry PNG pixels and an allow-list of technical values), so where the standard allows a
milder action (Z: empty value, D: dummy value, U: new UID) medrcube removes the attribute
all the same (X), which the standard permits for an export that is not a DICOM object.

Pixels: an image flagged as carrying burned-in text (BurnedInAnnotation = YES; an
ultrasound frame without a known tissue region; a secondary capture that does not say
NO) is masked with the recipe's boxes or refused, never exported as it is. An
ultrasound frame with a known tissue region (SequenceOfUltrasoundRegions) is cropped to
it: the scanner writes its text outside that region. That header screen is extra
information and an extra cut, not the decision: every frame is then read by the OCR
text detector (`textscreen`), flagged or not, and its text masked or the frame refused.

The manifest says what was removed (attribute keywords and counts, never values) and
what was done to pixels; `scan_tree` searches every byte of every exported file for
every identifying value of every source.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from medrcube.construction.dicom_attributes import ultrasound_regions
from medrcube.construction.privacy import deid
from medrcube.construction.privacy.textscreen import TextLog
from medrcube.construction.recipe import PrivacySpec

if TYPE_CHECKING:
    from pydicom.dataset import Dataset

MANIFEST_NAME = "deid_manifest.json"
PROFILE_DOC_NAME = "DEIDENTIFICATION.md"

# keyword -> action in PS3.15 Table E.1-1 (Basic Profile column). X remove, Z zero-length,
# D dummy, U new UID; "X/Z" etc. name the choices the standard leaves by IOD type.
ANNEX_E_ACTION: dict[str, str] = {
    "PatientName": "Z", "PatientID": "Z", "IssuerOfPatientID": "X", "OtherPatientIDs": "X", "OtherPatientIDsSequence": "X",
    "OtherPatientNames": "X", "PatientBirthName": "X", "PatientMotherBirthName": "X", "PatientBirthDate": "Z",
    "PatientBirthTime": "X", "PatientAge": "X", "PatientSex": "Z", "PatientSize": "X", "PatientWeight": "X",
    "PatientAddress": "X", "PatientTelephoneNumbers": "X", "MilitaryRank": "X", "EthnicGroup": "X", "Occupation": "X",
    "MedicalRecordLocator": "X", "PatientComments": "X", "AdditionalPatientHistory": "X",
    "PatientReligiousPreference": "X", "CountryOfResidence": "X", "RegionOfResidence": "X",
    "ReferringPhysicianName": "Z", "ReferringPhysicianAddress": "X", "ReferringPhysicianTelephoneNumbers": "X",
    "PerformingPhysicianName": "X", "NameOfPhysiciansReadingStudy": "X", "PhysiciansOfRecord": "X",
    "OperatorsName": "X/Z/D", "RequestingPhysician": "X", "ScheduledPerformingPhysicianName": "X",
    "InstitutionName": "X/Z/D", "InstitutionAddress": "X", "InstitutionalDepartmentName": "X", "StationName": "X/Z/D",
    "DeviceSerialNumber": "X/Z/D", "InstitutionCodeSequence": "X/Z/D",
    "AccessionNumber": "Z", "StudyID": "Z", "RequestAttributesSequence": "X", "PerformedProcedureStepID": "X",
    "ScheduledProcedureStepID": "X", "RequestedProcedureID": "X", "AdmissionID": "X",
    "StudyDate": "Z", "SeriesDate": "X/D", "AcquisitionDate": "X/Z", "ContentDate": "Z/D", "InstanceCreationDate": "X/D",
    "OverlayDate": "X", "StudyTime": "Z", "SeriesTime": "X/D", "AcquisitionTime": "X/Z", "ContentTime": "Z/D",
    "InstanceCreationTime": "X/D", "AcquisitionDateTime": "X/D", "PerformedProcedureStepStartDate": "X",
    "PerformedProcedureStepStartTime": "X", "PerformedProcedureStepEndDate": "X", "PerformedProcedureStepEndTime": "X",
    "DateOfLastCalibration": "X", "TimeOfLastCalibration": "X", "TimezoneOffsetFromUTC": "X",
    "StudyInstanceUID": "U", "SeriesInstanceUID": "U", "SOPInstanceUID": "U", "MediaStorageSOPInstanceUID": "U",
    "FrameOfReferenceUID": "U", "InstanceCreatorUID": "U", "IrradiationEventUID": "U",
    "ReferencedImageSequence": "X/Z/U*", "SourceImageSequence": "X/Z/U*", "ReferencedStudySequence": "X/Z",
    "ReferencedPatientSequence": "X", "ImageComments": "X", "StudyComments": "X", "RequestedProcedureDescription": "X/Z",
    "PerformedProcedureStepDescription": "X", "DerivationDescription": "X", "IconImageSequence": "X",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Rule:
    """One line of the profile: what the standard says and what medrcube does."""

    target: str  # an attribute keyword, or a class of elements ("private attributes")
    tag: str  # "(0010,0010)", "(gggg,eeee) odd groups"
    annex_e: str
    action: str  # what medrcube does
    group: str  # patient, staff, institution, identifiers, dates, UIDs, free text, pixels


def _tag(keyword: str) -> str:
    from pydicom.datadict import tag_for_keyword

    t = tag_for_keyword(keyword)
    return f"({t >> 16:04X},{t & 0xFFFF:04X})" if t is not None else ""


def _group(keyword: str) -> str:
    if keyword.endswith("UID"):
        return "UIDs"
    if "Date" in keyword or "Time" in keyword:
        return "dates and times"
    if keyword.startswith(("Patient", "OtherPatient", "Issuer", "MilitaryRank", "EthnicGroup", "Occupation", "MedicalRecord",
                           "AdditionalPatient", "CountryOf", "RegionOf")):  # fmt: skip
        return "patient"
    if "Physician" in keyword or keyword == "OperatorsName":
        return "staff"
    if keyword.startswith(("Institution", "Station", "DeviceSerial")):
        return "institution and device"
    if keyword.endswith(("Comments", "Description")):
        return "free text"
    if keyword.endswith("Sequence") and "Image" in keyword:
        return "references and icons"
    return "identifiers"


def profile() -> tuple[Rule, ...]:
    """The profile medrcube implements: every attribute `deid.deidentify` removes, plus classes."""
    rules = [Rule(kw, _tag(kw), ANNEX_E_ACTION[kw], "X (removed)", _group(kw)) for kw in deid.IDENTIFYING_KEYWORDS]
    rules += [
        Rule("private attributes", "(gggg,eeee), gggg odd", "X", "X (removed, in every sequence)", "private"),
        Rule("overlays", "(60xx,eeee)", "X", "X (removed)", "pixels"),
        Rule("curves", "(50xx,eeee)", "X", "X (removed)", "pixels"),
        Rule("burned-in text", "BurnedInAnnotation (0028,0301) = YES; ultrasound without a tissue region; secondary capture",
             "Clean Pixel Data Option", "masked with the recipe's boxes, or refused (never exported as is)", "pixels"),  # fmt: skip
        Rule("text in any frame", "every exported frame, whatever BurnedInAnnotation says", "Clean Pixel Data Option",
             "read by an OCR text detector; each text region masked, or the frame refused (recipe privacy.text)", "pixels"),  # fmt: skip
        Rule("ultrasound frame", "SequenceOfUltrasoundRegions (0018,6011)", "Clean Pixel Data Option",
             "cropped to its tissue region (text lies outside it)", "pixels"),  # fmt: skip
        Rule("every other attribute", "", "K/C by attribute", "not exported: items carry only the allow-listed technical "
             "values of deid.TECHNICAL_KEYWORDS", "header"),  # fmt: skip
    ]
    return tuple(rules)


def profile_markdown() -> str:
    """The profile as a Markdown document (written beside every export)."""
    lines = [
        "# De-identification profile",
        "",
        f"Profile: {deid.PROFILE_NAME}. Actions of DICOM PS3.15 Annex E, Table E.1-1 (Basic Profile): X remove, "
        "Z replace with an empty value, D replace with a dummy value, U replace with a new UID. medrcube exports no DICOM "
        "header at all, so it removes every attribute below (X) even where the standard allows a milder action.",
        "",
        "| attribute | tag | Annex E | medrcube | group |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r.target} | {r.tag} | {r.annex_e} | {r.action} | {r.group} |" for r in profile()]
    return "\n".join(lines) + "\n"


# -- pixels ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PixelScreen:
    """What must happen to an image's pixels before it may be exported."""

    action: str  # "keep", "crop", "mask" or "refuse"
    reason: str  # why (for the manifest: a category, never a value)
    crop: tuple[int, int, int, int] | None = None  # x0, y0, x1, y1 end-exclusive
    boxes: tuple[tuple[int, int, int, int], ...] = ()

    def apply(self, pixels: np.ndarray) -> np.ndarray:
        if self.action == "crop" and self.crop is not None:
            return deid.crop(pixels, self.crop)
        if self.action == "mask":
            return deid.mask_boxes(pixels, self.boxes, value=0.0)
        if self.action == "refuse":
            raise ValueError(f"image refused ({self.reason}): it must not be exported")
        return pixels


def _mask_or_refuse(reason: str, shape: tuple[int, int], spec: PrivacySpec) -> PixelScreen:
    if spec.burned_in == "mask" and spec.mask:
        h, w = shape
        boxes = tuple(
            (int(np.floor(x0 * w)), int(np.floor(y0 * h)), max(int(np.ceil(x1 * w)), int(np.floor(x0 * w)) + 1),
             max(int(np.ceil(y1 * h)), int(np.floor(y0 * h)) + 1))
            for x0, y0, x1, y1 in spec.mask
        )  # fmt: skip
        return PixelScreen("mask", reason, boxes=tuple((x0, y0, min(x1, w), min(y1, h)) for x0, y0, x1, y1 in boxes))
    return PixelScreen("refuse", reason)


def screen_dicom(ds: Dataset, shape: tuple[int, int], spec: PrivacySpec) -> PixelScreen:
    """The pixel action for a (de-identified) DICOM frame of `shape` (rows, cols)."""
    modality = str(ds.get("Modality", "")).upper()
    flag = str(ds.get("BurnedInAnnotation", "")).upper()
    if modality == "US":
        regions = ultrasound_regions(ds)
        if regions:
            x0, y0, x1, y1 = max(regions, key=lambda r: (r[2] - r[0]) * (r[3] - r[1]))
            h, w = shape
            box = (max(0, x0), max(0, y0), min(w, x1 + 1), min(h, y1 + 1))  # regions are inclusive
            if box[0] < box[2] and box[1] < box[3]:
                return PixelScreen("crop", "ultrasound: cropped to its tissue region", crop=box)
        return _mask_or_refuse("ultrasound without a known tissue region", shape, spec)
    if flag == "YES":
        return _mask_or_refuse("BurnedInAnnotation = YES", shape, spec)
    if deid.needs_pixel_review(ds):
        return _mask_or_refuse(f"{modality or 'unknown'} capture without BurnedInAnnotation = NO", shape, spec)
    return PixelScreen("keep", "no burned-in annotation flagged")


def screen_flag(flag: str | None, shape: tuple[int, int], spec: PrivacySpec) -> PixelScreen:
    """The pixel action for a plain image whose label file states burned-in text (yes/no)."""
    if flag is not None and flag.strip().lower() in {"yes", "y", "true", "1"}:
        return _mask_or_refuse("labelled as carrying burned-in text", shape, spec)
    return PixelScreen("keep", "no burned-in text labelled")


# -- the manifest ------------------------------------------------------------------------------


@dataclass
class Manifest:
    """What was removed and done, counted: written as deid_manifest.json into every export."""

    dicom_files: int = 0
    removed: Counter[str] = field(default_factory=Counter)  # attribute keyword (or class) -> elements removed
    files_with: Counter[str] = field(default_factory=Counter)  # attribute keyword (or class) -> files it was removed from
    pixels: Counter[str] = field(default_factory=Counter)  # "crop: reason" / "mask: reason" / "refuse: reason" -> images
    private_columns: Counter[str] = field(default_factory=Counter)  # label column never read -> rows
    values_searched: int = 0
    leaks: int = 0
    text: TextLog | None = None  # what the OCR found on every frame (textscreen), when it ran
    redactions: Counter[str] = field(default_factory=Counter)  # where free text was redacted -> values
    pixel_scan: dict[str, int] | None = None  # the OCR read of every exported image (pixelscan), once it ran
    review: dict[str, Any] | None = None  # the review sheet and a person's decision (reviewsheet)
    subgroups: dict[str, Any] | None = None  # the subgroup attributes kept, generalised (coarse.py)
    refused_files: Counter[str] = field(default_factory=Counter)  # DICOM files left out whole, by why (never by name)

    def add_deid(self, result: deid.DeidResult) -> None:
        self.dicom_files += 1
        for kw, n in result.counts.items():
            self.removed[kw] += n
            self.files_with[kw] += 1

    def add_pixels(self, screen: PixelScreen, n: int = 1) -> None:
        if screen.action != "keep":
            self.pixels[f"{screen.action}: {screen.reason}"] += n

    def to_dict(self, timing: bool = False) -> dict[str, Any]:
        return {
            "profile": deid.PROFILE_NAME,
            "profile_document": PROFILE_DOC_NAME,
            "dicom_files_deidentified": self.dicom_files,
            "removed_attributes": [
                {"attribute": kw, "annex_e": ANNEX_E_ACTION.get(kw, "X"), "action": "X", "elements": n, "files": self.files_with[kw]}
                for kw, n in sorted(self.removed.items())
            ],
            "dicom_files_refused": dict(sorted(self.refused_files.items())),
            "pixel_actions": dict(sorted(self.pixels.items())),
            "text_in_pixels": self.text.to_dict(timing) if self.text is not None else None,
            "free_text_redactions": dict(sorted(self.redactions.items())),
            "private_label_columns": dict(sorted(self.private_columns.items())),
            "header_export": "none: images are re-encoded as PNG (IHDR, IDAT, IEND only); items carry allow-listed technical values",
            "leak_scan": {"identifying_values_searched": self.values_searched, "found": self.leaks,
                          "pixels": self.pixel_scan if self.pixel_scan is not None else "not run yet"},
            "review": self.review if self.review is not None else {"status": "not reviewed"},
            "subgroup_attributes": self.subgroups if self.subgroups is not None else {"kept": []},
        }

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / MANIFEST_NAME).write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        (folder / PROFILE_DOC_NAME).write_text(profile_markdown(), encoding="utf-8")


# -- the scan ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Leak:
    file: str  # path relative to the scanned root
    source: str  # where the value came from (an attribute keyword, a label column): never the value


_ALNUM = re.compile(rb"[0-9a-z]+")


def _patterns(value: str) -> list[re.Pattern[bytes]]:
    pats = []
    for enc in ("utf-8", "utf-16-le"):
        try:
            raw = value.encode(enc)
        except UnicodeEncodeError:
            continue
        edge = rb"(?<![0-9A-Za-z])" if enc == "utf-8" else b""
        tail = rb"(?![0-9A-Za-z])" if enc == "utf-8" else b""
        pats.append(re.compile(edge + re.escape(raw) + tail, re.IGNORECASE))
    return pats


@dataclass(frozen=True)
class _Needle:
    source: str
    tokens: frozenset[bytes]  # the value's runs of ASCII letters and digits, lower-cased
    patterns: tuple[re.Pattern[bytes], ...]


def _needles(values: Mapping[str, str]) -> list[_Needle]:
    return [_Needle(src, frozenset(_ALNUM.findall(v.lower().encode("utf-8", "ignore"))), tuple(_patterns(v))) for v, src in values.items()]


def _file_tokens(data: bytes) -> set[bytes]:
    """Every run of ASCII letters and digits in the data, as UTF-8 and as UTF-16 (NULs dropped)."""
    low = data.lower()
    return set(_ALNUM.findall(low)) | set(_ALNUM.findall(low.replace(b"\x00", b"")))


def _hits(data: bytes, needles: list[_Needle]) -> list[str]:
    # A value can only occur as a whole token if each of its own tokens occurs as a whole
    # token: one pass over the file rules out almost every value before any pattern runs
    # (a scan of thousands of UIDs over a whole export stays linear in its size).
    tokens = _file_tokens(data)
    return [n.source for n in needles if n.tokens <= tokens and any(p.search(data) for p in n.patterns)]


def scan_bytes(data: bytes, values: Mapping[str, str]) -> list[str]:
    """The sources (keywords) of the identifying values found in `data`, case-insensitively, as whole tokens."""
    return sorted(set(_hits(data, _needles(values))))


def scan_tree(root: Path, values: Mapping[str, str], files: Iterable[Path] | None = None) -> list[Leak]:
    """Search every file under `root` for every identifying value (value -> source).

    Every byte of every file for each value as it was read (UTF-8 and UTF-16), and every
    file but the PNG images (pixels: the OCR screen's part) for the normalised forms of
    `screening` that free-text redaction uses: the name in another order or case, the
    date in another format, the record number without its prefix.
    """
    from medrcube.construction.privacy.screening import Identities, file_text

    needles = _needles(values)
    identities = Identities.of(values)
    leaks = []
    for path in sorted(files if files is not None else (p for p in root.rglob("*") if p.is_file())):
        found = set(_hits(path.read_bytes(), needles))
        if path.suffix.lower() != ".png":
            found |= set(identities.find(file_text(path)))
        for src in sorted(found):
            leaks.append(Leak(path.relative_to(root).as_posix(), src))
    return leaks
