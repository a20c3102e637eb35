"""Burned-in text without a header flag, and names in free text: found by the real OCR model
and the free-text screen, masked or redacted, named in the manifest, never exported.

The demo archive's series 7 is a brain MR whose pixels carry its patient's name, record
number, birth date and accession number in four fonts, with no BurnedInAnnotation
attribute at all, and whose ProtocolName holds the name in another order and case;
series 8's BodyPartExamined holds another patient's name (a vocabulary miss).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medrcube.construction import demo
from medrcube.construction.privacy import multiscale, ocr, synthetic
from medrcube.construction.privacy import safeguards as privacy
from medrcube.construction.privacy.screening import Identities, tokens

NAME_WORDS = ("zaphod", "beeblebrox", "arthurina")


def _pixels(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("L"), dtype=np.float64) / 255.0


def _series7(release: Path) -> tuple[dict, list[tuple[dict, Path]]]:
    manifest = json.loads((release / privacy.MANIFEST_NAME).read_text(encoding="utf-8"))
    frames = [f for f in manifest["text_in_pixels"]["frames"] if f["dataset"] == "demo-dicom" and f["source"].startswith("series 7 ")]
    return manifest, [(f, release / "demo-dicom" / f.get("image", "")) for f in frames]


def _identities(demo_root: Path) -> Identities:
    from medrcube.construction.privacy import deid
    from medrcube.construction.readers.sources import read_dicom

    values: dict[str, str] = {}
    for p in sorted((demo_root / "build" / "demo-site" / "dicom").rglob("*.dcm")):
        values.update(deid.identifying_items(read_dicom(p, stop_before_pixels=True)))
    return Identities.of(values)


def test_unflagged_frames_with_burned_in_text_export_no_legible_identifying_text(demo_root: Path, demo_build) -> None:
    manifest, frames = _series7(demo_build.release)
    assert len(frames) == 2 and all(f["header"] == "BurnedInAnnotation absent" and f["exported"] for f, _ in frames)
    lines = demo.burned_lines()
    reader = ocr.shared_reader()
    identities = _identities(demo_root)
    for entry, png in frames:
        img = _pixels(png)
        assert img.shape == (demo.BURNED_SIDE, demo.BURNED_SIDE)  # exported at source size: boxes compare 1:1
        masked = np.zeros(img.shape, dtype=bool)
        for x0, y0, x1, y1 in entry["regions"]:
            masked[y0:y1, x0:x1] = True
        for line in lines:
            # The manifest names a region over every glyph of every burned line ...
            assert synthetic.coverage(line, masked) == 1.0, (png.name, line.text)
            # ... and nothing of the line is left in the exported pixels.
            assert abs(synthetic.glyph_correlation(line, img)) < 0.1, (png.name, line.text)
        # The OCR model itself reads nothing identifying in the export.
        read = " ".join(r.text for r in multiscale.read(reader, img))
        assert identities.find(read) == [] and not set(tokens(read)) & {"beeblebrox", "zaphod", "48151623", "1961", "27182818"}
    # The same frames before masking: the model does read the name, so the check above means something.
    raw = demo.burned_lines()
    before = np.zeros((demo.BURNED_SIDE, demo.BURNED_SIDE)) + 0.3
    for line in raw:
        before = np.where(line.glyphs, line.value, before)
    assert "PatientName" in identities.find(" ".join(r.text for r in multiscale.read(reader, before)))
    ocr_log = manifest["text_in_pixels"]
    assert ocr_log["engine"].startswith("rapidocr ") and "PP-OCR" in ocr_log["engine"]
    assert ocr_log["by_header"]["BurnedInAnnotation absent"]["with_text"] == 2
    # No frame without text had any region masked.
    assert all(f["source"].startswith("series 7 ") for f in ocr_log["frames"] if f["regions"])


def test_ocr_time_per_frame_is_recorded(demo_build) -> None:
    # The time itself is measured in benchmarks/deid_ocr.py, never asserted here (a loaded machine).
    report = json.loads((demo_build.report_dir / "build_report.json").read_text(encoding="utf-8"))
    assert report["privacy"]["text_in_pixels"]["frames_screened"] >= 25
    assert report["privacy"]["text_in_pixels"]["cpu_seconds_per_frame"] > 0


def test_a_name_in_free_text_reaches_no_output_in_any_spelling(demo_root: Path, demo_build) -> None:
    identities = _identities(demo_root)
    texts = {p: p.read_text(encoding="utf-8") for p in [*demo_build.release.rglob("*.json"), *demo_build.report_dir.rglob("*"),
                                                          demo_build.release / "README.md"] if p.is_file()}  # fmt: skip
    texts.update({p: privacy_text(p) for p in demo_build.hf.rglob("*.arrow")})
    assert any(p.name == "build_report.md" for p in texts) and any(p.suffix == ".arrow" for p in texts)
    for p, text in texts.items():
        assert identities.find(text) == [], p
        assert not [w for w in NAME_WORDS if w in text.lower()], p
    # The derivation of series 7's protocol item quotes the vocabulary term, not the free text.
    recs = [r for r in json.loads((demo_build.release / "demo-dicom" / "test.json").read_text(encoding="utf-8"))
            if r["task"] == "Imaging Protocol Recognition" and "ProtocolName" in r["meta"]["derivation"]]  # fmt: skip
    assert any("ProtocolName (0018,1030) names 't2'" in r["meta"]["derivation"] for r in recs)
    assert not any("ProtocolName (0018,1030) = " in r["meta"]["derivation"] for r in recs)
    # The vocabulary miss is counted, its value redacted.
    report = json.loads((demo_build.report_dir / "build_report.json").read_text(encoding="utf-8"))
    assert {"field": "body part", "value": "[redacted]", "why": "not in the vocabulary's body_part table", "images": 1} in report["mapping"]["unmapped"]
    assert report["privacy"]["free_text_redactions"] == {"build report": 1}


def privacy_text(path: Path) -> str:
    from medrcube.construction.privacy.screening import file_text

    text = file_text(path)
    assert "demo-dicom" in text  # the string columns were read, not just bytes
    return text


def test_refuse_leaves_frames_with_text_out_and_counts_them(demo_root: Path, site_recipe, tmp_path: Path) -> None:
    from medrcube.cli import main

    recipe = site_recipe(demo_root, "site-text-refuse", {"privacy": {"burned_in": "mask", "mask": [[0, 0, 1, 0.1]], "text": "refuse"},
                                                         "export": {"hf": None, "report": "report"}})  # fmt: skip
    assert main(["build", str(recipe), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    release = tmp_path / "o" / "release"
    manifest, frames = _series7(release)
    assert len(frames) == 2 and all(f["action"] == "refuse" and not f["exported"] for f, _ in frames)
    assert manifest["text_in_pixels"]["frames_refused"] == 2 and manifest["text_in_pixels"]["action"] == "refuse"
    report = json.loads((tmp_path / "o" / "report" / "build_report.json").read_text(encoding="utf-8"))
    assert report["source_problems"]["refused: text found in the pixels"] == 2
    recs = [r for p in release.glob("*/test.json") for r in json.loads(p.read_text(encoding="utf-8"))]
    assert not [r for r in recs if r["meta"]["source"]["ref"].startswith("series 7 ")]


def test_the_recipe_key_is_checked(demo_root: Path, site_recipe) -> None:
    from medrcube.construction.recipe import RecipeError, load_recipe

    assert load_recipe(site_recipe(demo_root, "site-text-default")).privacy.text == "mask"
    with pytest.raises(RecipeError, match=r"privacy\.text"):
        load_recipe(site_recipe(demo_root, "site-text-bad", {"privacy": {"burned_in": "refuse", "text": "keep"}}))


def test_without_the_bundled_models_the_build_says_how_to_install_them(tmp_path: Path) -> None:
    """A rapidocr without its model files (a stripped install) is an error naming the fix, never a download."""
    fake = tmp_path / "site" / "rapidocr"
    (fake / "models").mkdir(parents=True)
    (fake / "__init__.py").write_text("", encoding="utf-8")
    code = "from medrcube.construction.privacy import ocr\ntry:\n    ocr.bundled_models()\nexcept ocr.OcrUnavailable as e:\n    print(e)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(fake.parent)}, check=True)
    assert "no det model" in out.stdout and "pip install 'medrcube[ocr]'" in out.stdout


def test_identity_forms_cover_the_spellings_a_person_writes() -> None:
    ids = Identities.of({"Beeblebrox^Zaphod^Q": "PatientName", "MRN-48151623": "PatientID", "19610523": "PatientBirthDate",
                         "Saint Elsewhere Memorial Hospital": "InstitutionName"})  # fmt: skip
    hits = ["ZAPHOD BEEBLEBROX", "beeblebrox, zaphod", "Z. Beeblebrox", "Beeblebrox Z Q", "zaphod q beeblebrox", "t2_zaphod",
            "ZaphodBeeblebrox", "Zaphod", "born 23.05.1961", "05/23/1961", "1961-05-23", "23 May 1961", "May 23, 1961",
            "23-may-1961", "23/05/61", "mrn 48151623", "id48151623", "Saint-Elsewhere memorial HOSPITAL"]  # fmt: skip
    for text in hits:
        assert ids.find(text), text
    for text in ("t2_tse_tra", "CHEST", "axial brain", "box [23, 5, 61, 80]", "19610524", "Saint Mary Hospital", "1961"):
        assert ids.find(text) == [], text
    assert ids.redact("t2_tse_tra zaphod BEEBLEBROX (23.05.1961)") == ("t2_tse_tra [redacted] ([redacted])", 2)


def test_the_final_scan_finds_normalised_forms_but_not_in_pixels(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"x": "scan of ZAPHOD beeblebrox"}', encoding="utf-8")
    (tmp_path / "b.md").write_text("born 23.05.1961\n", encoding="utf-8")
    (tmp_path / "c.png").write_bytes(b"\x89PNG....zaphod beeblebrox....")  # pixels are the OCR's part
    (tmp_path / "d.txt").write_text("nothing here", encoding="utf-8")
    leaks = privacy.scan_tree(tmp_path, {"Beeblebrox^Zaphod": "PatientName", "19610523": "PatientBirthDate"})
    assert [(x.file, x.source) for x in leaks] == [("a.json", "PatientName"), ("b.md", "PatientBirthDate")]
