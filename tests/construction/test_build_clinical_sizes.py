"""De-identification at clinical image sizes (issue 27): views of large frames, region rules,
the OCR leak scan of the exported pixels, coded source names, the review sheet and its record.

One real build of a 2,048 px radiograph archive (module fixture); everything else on small
frames. Recall and time by frame size are measured in benchmarks/deid_ocr.py, not here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medrcube.construction import demo
from medrcube.construction.privacy import linemask, multiscale, ocr, proposals, synthetic
from medrcube.construction.privacy import safeguards as privacy
from medrcube.construction.privacy.pixelscan import scan_images
from medrcube.construction.privacy.regions import RegionRuleError, load_table
from medrcube.construction.privacy.reviewsheet import review_line, upper_bound_95
from medrcube.construction.privacy.screening import Identities
from medrcube.construction.privacy.textscreen import text_regions

PERSON_WORDS = ("vogonsky", "jeltzina", "73317331")


# -- views -------------------------------------------------------------------------------------


def _covered(shape: tuple[int, ...], boxes: list[tuple[int, int, int, int]]) -> np.ndarray:
    masked = np.zeros(shape[:2], dtype=bool)
    for x0, y0, x1, y1 in boxes:
        masked[y0:y1, x0:x1] = True
    return masked


# A known miss, kept in sight: at 4,096 px this 8 px line (0.15 of full scale over a radiograph's noise of 0.04)
# is proposed and read in a 3x crop, legible to the eye, but the detector finds nothing in it for the panel
# noise drawn since the generator went float32 (issue 27; with the earlier draw it was found).
@pytest.mark.parametrize("side", [512, 1024, 2048, pytest.param(4096, marks=pytest.mark.xfail(strict=True, reason="8 px at 0.15 contrast in 4,096 px radiograph noise: the detector misses it in its crop (issue 27)"))])
def test_a_small_low_contrast_line_is_read_in_an_enlarged_crop_and_masked_whole(side: int) -> None:
    rng = np.random.default_rng(side)
    plain = synthetic.background("xray", side, side, rng)
    assert [v.kind for v in multiscale.views(plain)] == ["coarse"]  # the anatomy and the panel noise are no line
    coarse = multiscale.views(plain)[0]  # the whole frame once, small (large text); never enlarged
    assert coarse.box == (0, 0, side, side) and side * coarse.scale == pytest.approx(min(multiscale.COARSE_SIDE, side), abs=1)
    x, y = side // 3, side // 2
    level = float(plain[y : y + 12, x : x + 200].mean())
    img, line = synthetic.burn(plain, "MRN 48151623", (x, y), "dejavu-sans", 8, level + 0.15)  # 8 px, 0.15 of full scale
    crops = [v for v in multiscale.views(img) if v.kind == "crop"]
    assert any(v.box[0] <= line.box[0] < v.box[2] and v.box[1] <= line.box[1] < v.box[3] and v.scale >= 2.0 for v in crops)
    reader = ocr.shared_reader()
    plan = linemask.plan(reader, img, text_regions(reader, img)[0])
    assert synthetic.coverage(line, _covered(img.shape, plan.boxes)) == 1.0 and not plan.readable


def test_small_text_on_a_4096_frame_is_found_and_masked_whole() -> None:
    """A 12 px line on a 4,096 px frame: the coarse whole view (scale 0.12) shrinks it to 1.4 px; its crop reads it enlarged."""
    rng = np.random.default_rng(5)
    img = synthetic.background("noise", 4096, 4096, rng)
    img, line = synthetic.burn(img, "OBRIEN, SEAN 12.03.1961", (2000, 2100), "dejavu-sans", 12, 1.0)
    reader = ocr.shared_reader()
    found = multiscale.detect(reader, img)
    plan = linemask.plan(reader, img, found)
    assert synthetic.coverage(line, _covered(img.shape, plan.boxes)) == 1.0 and not plan.readable


def test_lines_are_joined_along_the_text_and_a_legible_strip_beside_a_mask_is_masked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    assert linemask.joined([(10, 10, 50, 30), (60, 12, 120, 31), (10, 200, 50, 220)]) == [(10, 10, 120, 31), (10, 200, 50, 220)]
    assert linemask.joined([(0, 0, 100, 50), (10, 10, 20, 20)]) == [(0, 0, 100, 50)]
    rng = np.random.default_rng(9)
    img = synthetic.background("noise", 400, 900, rng)
    img, line = synthetic.burn(img, "KOWALSKA MAGDA 19610312", (40, 150), "dejavu-sans", 32, 1.0)
    x0, y0, x1, y1 = line.box
    # The detector's region covers only the first word: the recogniser reads the rest beside the mask, so it is masked too
    # (the row not followed along the row first, which would reach the rest before the strips are read).
    monkeypatch.setattr(linemask, "FOLLOW_ROWS", False)
    plan = linemask.plan(ocr.shared_reader(), img, [ocr.TextRegion((x0, y0, x0 + (x1 - x0) // 3, y1), 0.9)])
    assert plan.extended >= 1 and synthetic.coverage(line, _covered(img.shape, plan.boxes)) == 1.0 and not plan.readable


def test_a_line_still_legible_after_every_pass_makes_the_frame_readable_and_so_refused() -> None:
    rng = np.random.default_rng(10)
    img = synthetic.background("noise", 200, 1400, rng)
    img, line = synthetic.burn(img, "KOWALSKA MAGDA 19610312 MRN 48151623 ACC-1234567", (20, 80), "dejavu-sans", 32, 1.0)
    x0, y0, x1, y1 = line.box
    plan = linemask.plan(ocr.shared_reader(), img, [ocr.TextRegion((x0, y0, x0 + 40, y1), 0.9)])
    assert plan.extended == linemask.PASSES and plan.readable  # two strips masked, the rest of the line still read
    # The same through the net: a stroke-map candidate holding only the line's start is masked and re-checked like a region.
    plan = linemask.plan(ocr.shared_reader(), img, [], [(x0, y0, x0 + 100, y1)])
    assert plan.netted == 1 and plan.extended == linemask.PASSES and plan.readable


def test_a_line_no_mask_reaches_is_read_by_the_net_and_masked_whole_but_anatomy_is_not() -> None:
    """The strips beside masks never see a line the detector missed whole: the stroke map's candidates outside every mask do."""
    rng = np.random.default_rng(11)
    plain = synthetic.background("xray", 600, 900, rng)
    img, line = synthetic.burn(plain, "OBRIEN SEAN 12.03.1961", (500, 40), "dejavu-sans", 16, 1.0)
    reader = ocr.shared_reader()
    assert linemask.plan(reader, img, []) == linemask.MaskPlan([], 0, False)  # no region, no strip: without the net the line goes out
    plan = linemask.plan(reader, img, [], proposals.candidates(img))
    assert plan.netted >= 1 and not plan.readable and synthetic.coverage(line, _covered(img.shape, plan.boxes)) == 1.0
    assert linemask.plan(reader, plain, [], proposals.candidates(plain)) == linemask.MaskPlan([], 0, False)  # the anatomy's strokes read as no text


def test_the_screen_masks_a_line_the_detector_missed_entirely_and_says_so_in_the_manifest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The known miss above (8 px at 0.15 of full scale in 4,096 px radiograph noise): no region, but the recogniser reads
    its stroke-map candidate, so with the net (on by default) the line is masked instead of exported unmasked."""
    from medrcube.construction.observation import SourceImage
    from medrcube.construction.privacy import textscreen
    from medrcube.construction.privacy.textscreen import TextScreen

    rng = np.random.default_rng(4096)
    plain = synthetic.background("xray", 4096, 4096, rng)
    x, y = 4096 // 3, 4096 // 2
    img, line = synthetic.burn(plain, "MRN 48151623", (x, y), "dejavu-sans", 8, float(plain[y : y + 12, x : x + 200].mean()) + 0.15)
    screen = TextScreen("mask")
    src = SourceImage("d", "series 1 image 1 of 1", img.copy(), "dicom", meta={"Modality": "CR"})
    assert screen.screen(src, "X-Ray")  # the net is on by default
    entry = screen.log.frames[-1]
    assert entry["action"] == "mask" and entry["lines_masked_by_net"] >= 1 and "still_readable_after_masking" not in entry
    assert synthetic.coverage(line, _covered(img.shape, [tuple(b) for b in entry["regions"]])) == 1.0
    assert np.all(src.pixels[line.box[1] : line.box[3], line.box[0] : line.box[2]] == 0.0)  # the exported pixels are black there
    monkeypatch.setattr(textscreen, "UNCOVERED_NET", False)
    src = SourceImage("d", "series 1 image 1 of 1", img, "dicom", meta={"Modality": "CR"})
    assert screen.screen(src, "X-Ray") and screen.log.frames[-1]["action"] == "none"  # without it: exported unmasked


def test_a_line_too_faint_for_any_stroke_is_found_by_the_faint_line_map_and_masked() -> None:
    """The benchmark's last readable line (issue 27): 8 px in Pillow's default face (5 px glyphs, 1 px strokes) at 0.15
    of full scale over an MR frame's dark, noisy ground. The detector and both stroke maps miss it; its mean over the
    band stands out from the rows over and under it, so the faint-line map proposes it and the net masks it whole."""
    from medrcube.construction.observation import SourceImage
    from medrcube.construction.privacy.textscreen import TextScreen

    rng = np.random.default_rng(1)
    plain = synthetic.background("mr", 512, 512, rng)
    tw, th = synthetic.text_size("PID 89786607", "pillow-default", 8)
    x, y = 512 - 16 - tw, 16  # the top-right corner, where the benchmark put it
    img, line = synthetic.burn(plain, "PID 89786607", (x, y), "pillow-default", 8, float(plain[y : y + th, x : x + tw].mean()) + 0.15)
    x0, y0, x1, y1 = line.box
    touches = lambda boxes: [b for b in boxes if b[0] < x1 and x0 < b[2] and b[1] < y1 and y0 < b[3]]  # noqa: E731
    reader = ocr.shared_reader()
    assert not touches([r.box for r in text_regions(reader, img)[0]]) and not touches(proposals.candidates(img))
    faint = touches(proposals.faint_lines(img))
    assert faint and synthetic.coverage(line, _covered(img.shape, faint)) >= 0.9
    screen = TextScreen("mask")
    src = SourceImage("d", "series 1 image 1 of 1", img.copy(), "dicom", meta={"Modality": "MR"})
    assert screen.screen(src, "MRI")
    entry = screen.log.frames[-1]
    assert entry["action"] == "mask" and entry["lines_masked_by_net"] >= 1 and "still_readable_after_masking" not in entry
    assert synthetic.coverage(line, _covered(img.shape, [tuple(b) for b in entry["regions"]])) == 1.0
    src = SourceImage("d", "series 1 image 1 of 1", plain.copy(), "dicom", meta={"Modality": "MR"})
    assert screen.screen(src, "MRI") and screen.log.frames[-1]["action"] == "none"  # the same ground without the line: no mask
    # Larger frames are not searched this way (their CPU budget): the same line on a 2,049 px wide frame gives no faint line.
    wide = np.zeros((64, proposals.FAINT_MAX_SIDE + 1), np.float32)
    wide[:, :512] = img[:64]
    assert proposals.faint_lines(wide) == [] and touches(proposals.faint_lines(wide[:, :512]))


# -- region rules ----------------------------------------------------------------------------


def test_the_default_region_table_blanks_radiograph_corners_and_the_ultrasound_band() -> None:
    table = load_table()
    assert table.name == "default" and len(table.digest) == 64
    us = table.zones_for((600, 800), {"US"})
    assert [b for b, _ in us] == [(0, 0, 800, 48)] and "header band" in us[0][1]
    assert len(table.zones_for((1000, 800), {"CR", "X-Ray"})) == 4
    assert table.zones_for((512, 512), {"CT", "MR"}) == []


def test_a_site_table_with_a_scanner_rule_applies_only_to_that_scanner(tmp_path: Path) -> None:
    p = tmp_path / "rules.yaml"
    p.write_text("version: 1\nrules:\n  - modality: US\n    manufacturer: acme\n    model: sono 5\n    zones: [[0.8, 0, 1, 0.2]]\n"
                 "    why: ACME Sono 5 clock and patient box\n", encoding="utf-8")  # fmt: skip
    table = load_table(p)
    assert table.zones_for((100, 100), {"US"}, "ACME Medical", "Sono 5 Pro") == [((80, 0, 100, 20), "ACME Sono 5 clock and patient box")]
    assert table.zones_for((100, 100), {"US"}, "Other", "Sono 5") == []
    p.write_text("version: 1\nrules:\n  - modality: US\n    zones: [[0.5, 0, 0.2, 1]]\n    why: x\n", encoding="utf-8")
    with pytest.raises(RegionRuleError, match=r"rules\[0\]: zone \[0.5, 0, 0.2, 1\]"):
        load_table(p)


def test_the_text_screen_blanks_rule_zones_and_records_them() -> None:
    from medrcube.construction.observation import SourceImage
    from medrcube.construction.privacy.textscreen import TextScreen

    screen = TextScreen("mask", regions=load_table())
    img = SourceImage("d", "series 1 image 1 of 1", np.full((120, 100), 0.5), "dicom", meta={"Modality": "CR"})
    assert screen.screen(img, "X-Ray")
    assert float(img.pixels[:3, :20].max()) == 0.0 and float(img.pixels[60, 50]) == 0.5
    entry = screen.log.frames[-1]
    assert len(entry["rule_zones"]) == 4 and entry["rules"] == ["radiograph corners (name, record number, dates, technologist)"]
    assert screen.log.to_dict()["region_rules"]["table"] == "default"


# -- the pixel leak scan -------------------------------------------------------------------------


def test_the_pixel_scan_names_the_file_and_the_channel_never_the_value(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    img = synthetic.background("xray", 240, 200, rng)
    img, _ = synthetic.burn(img, "VOGONSKY, JELTZINA", (8, 8), "dejavu-sans", 16, 1.0)
    (tmp_path / "d" / "images").mkdir(parents=True)
    Image.fromarray(np.round(img * 255).astype(np.uint8)).save(tmp_path / "d" / "images" / "001.png")
    Image.fromarray(np.round(synthetic.background("xray", 240, 200, rng) * 255).astype(np.uint8)).save(tmp_path / "d" / "images" / "002.png")
    ids = Identities.of({"Vogonsky^Jeltzina": "PatientName", "MRN-73317331": "PatientID"})
    scan = scan_images(tmp_path, tmp_path.rglob("*.png"), ids, ocr.shared_reader())
    assert scan.images == 2
    assert {x.file for x in scan.leaks} == {"d/images/001.png"}  # the image without text reads clean
    channels = [x.source for x in scan.leaks]
    assert "pixels (PatientName)" in channels and any(c.startswith("pixels: legible text in region (") for c in channels)
    assert not any("vogonsky" in c.lower() or "jeltzina" in c.lower() for c in channels)


# -- a 2,048 px archive through `medrcube build` ---------------------------------------------------


def _build(root: Path, side: int) -> tuple[Path, str]:
    """The archive of `side` px built through the console command: (out folder, console text)."""
    import contextlib
    import io

    from medrcube.cli import main

    demo.write_large_site(root, side)
    out = root / "out"
    err, std = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(std):
        code = main(["build", str(demo.large_site_recipe(root, out)), "--no-progress"])
    assert code == 0, err.getvalue()
    return out, err.getvalue() + std.getvalue()


@pytest.fixture(scope="module")
def large_build(tmp_path_factory: pytest.TempPathFactory):
    """The 2,048 px archive built once through the console command: (out folder, console text)."""
    return _build(tmp_path_factory.mktemp("large"), 2048)


def _assert_masked_and_listed(out: Path, side: int) -> None:
    manifest = json.loads((out / "release" / privacy.MANIFEST_NAME).read_text(encoding="utf-8"))
    frames = manifest["text_in_pixels"]["frames"]
    with_text = [f for f in frames if f["regions"]]
    width = round(side * 5 / 6)
    assert len(with_text) == 1 and with_text[0]["frame"] == [width, side] and with_text[0]["exported"]
    # The regions cover every glyph of the burned lines (redrawn here at their place and size).
    masked = np.zeros((side, width), dtype=bool)
    for x0, y0, x1, y1 in with_text[0]["regions"]:
        masked[y0:y1, x0:x1] = True
    y = side // 40
    for text, face, size in demo.LARGE_TEXT:
        _, line = synthetic.burn(np.zeros((side, width)), text, (side // 12, y), face, round(size * side / 2048), 1.0)
        assert synthetic.coverage(line, masked) == 1.0, text
        y += round(1.6 * size * side / 2048)
    # The exported image reads back nothing identifying, and the build's own pixel scan says so.
    png = out / "release" / "large-cr" / with_text[0]["image"]
    read = " ".join(r.text for r in multiscale.read(ocr.shared_reader(), np.asarray(Image.open(png).convert("L")) / 255.0)).lower()
    assert not any(w in read.replace(" ", "") for w in PERSON_WORDS), read
    assert manifest["leak_scan"]["pixels"]["images_read"] == 2 and manifest["leak_scan"]["pixels"]["found"] == 0


def test_a_name_burned_into_a_2048_frame_is_masked_and_the_manifest_lists_it(large_build) -> None:
    _assert_masked_and_listed(large_build[0], 2048)


def test_a_name_burned_into_a_4096_frame_is_masked_and_the_manifest_lists_it(tmp_path: Path) -> None:
    out, console = _build(tmp_path, 4096)
    _assert_masked_and_listed(out, 4096)
    assert demo.LARGE_FOLDER.lower() not in console.lower()


def test_no_file_the_build_writes_names_the_patients_folder_or_the_patient(large_build) -> None:
    out, _ = large_build
    texts = [p for p in out.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".html", ".txt", ".log", ".md", ".yaml", ".csv")]
    assert any(p.name == "sheet.html" for p in texts) and any(p.suffix == ".json" for p in texts)
    for p in texts:
        body = p.read_text(encoding="utf-8", errors="replace").lower()
        assert demo.LARGE_FOLDER.lower() not in body and not any(w in body for w in PERSON_WORDS), p.relative_to(out)


def test_no_console_line_names_the_patients_folder(large_build) -> None:
    out, console = large_build
    assert "not a usable DICOM file" in console  # the folder's notes.txt was reported ...
    assert "large-cr file" in console  # ... by its coded name
    assert demo.LARGE_FOLDER.lower() not in console.lower() and not any(w in console.lower() for w in PERSON_WORDS)


def test_the_review_sheet_exists_and_the_build_is_unreviewed_until_a_person_records_it(large_build, capsys) -> None:
    from medrcube.cli import main

    out, _ = large_build
    sheet = (out / "review" / "sheet.html").read_text(encoding="utf-8")
    assert sheet.count("<img ") == 2 and (out / "review" / "frames" / "001.png").is_file()
    release = out / "release"
    manifest = json.loads((release / privacy.MANIFEST_NAME).read_text(encoding="utf-8"))
    assert manifest["review"]["status"] == "not reviewed" and manifest["review"]["frames_in_sheet"] == 2
    capsys.readouterr()
    assert main(["cube", "stats", str(release)]) == 0
    assert "de-identification review: NOT RECORDED" in capsys.readouterr().out
    # A decision with a leak cannot be an approval; a wrong folder is named.
    assert main(["build", "--record-review", str(out), "--decision", "approved", "--reviewed-by", "JD", "--frames", "2", "--leaks", "1"]) == 1
    assert "is rejected" in capsys.readouterr().err
    assert main(["build", "--record-review", str(out / "nowhere"), "--decision", "approved", "--reviewed-by", "JD", "--frames", "2"]) == 1
    assert "nowhere" in capsys.readouterr().err
    assert main(["build", "--record-review", str(out), "--decision", "approved", "--reviewed-by", "JD", "--frames", "2"]) == 0
    assert "review recorded: approved by JD" in capsys.readouterr().out
    for m in (release / privacy.MANIFEST_NAME, out / "hf" / privacy.MANIFEST_NAME):
        assert json.loads(m.read_text(encoding="utf-8"))["review"]["status"] == "approved"
    line = review_line(release)
    assert line is not None and line.startswith("de-identification review: approved by JD") and "0 leak(s) in 2 frame(s)" in line


def test_zero_leaks_in_n_frames_bound_the_rate_at_about_3_over_n() -> None:
    for n in (30, 100, 300):
        b = upper_bound_95(n)
        assert b is not None and 1 - 0.05 ** (1 / n) == pytest.approx(b, rel=1e-6) and 2.8 / n < b < 3.0 / n
    assert upper_bound_95(0) is None and upper_bound_95(10, 10) == 1.0
