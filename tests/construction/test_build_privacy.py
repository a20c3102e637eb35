"""Privacy: the documented de-identification profile, burned-in annotation screening (mask or
refuse), and a manifest that carries keywords and counts, never values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydicom.dataset import Dataset

from medrcube.construction.privacy import deid
from medrcube.construction.privacy import safeguards as privacy
from medrcube.construction.readers.sources import PackageFile, read_dicom
from medrcube.construction.recipe import PrivacySpec

MASK = PrivacySpec(burned_in="mask", mask=((0.0, 0.0, 1.0, 0.1), (0.9, 0.9, 1.0, 1.0)))
REFUSE = PrivacySpec()


def test_the_profile_documents_every_removed_attribute_with_its_annex_e_action() -> None:
    rules = privacy.profile()
    attrs = [r for r in rules if r.target in deid.IDENTIFYING_KEYWORDS]
    assert [r.target for r in attrs] == list(deid.IDENTIFYING_KEYWORDS)
    assert set(privacy.ANNEX_E_ACTION) == set(deid.IDENTIFYING_KEYWORDS)
    for r in attrs:
        assert r.tag.startswith("(") and r.annex_e in {"X", "Z", "D", "U", "X/Z", "X/D", "Z/D", "X/Z/D", "X/Z/U*"} and r.action.startswith("X")
    assert {r.target for r in rules} >= {"private attributes", "overlays", "curves", "burned-in text"}
    doc = privacy.profile_markdown()
    assert "| PatientName | (0010,0010) | Z | X (removed) | patient |" in doc
    assert "| StudyInstanceUID | (0020,000D) | U | X (removed) | UIDs |" in doc


def _ds(modality: str, **kw) -> Dataset:
    ds = Dataset()
    ds.Modality = modality
    for k, v in kw.items():
        setattr(ds, k, v)
    return ds


def test_burned_in_screening_masks_refuses_crops_or_keeps() -> None:
    shape = (100, 200)
    flagged = _ds("CT", BurnedInAnnotation="YES")
    assert privacy.screen_dicom(flagged, shape, REFUSE).action == "refuse"
    masked = privacy.screen_dicom(flagged, shape, MASK)
    assert masked.action == "mask" and masked.boxes == ((0, 0, 200, 10), (180, 90, 200, 100))
    img = masked.apply(np.ones(shape))
    assert img[:10].max() == 0 and img[90:, 180:].max() == 0 and img[10:90].min() == 1
    assert privacy.screen_dicom(_ds("CT", BurnedInAnnotation="NO"), shape, REFUSE).action == "keep"
    assert privacy.screen_dicom(_ds("MR"), shape, REFUSE).action == "keep"
    capture = privacy.screen_dicom(_ds("OT"), shape, REFUSE)
    assert capture.action == "refuse" and capture.reason == "OT capture without BurnedInAnnotation = NO"
    us = _ds("US")
    assert privacy.screen_dicom(us, shape, REFUSE).reason == "ultrasound without a known tissue region"
    region = Dataset()
    region.RegionDataType = 1
    region.RegionLocationMinX0, region.RegionLocationMinY0, region.RegionLocationMaxX1, region.RegionLocationMaxY1 = 20, 15, 179, 94
    us.SequenceOfUltrasoundRegions = [region]
    crop = privacy.screen_dicom(us, shape, REFUSE)
    assert crop.action == "crop" and crop.crop == (20, 15, 180, 95) and crop.apply(np.zeros(shape)).shape == (80, 160)
    assert privacy.screen_flag("Yes", shape, REFUSE).action == "refuse" and privacy.screen_flag("no", shape, REFUSE).action == "keep"
    with pytest.raises(ValueError, match="must not be exported"):
        privacy.screen_dicom(flagged, shape, REFUSE).apply(np.ones(shape))


def test_the_manifest_counts_keywords_and_never_holds_a_value() -> None:
    ds = read_dicom(PackageFile("pydicom", "pydicom", "data/test_files/CT_small.dcm").path())
    values = deid.identifying_values(ds)
    manifest = privacy.Manifest()
    manifest.add_deid(deid.deidentify(ds))
    manifest.add_deid(deid.deidentify(ds))
    d = manifest.to_dict()
    removed = {a["attribute"]: a for a in d["removed_attributes"]}
    assert removed["PatientName"]["files"] == 2 and removed["private tags"]["elements"] > 2
    text = json.dumps(d)
    assert deid.find_leaks(text, values) == []


def test_refused_images_are_left_out_and_counted(demo_root: Path, site_recipe, tmp_path: Path) -> None:
    from medrcube.construction.pipeline import build

    result = build(site_recipe(demo_root, "site-refuse", {"privacy": {"burned_in": "refuse"}, "export": {"hf": None, "report": "report"}}),
                   tmp_path / "out")  # fmt: skip
    manifest = json.loads((result.release / privacy.MANIFEST_NAME).read_text(encoding="utf-8"))
    assert manifest["pixel_actions"] == {"crop: ultrasound: cropped to its tissue region": 1, "refuse: BurnedInAnnotation = YES": 1,
                                         "refuse: labelled as carrying burned-in text": 1}  # fmt: skip
    recs = [r for p in result.release.glob("*/test.json") for r in json.loads(p.read_text(encoding="utf-8"))]
    assert not [r for r in recs if r["dataset"] == "demo-dicom" and r["modality"] == "X-Ray"]  # the flagged radiograph
    assert "labels row 5" not in json.dumps([r["meta"]["source"] for r in recs])  # the flagged PNG
    report = json.loads((result.report_dir / "build_report.json").read_text(encoding="utf-8"))
    assert report["source_problems"]["refused: BurnedInAnnotation = YES"] == 1 and result.hf is None
