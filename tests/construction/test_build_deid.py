"""De-identification on real DICOM files: what is removed, what is found, what pixels are cut."""

from __future__ import annotations

import numpy as np
import pytest

from medrcube.construction.privacy import deid
from medrcube.construction.readers.sources import PackageFile, read_dicom

CT_SMALL = PackageFile("pydicom", "pydicom", "data/test_files/CT_small.dcm")
OVERLAY_MR = PackageFile("pydicom", "pydicom", "data/test_files/examples_overlay.dcm")


def _all_keywords(ds) -> set[str]:
    return {e.keyword for e in deid._walk(ds)}


def test_deidentify_removes_every_identifying_attribute_of_a_real_ct() -> None:
    ds = read_dicom(CT_SMALL.path())
    before = deid.identifying_values(ds)
    assert {"CompressedSamples^CT1", "CompressedSamples CT1", "1CT1", "JFK IMAGING CENTER", "ABCD1234"} <= before
    result = deid.deidentify(ds)
    cleaned = result.dataset
    assert not _all_keywords(cleaned) & set(deid.IDENTIFYING_KEYWORDS)
    assert not any(e.tag.is_private for e in deid._walk(cleaned))
    assert cleaned.PatientIdentityRemoved == "YES" and cleaned.DeidentificationMethod == deid.PROFILE_NAME
    assert {"PatientName", "PatientID", "InstitutionName", "StudyDate", "OtherPatientIDsSequence"} <= set(result.removed)
    assert any(r.startswith("private tags (") for r in result.removed)
    assert deid.find_leaks(str(cleaned), before) == []
    # The input is untouched, and the pixels survive.
    assert str(ds.PatientName) == "CompressedSamples^CT1"
    assert np.array_equal(cleaned.pixel_array, ds.pixel_array)


def test_deidentify_drops_overlays_and_addresses() -> None:
    ds = read_dicom(OVERLAY_MR.path())
    assert any(e.tag.group == 0x6000 for e in ds)
    result = deid.deidentify(ds)
    assert not any(0x6000 <= e.tag.group <= 0x60FF for e in result.dataset)
    assert "overlay group 6000" in result.removed
    assert {"PatientAddress", "InstitutionAddress", "RequestAttributesSequence", "IconImageSequence"} <= set(result.removed)


def test_find_leaks_matches_whole_tokens_case_insensitively() -> None:
    values = {"ward", "Doe^John", "JFK IMAGING CENTER"}
    assert deid.find_leaks("referred by WARD today", values) == ["ward"]
    assert deid.find_leaks("looking towards the ward's door", values) == ["ward"]
    assert deid.find_leaks("towards the sea", values) == []
    assert deid.find_leaks('{"name": "doe^john"}', values) == ["Doe^John"]
    assert deid.find_leaks("jfk imaging center", values) == ["JFK IMAGING CENTER"]


def test_identifying_values_skip_short_and_short_numeric_values() -> None:
    from pydicom import Dataset

    ds = Dataset()
    ds.PatientName = "Li^Wu"
    ds.PatientID = "0010"
    ds.OtherPatientIDs = "12345"
    ds.PatientSex = "F"
    ds.ImageComments = "Uncompressed"
    found = deid.identifying_values(ds)
    assert found == {"Li^Wu", "Li Wu", "12345"}


def test_technical_metadata_is_an_allow_list() -> None:
    meta = deid.technical_metadata(read_dicom(CT_SMALL.path()))
    assert meta["Modality"] == "CT" and meta["PositionReferenceIndicator"] == "SN"
    assert not set(meta) & set(deid.IDENTIFYING_KEYWORDS)
    assert set(meta) <= set(deid.TECHNICAL_KEYWORDS)


def test_checked_description_insists_on_the_reviewed_value() -> None:
    ds = read_dicom(OVERLAY_MR.path())
    assert deid.checked_description(ds, "StudyDescription", "abdomen^liver") == "abdomen^liver"
    with pytest.raises(ValueError, match="expected 'brain'"):
        deid.checked_description(ds, "StudyDescription", "brain")
    with pytest.raises(ValueError, match="not a descriptive attribute"):
        deid.checked_description(ds, "PatientName", "x")


def test_needs_pixel_review() -> None:
    us = read_dicom(PackageFile("pydicom-data", "data_store", "data/gdcm-US-ALOKA-16.dcm").path())
    assert deid.needs_pixel_review(us)
    assert not deid.needs_pixel_review(read_dicom(CT_SMALL.path()))
    ect = read_dicom(PackageFile("pydicom-data", "data_store", "data/eCT_Supplemental.dcm").path())
    assert ect.BurnedInAnnotation == "NO" and not deid.needs_pixel_review(ect)
    ect.BurnedInAnnotation = "YES"
    assert deid.needs_pixel_review(ect)


def test_crop_and_mask_boxes() -> None:
    img = np.arange(20.0).reshape(4, 5)
    assert np.array_equal(deid.crop(img, (1, 1, 3, 4)), img[1:4, 1:3])
    masked = deid.mask_boxes(img, [(0, 0, 2, 1), (4, 3, 5, 4)], value=-1)
    assert masked[0, :2].tolist() == [-1, -1] and masked[3, 4] == -1
    assert (masked == -1).sum() == 3 and img.min() == 0  # a copy
    with pytest.raises(ValueError, match="outside the 5x4 image"):
        deid.crop(img, (0, 0, 6, 2))
    with pytest.raises(ValueError, match="outside"):
        deid.mask_boxes(img, [(3, 3, 2, 4)])
