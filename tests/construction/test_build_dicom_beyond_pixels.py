"""DICOM beyond the pixel array: overlay planes (60xx, as their own data or in the pixel data's
high bits), private tags, person names the profile does not list, multi-frame and compressed
files, and a codec the build refuses, in generated files built through the real pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from medrcube.construction import demo
from medrcube.construction.privacy import deid, synthetic
from medrcube.construction.privacy import safeguards as privacy

NAME = "Vogonsky^Jeltzina"
PATIENT = {"PatientName": NAME, "PatientID": "MRN-73317331", "PatientBirthDate": "19571102"}
SIDE = 768


def _name_bitmap(rows: int, cols: int, angle: float = 0.0) -> np.ndarray:
    _, line = synthetic.burn(np.zeros((rows, cols)), "VOGONSKY, JELTZINA MRN 73317331", (40, 60), "dejavu-sans-bold", 30, 1.0, angle)
    return line.glyphs


def _base(series: int, rows: int = SIDE, cols: int = SIDE, frames: int = 1):
    from pydicom.dataset import Dataset
    from pydicom.sequence import Sequence

    rng = np.random.default_rng(series)
    ds = demo._dataset(PATIENT, series, 1, "CR", rows, cols)
    ds.BodyPartExamined, ds.ViewPosition, ds.PixelSpacing = "CHEST", "PA", [0.2, 0.2]
    imgs = [synthetic.background("xray", rows, cols, rng) for _ in range(frames)]
    # Beyond the pixels: a private block naming the patient, and person names the profile does not list.
    block = ds.private_block(0x0009, "ACME SCANNER 1.0", create=True)
    block.add_new(0x01, "LO", "VOGONSKY JELTZINA")
    ds.ConsultingPhysicianName = "Prosser^Lunkwill"
    observer = Dataset()
    observer.VerifyingObserverName = "Fook^Majikthise"
    ds.VerifyingObserverSequence = Sequence([observer])
    return ds, imgs


def _write_archive(root: Path) -> Path:
    from pydicom.uid import DeflatedExplicitVRLittleEndian, RLELossless

    src = root / "dicom"
    # 1. The name drawn in an overlay plane of its own (group 6000, OverlayData): dropped.
    ds, (img,) = _base(1)
    demo._gray(ds, img)
    bits = _name_bitmap(SIDE, SIDE)
    ds.add_new((0x6000, 0x0010), "US", SIDE)
    ds.add_new((0x6000, 0x0011), "US", SIDE)
    ds.add_new((0x6000, 0x0040), "CS", "G")
    ds.add_new((0x6000, 0x0050), "SS", [1, 1])
    ds.add_new((0x6000, 0x0100), "US", 1)
    ds.add_new((0x6000, 0x0102), "US", 0)
    ds.add_new((0x6000, 0x3000), "OW", np.packbits(bits.ravel(), bitorder="little").tobytes())
    demo._save(ds, src / "overlay" / "IM1.dcm")
    # 2. The name in the pixel data's unused high bit 12 (an embedded overlay, group 6002): cleared.
    ds, (img,) = _base(2)
    demo._gray(ds, img)
    data = np.frombuffer(ds.PixelData, dtype=np.uint16).reshape(SIDE, SIDE) | (_name_bitmap(SIDE, SIDE).astype(np.uint16) << 12)
    ds.PixelData = data.tobytes()
    ds.add_new((0x6002, 0x0010), "US", SIDE)
    ds.add_new((0x6002, 0x0011), "US", SIDE)
    ds.add_new((0x6002, 0x0100), "US", 16)
    ds.add_new((0x6002, 0x0102), "US", 12)
    demo._save(ds, src / "embedded" / "IM1.dcm")
    # 3. Two frames of 1,024 px, RLE Lossless; the second carries the name burned in at 90 degrees.
    ds, imgs = _base(3, 1024, 1024, frames=2)
    imgs[1], _ = synthetic.burn(imgs[1], "VOGONSKY, JELTZINA", (60, 200), "dejavu-sans", 30, 1.0, 90.0)
    demo._gray(ds, imgs[0])
    ds.PixelData = b"".join(np.round(np.clip(i, 0, 1) * 4000).astype(np.uint16).tobytes() for i in imgs)
    ds.NumberOfFrames = 2
    ds.compress(RLELossless)
    demo._save(ds, src / "multiframe" / "IM1.dcm")
    # 4. Deflated Explicit VR Little Endian, no text.
    ds, (img,) = _base(4)
    demo._gray(ds, img)
    ds.file_meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
    demo._save(ds, src / "deflated" / "IM1.dcm")
    # 5. JPEG-LS (a GPL-only decoder): refused whole, counted in the manifest.
    ds, (img,) = _base(5)
    demo._gray(ds, img)
    from pydicom.encaps import encapsulate

    ds.file_meta.TransferSyntaxUID = "1.2.840.10008.1.2.4.80"
    ds.PixelData = encapsulate([b"\xff\xd8\xff\xf7" + bytes(64)])  # a JPEG-LS start marker: never decoded
    (src / "jpegls").mkdir(parents=True)
    ds.save_as(src / "jpegls" / "IM1.dcm", enforce_file_format=True)
    return src


def test_names_outside_the_pixel_array_are_removed_and_counted() -> None:
    ds, (img,) = _base(9, 64, 64)
    demo._gray(ds, img)
    items = deid.identifying_items(ds)
    assert items.get("Prosser^Lunkwill") == "ConsultingPhysicianName" and items.get("Fook^Majikthise") == "VerifyingObserverName"
    result = deid.deidentify(ds)
    clean = result.dataset
    assert "ConsultingPhysicianName" not in clean and "VerifyingObserverSequence" in clean
    assert "VerifyingObserverName" not in clean.VerifyingObserverSequence[0]
    assert result.counts["other person names"] == 2 and result.counts["private tags"] >= 2
    assert "StudyInstanceUID" not in clean and "SOPClassUID" in clean and "VOGONSKY" not in str(clean)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    import yaml

    from medrcube.construction.pipeline import build

    root = tmp_path_factory.mktemp("beyond")
    src = _write_archive(root)
    recipe = {"version": 1, "name": "beyond", "out": str(root / "out"),
              "sources": [{"kind": "dicom-folder", "dataset": "beyond", "path": str(src), "slices": 2}],
              "privacy": {"burned_in": "refuse", "text": "mask", "region_rules": "none", "review_frames": 2},
              "export": {"max_side": 512}}  # fmt: skip
    path = root / "beyond.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    return build(path)


def test_overlays_private_tags_and_unlisted_names_are_removed_and_listed(built) -> None:
    manifest = json.loads((built.release / privacy.MANIFEST_NAME).read_text(encoding="utf-8"))
    removed = {r["attribute"]: r for r in manifest["removed_attributes"]}
    assert removed["overlay group 6000"]["files"] == 1 and removed["overlay group 6002"]["files"] == 1
    assert "overlay in the pixel data's high bits, group 6002 (cleared)" in removed
    assert removed["private tags"]["files"] == 4 and removed["other person names"]["files"] == 4
    assert removed["PatientName"]["files"] == 4
    assert manifest["dicom_files_deidentified"] == 4 and manifest["dicom_files_refused"] == {"unreadable, or a transfer syntax refused": 1}
    # No exported image reads as text, identifying or not: the final scan (turned, inverted) read them all.
    scan = manifest["leak_scan"]["pixels"]
    assert scan["found"] == 0 and scan["images_read"] >= 4


def test_every_frame_of_a_compressed_multiframe_file_is_screened_and_the_turned_name_masked(built) -> None:
    manifest = json.loads((built.release / privacy.MANIFEST_NAME).read_text(encoding="utf-8"))
    frames = [f for f in manifest["text_in_pixels"]["frames"] if f["frame"] == [1024, 1024]]
    assert manifest["text_in_pixels"]["frames_screened"] == 5
    assert len(frames) == 1 and frames[0]["turned_regions"] and frames[0]["exported"]
    glyphs = synthetic.burn(np.zeros((1024, 1024)), "VOGONSKY, JELTZINA", (60, 200), "dejavu-sans", 30, 1.0, 90.0)[1]
    masked = np.zeros((1024, 1024), dtype=bool)
    for x0, y0, x1, y1 in frames[0]["regions"]:
        masked[y0:y1, x0:x1] = True
    assert synthetic.coverage(glyphs, masked) == 1.0
