"""The construction pipeline end to end, on a generated DICOM folder (identifying tags and
BurnedInAnnotation = YES on purpose), NIfTI volumes and a PNG+CSV folder."""

from __future__ import annotations

import io
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from medrcube.construction.pipeline import BuildError, build
from medrcube.construction.privacy import deid
from medrcube.construction.privacy import safeguards as privacy
from medrcube.construction.readers.sources import read_dicom
from medrcube.construction.stages.distractors import exclusivity_problems
from medrcube.construction.stages.ontology import load_ontology
from medrcube.cube import load_cube
from medrcube.cube.item import LETTERS
from medrcube.taxonomy import TASK_NAMES, Level, task_level


def _records(release: Path) -> list[dict[str, Any]]:
    out = []
    for p in sorted(release.glob("*/test.json")):
        out += json.loads(p.read_text(encoding="utf-8"))
    return out


def _options(rec: dict[str, Any]) -> list[str]:
    return [rec[f"option_{x}"] for x in LETTERS if f"option_{x}" in rec]


def _pixels(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("L"), dtype=float)


def test_the_export_loads_strictly_and_covers_every_task(demo_build) -> None:
    cube = load_cube(demo_build.release, strict=True)
    assert [p for p in cube.problems if p.severity == "error"] == []
    assert {i.dataset for i in cube} == {"demo-dicom", "demo-cxr", "demo-mri"}
    assert {i.task for i in cube} == set(TASK_NAMES)
    assert {i.modality for i in cube} == {"CT", "MRI", "X-Ray", "US"}
    assert len(cube) == demo_build.report.exported_items > 50


def test_answers_come_from_the_metadata_they_quote(demo_build) -> None:
    recs = _records(demo_build.release)
    for r in recs:
        opts = _options(r)
        assert 2 <= len(opts) <= 4 and len(set(opts)) == len(opts), r["id"]
        assert opts.count(r["gt_answer"]) == 1 and opts[LETTERS.index(r["correct_index"])] == r["gt_answer"], r["id"]
        meta = r["meta"]
        assert meta["derivation"].strip() and meta["synthetic"] is False and meta["review"] == "not reviewed"
        assert re.fullmatch(r"[a-z0-9-]+/\d{3}", meta["chain"]), r["id"]
        # The source is named by position, never by a file path or a UID.
        assert "/" not in meta["source"]["ref"] and ".dcm" not in json.dumps(meta)
    for r in recs:
        if r["task"] == "Modality Recognition" and r["dataset"] == "demo-dicom":
            assert "Modality (0008,0060)" in r["meta"]["derivation"]


def test_distractors_are_exclusive_and_follow_their_strategy(demo_build) -> None:
    onto = load_ontology()
    strategies: Counter = Counter()
    for r in _records(demo_build.release):
        s = r["meta"]["distractor_strategy"]
        strategies[s] += 1
        if s == "pool":
            continue
        answer, distractors = r["meta"]["concepts"]["answer"], r["meta"]["concepts"]["distractors"]
        assert exclusivity_problems(onto, [answer, *distractors]) == [], r["id"]
        assert sorted(_options(r)) == sorted(onto[c].name for c in [answer, *distractors])
        if s == "similar":
            assert set(distractors) <= set(onto.similar_to(answer)), r["id"]
        else:
            assert not set(distractors) & onto[answer].similar, r["id"]
        for c in distractors:
            assert onto[c].category == onto[answer].category and onto[c].in_region(r["parts"]), (r["id"], c)
    assert strategies["similar"] >= 5 and strategies["normal"] >= 5


def test_cells_are_filled_to_their_targets_and_letters_balanced(demo_build) -> None:
    report = json.loads((demo_build.report_dir / "build_report.json").read_text(encoding="utf-8"))
    recs = _records(demo_build.release)
    counts = Counter((r["parts"], r["modality"], r["task"]) for r in recs)
    for c in report["cells"]:
        cell = (c["part"], c["modality"], c["task"])
        assert counts[cell] == c["selected"]
        assert c["selected"] <= c["target"] + c["chain_extras"], cell
        assert c["selected"] >= min(c["target"], c["drafted"]), cell  # nothing was held out
    assert next(c for c in report["cells"] if (c["part"], c["modality"], c["task"]) == ("Chest", "X-Ray", "Disease Diagnosis"))["target"] == 30
    assert max(counts.values()) <= 30 and report["sampling_surplus"] > 0
    assert sum(1 for n in counts.values() if n >= 24) >= 5  # the Brain/MRI cells reach the recipe's per_cell
    groups: dict[tuple[str, int], Counter] = defaultdict(Counter)
    for r in recs:
        groups[(r["task"], len(_options(r)))][r["correct_index"]] += 1
    for (task, n), letters in groups.items():
        per = [letters.get(x, 0) for x in LETTERS[:n]]
        assert max(per) - min(per) <= 1, (task, n, per)


def test_image_chains_are_kept_together(demo_build) -> None:
    recs = _records(demo_build.release)
    levels: dict[str, set] = defaultdict(set)
    for r in recs:
        levels[r["meta"]["chain"]].add(task_level(r["task"]))
    for r in recs:
        if task_level(r["task"]) == Level.HIGH:
            assert levels[r["meta"]["chain"]] & {Level.LOW, Level.MID}, f"{r['id']} lost its low/mid partner"
    assert sum(1 for v in levels.values() if Level.HIGH in v) == demo_build.report.chains >= 10
    marked = [r for r in recs if r["meta"].get("marked_region")]
    assert marked and all(r["task"] == "ROI Grounding" and "-r" in r["image_path"] for r in marked)


def test_the_deidentification_manifest_counts_what_was_removed(demo_root: Path, demo_build) -> None:
    manifest = json.loads((demo_build.release / privacy.MANIFEST_NAME).read_text(encoding="utf-8"))
    n_dicom = len(list((demo_root / "build" / "demo-site" / "dicom").rglob("*.dcm")))
    assert manifest["dicom_files_deidentified"] == n_dicom == 17
    removed = {a["attribute"]: a for a in manifest["removed_attributes"]}
    for kw in ("PatientName", "PatientID", "PatientBirthDate", "InstitutionName", "ReferringPhysicianName", "StudyDate",
               "AccessionNumber", "StationName", "SeriesInstanceUID", "SOPInstanceUID", "MediaStorageSOPInstanceUID", "private tags"):  # fmt: skip
        assert removed[kw]["files"] == n_dicom, kw
    assert removed["PatientName"]["annex_e"] == "Z" and removed["SeriesInstanceUID"]["annex_e"] == "U"
    assert all(a["action"] == "X" for a in removed.values())
    assert manifest["pixel_actions"] == {
        "crop: ultrasound: cropped to its tissue region": 1,
        "mask: BurnedInAnnotation = YES": 1,
        "mask: labelled as carrying burned-in text": 1,
    }
    assert manifest["private_label_columns"] == {"patient_id": 13, "patient_name": 13}
    assert manifest["leak_scan"]["found"] == 0 and manifest["leak_scan"]["identifying_values_searched"] > 40
    doc = (demo_build.release / privacy.PROFILE_DOC_NAME).read_text(encoding="utf-8")
    assert all(f"| {kw} |" in doc for kw in deid.IDENTIFYING_KEYWORDS)
    assert (demo_build.hf / privacy.MANIFEST_NAME).read_bytes() == (demo_build.release / privacy.MANIFEST_NAME).read_bytes()


def _identifying_values(demo_root: Path) -> set[str]:
    from medrcube.construction.demo import identifying_values

    values = set(identifying_values())
    for p in sorted((demo_root / "build" / "demo-site" / "dicom").rglob("*.dcm")):
        values |= deid.identifying_values(read_dicom(p))
    return values


def test_no_identifying_value_appears_in_any_byte_of_the_export(demo_root: Path, demo_build) -> None:
    values = _identifying_values(demo_root)
    # The search is only meaningful if it knows what it looks for.
    assert {"Beeblebrox^Zaphod", "MRN-48151623", "Saint Elsewhere Memorial Hospital", "Trillian^Astra", "Marvin Paranoidson",
            "20230714", "CT-ELSEWHERE-7"} <= values  # fmt: skip
    files = [p for p in sorted(demo_build.out.rglob("*")) if p.is_file()]
    assert any(p.suffix == ".arrow" for p in files) and any(p.suffix == ".png" for p in files) and len(files) > 30
    needles = []
    for v in values:
        for enc in ("utf-8", "utf-16-le"):
            needles.append((v, v.lower().encode(enc)))
    for p in files:
        data = p.read_bytes().lower()
        hits = sorted({v for v, n in needles if n in data})
        assert hits == [], f"{p.relative_to(demo_build.out)} contains {hits}"


def test_burned_in_text_is_masked_or_cropped_never_exported(demo_build) -> None:
    recs = _records(demo_build.release)
    cr = {r["image_path"] for r in recs if r["dataset"] == "demo-dicom" and r["modality"] == "X-Ray"}
    us = {r["image_path"] for r in recs if r["dataset"] == "demo-dicom" and r["modality"] == "US"}
    assert len(cr) == 1 and len(us) == 1
    img = _pixels(demo_build.release / "demo-dicom" / cr.pop())
    # The burned-in "text" (full white stripes in rows 1-6) lies in the masked top tenth.
    assert img.shape == (96, 80) and img[:7].max() < 20 and img[20:].max() > 100
    img = _pixels(demo_build.release / "demo-dicom" / us.pop())
    assert img.shape == (45, 60) and img.max() < 250  # cropped to the tissue region: the white text row is gone
    flagged = _pixels(demo_build.release / "demo-cxr" / "images" / "005.png")
    assert flagged[:5].max() < 20 and flagged[10:].max() > 100
    assert any(r["image_path"] == "images/005.png" for r in recs if r["dataset"] == "demo-cxr")


def test_the_report_says_what_could_not_be_mapped_or_read(demo_build) -> None:
    report = json.loads((demo_build.report_dir / "build_report.json").read_text(encoding="utf-8"))
    unmapped = {(u["field"], u["value"]) for u in report["mapping"]["unmapped"]}
    assert ("diagnosis", "bronchiectasis") in unmapped
    assert any(d["task"] == "Imaging Protocol Recognition" and d["why"].startswith("CT:") for d in report["mapping"]["not_derived"])
    assert report["source_problems"]["not a usable DICOM file"] == 1
    assert report["source_problems"]["no true axial plane (oblique affine)"] == 1
    md = (demo_build.report_dir / "build_report.md").read_text(encoding="utf-8")
    assert "| Chest | X-Ray | Disease Diagnosis |" in md and "bronchiectasis" in md and "left out by sampling" in md


def test_the_hugging_face_export_holds_the_same_items(demo_build) -> None:
    release, hf = load_cube(demo_build.release, strict=True), load_cube(demo_build.hf, strict=True)
    assert [i.to_dict() for i in hf] == [i.to_dict() for i in release]
    assert dict(hf.digests) == dict(release.digests)


def test_a_rebuild_writes_the_same_bytes_and_replaces_only_its_own_output(demo_root: Path, demo_build, tmp_path: Path, site_recipe) -> None:
    import shutil

    write_recipe = site_recipe
    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    # One rebuild shows both: written over a copy of the first build (a previous build, with
    # a file of its own added), it replaces all of it and writes the first build's bytes.
    previous = tmp_path / "again"
    shutil.copytree(demo_build.out, previous)
    stale = previous / demo_build.release.relative_to(demo_build.out) / "stale-from-the-last-build.txt"
    stale.write_text("old", encoding="utf-8")
    again = build(write_recipe(demo_root, "site-plain"), previous)
    assert not stale.exists()
    assert files(again.release) == files(demo_build.release)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(BuildError, match="not empty and not a previous medrcube build"):
        build(write_recipe(demo_root, "site-plain"), foreign)
    assert (foreign / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_an_identifying_value_in_a_label_is_redacted_before_the_report_is_written(demo_root: Path, tmp_path: Path, site_recipe) -> None:
    """A label file that quotes a patient ID (an unmappable "diagnosis", which the report
    lists): the report says [redacted], the manifest counts it, and the build succeeds."""
    import yaml

    labels = tmp_path / "dicom_labels.csv"
    labels.write_text("folder,diagnosis,severity\nstudy-a/series-1,pneumonia,\nstudy-b/series-2,mrn 90210337,\n", encoding="utf-8")
    path = site_recipe(demo_root, "site-leaky")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["sources"][0]["labels"]["file"] = str(labels)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    result = build(path, tmp_path / "leaky")
    report = json.loads((result.report_dir / "build_report.json").read_text(encoding="utf-8"))
    assert ("diagnosis", "[redacted]") in {(u["field"], u["value"]) for u in report["mapping"]["unmapped"]}
    assert "90210337" not in (result.report_dir / "build_report.md").read_text(encoding="utf-8")
    assert report["privacy"]["free_text_redactions"]["build report"] >= 1


def test_an_identifying_value_that_reaches_the_export_deletes_it(demo_root: Path, tmp_path: Path, site_recipe) -> None:
    """The last safety net: text that no screen reads (here the recipe's own name, in the
    release README) holding a patient's name in another order and case fails the build,
    and nothing is left behind."""
    from medrcube.construction.pipeline import PrivacyLeakError

    path = site_recipe(demo_root, "site-leaky-name")
    path.write_text(path.read_text(encoding="utf-8").replace("name: site-leaky-name", "name: arthurina-dent"), encoding="utf-8")
    with pytest.raises(PrivacyLeakError, match=r"release/README\.md \(PatientName\)") as exc:
        build(path, tmp_path / "leaky")
    assert "arthurina" not in str(exc.value).lower()  # the message names files and attributes, never the value
    assert not (tmp_path / "leaky").exists()


def test_privacy_scan_finds_a_planted_value_in_binary_and_text(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"x": "Seen at SAINT ELSEWHERE memorial hospital"}', encoding="utf-8")
    (tmp_path / "b.bin").write_bytes(b"\x00\x01" + "Beeblebrox^Zaphod".encode("utf-16-le") + b"\xff")
    (tmp_path / "c.txt").write_text("towards the ward", encoding="utf-8")
    leaks = privacy.scan_tree(tmp_path, {"Saint Elsewhere Memorial Hospital": "InstitutionName", "Beeblebrox^Zaphod": "PatientName",
                                         "Ward": "ReferringPhysicianName", "owar": "StationName"})  # fmt: skip
    assert {(leak.file, leak.source) for leak in leaks} == {
        ("a.json", "InstitutionName"), ("b.bin", "PatientName"), ("c.txt", "ReferringPhysicianName")}


def test_png_exports_carry_no_metadata_chunks(demo_build) -> None:
    from medrcube.construction.imageio import png_chunk_types

    pngs = sorted(demo_build.release.rglob("*.png"))
    assert pngs and all(png_chunk_types(p.read_bytes()) == ["IHDR", "IDAT", "IEND"] for p in pngs)
    jpeg_row = Image.open(io.BytesIO((demo_build.release / "demo-cxr" / "images" / "004.png").read_bytes()))
    assert not jpeg_row.info.get("exif")
