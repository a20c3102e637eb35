"""The burned-in text benchmark's generator and scoring (the figures themselves: benchmarks/RESULTS.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import deid_ocr


def test_frames_carry_the_lines_they_say_and_blank_frames_none() -> None:
    rng = np.random.default_rng(0)
    for side in (512, 700):
        for _ in range(4):
            img, lines, info = deid_ocr.make_frame(rng, True, side)
            h, w = img.shape
            assert h == side == info["side"] and w <= side and len(lines) <= 4
            for b, facets in lines:
                x0, y0, x1, y1 = b.box
                assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h and b.glyphs[y0:y1, x0:x1].any()
                assert set(facets) == {"font", "size", "contrast", "position", "background", "side", "angle"}
                assert int(facets["size"].split()[0]) in deid_ocr.SIZES and facets["angle"] == "0"
    for angle in ("90", "45", "stack"):  # a turned line's box is as tall as it is long (a stack: taller than wide)
        img, lines, _ = deid_ocr.make_frame(rng, True, 1024, angle)
        for b, facets in lines:
            x0, y0, x1, y1 = b.box
            assert facets["angle"] == angle and b.glyphs[y0:y1, x0:x1].any()
            assert (y1 - y0) > (x1 - x0) if angle in ("90", "stack") else (y1 - y0) > 0.5 * (x1 - x0)
    img, lines, _ = deid_ocr.make_frame(rng, False, 512)
    assert lines == [] and 0 <= img.min() and img.max() <= 1


def test_legibility_needs_four_characters_in_a_row() -> None:
    assert deid_ocr.legible("MRN 48151623", "xx 4815 yy")
    assert deid_ocr.legible("DENT, ARTHURINA", "dentar")
    assert not deid_ocr.legible("MRN 48151623", "48 x 15")
    assert not deid_ocr.legible("23.05.1961", "")


def test_a_small_run_reports_every_figure_by_size() -> None:
    r = deid_ocr.run(1, seed=3, no_text=1, sides=(512,))
    v = r["by_side"]["512"]
    assert r["frames_with_text"] == 1 and r["frames_without_text"] == 1 and v["views_median"] >= 1 and r["threads"] == 1
    assert (v["recall"] is None) == (v["lines"] == 0) and 0 <= v["false_mask_rate"] <= 1 and v["cpu_seconds_median"] > 0
    assert v["recall_visible"] >= v["recall"] and v["recall_lower_95"] <= v["recall"] and v["readable_after"] <= v["readable_before"]
    assert "| 512 |" in deid_ocr.markdown(r)


def test_glyphs_drawn_in_the_grey_of_their_ground_are_not_visible() -> None:
    from medrcube.construction.privacy import synthetic

    ground = np.full((60, 300), 0.5)
    ground[:, 150:] = 0.2
    _, line = synthetic.burn(ground, "VAN DER BERG", (10, 10), "dejavu-sans", 32, 0.5)
    assert line.visible is not None and line.glyphs[:, :140].any() and not line.visible[:, :140].any() and line.visible[:, 160:].any()
    assert synthetic.coverage(line, np.zeros_like(ground, dtype=bool), visible_only=True) == 0.0
    masked = np.zeros_like(ground, dtype=bool)
    masked[:, 145:] = True
    assert synthetic.coverage(line, masked, visible_only=True) == 1.0 and synthetic.coverage(line, masked) < 1.0


def test_runs_pooled_add_up_their_frames_lines_and_per_frame_times() -> None:
    a = deid_ocr.run(1, seed=3, no_text=0, sides=(512,))
    b = deid_ocr.run(0, seed=4, no_text=1, sides=(512,))
    pooled = deid_ocr.merge([json.loads(json.dumps(r)) for r in (a, b)])  # as read back from their JSON
    v = pooled["by_side"]["512"]
    assert pooled["seed"] == [3, 4] and v["frames_with_text"] == 1 and v["frames_without_text"] == 1
    assert v["lines"] == a["lines"] and v["masked"] == a["masked"] and v["raw"]["cpu"] == a["by_side"]["512"]["raw"]["cpu"] + b["by_side"]["512"]["raw"]["cpu"]
    assert v["false_mask_rate"] == b["false_mask_rate"] and sum(c["lines"] for c in pooled["by"]["font"].values()) == a["lines"]


def _text_free_mr_frame(*, seed: int, per_angle: int, nth: int) -> np.ndarray:
    """The benchmark generator's `nth` 512 px frame without text (an MR-like one), drawn as
    a run of seed `seed` draws it: after `per_angle` frames with text in every angle cell."""
    rng = np.random.default_rng(seed)
    for angle in deid_ocr.ANGLES:
        for _ in range(per_angle):
            deid_ocr.make_frame(rng, True, 512, angle)
    for _ in range(nth - 1):
        deid_ocr.make_frame(rng, False, 512)
    img, lines, info = deid_ocr.make_frame(rng, False, 512)
    assert lines == [] and info["background"] == "mr"
    return img


def test_texture_read_as_letters_with_little_confidence_is_not_masked(monkeypatch) -> None:
    """A text-free MR-like frame of the generator (seed 1289, 512 px: the 4th frame without text after 4 with text per
    angle cell) whose texture the recogniser reads as letters at a low confidence: without the net's floor it got a mask."""
    from medrcube.construction.privacy import linemask, ocr
    from medrcube.construction.privacy.textscreen import mask_plan

    img = _text_free_mr_frame(seed=1289, per_angle=4, nth=4)
    reader = ocr.shared_reader()
    plan, _ = mask_plan(reader, img)
    assert not plan.boxes and not plan.quads and plan.netted == 0
    monkeypatch.setattr(linemask, "NET_CONFIDENT", 0.0)
    plan, _ = mask_plan(reader, img)
    assert plan.netted == 1 and plan.boxes


def test_a_band_of_anatomy_taller_than_any_line_is_read_before_it_is_masked() -> None:
    """A text-free MR-like frame of the generator (seed 4343, 512 px: the 3rd frame without text after 40 with text per
    angle cell) where the detector returns a region 126 px tall and 2.3 times as wide, read as one letter: a blob."""
    from medrcube.construction.privacy import ocr, proposals, textscreen

    img = _text_free_mr_frame(seed=4343, per_angle=40, nth=3)
    reader = ocr.shared_reader()
    tall = [r for r in textscreen.multiscale.detect(reader, img) if r.box[3] - r.box[1] > proposals.MAX_LINE]
    assert tall and all(textscreen._blob(r, img.shape) for r in tall)
    plan, _ = textscreen.mask_plan(reader, img)
    assert not plan.boxes and not plan.quads


def test_a_run_with_no_frame_to_screen_is_refused_with_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    """`--n 0 --no-text 0` draws no frame: a usage error saying so (exit 2), not a ValueError from an empty max();
    so does an `--only` that names no frame drawn, and `run` itself with nothing to draw."""
    for argv, said in ((["--n", "0", "--no-text", "0"], "no frame to screen"), (["--n", "0"], "no frame to screen"),
                       (["--n", "1", "--no-text", "0", "--only", "5"], "no such frame")):  # fmt: skip
        with pytest.raises(SystemExit) as stop:
            deid_ocr.main([*argv, "--sides", "512"])
        assert stop.value.code == 2 and said in capsys.readouterr().err
    with pytest.raises(ValueError, match="no frame to screen"):
        deid_ocr.run(0, seed=3, no_text=0, sides=(512,))


def _text_free_frame(*, seed: int, sides: tuple[int, ...], no_text: int, side: int, nth: int) -> np.ndarray:
    """The `nth` (from 1) frame without text at `side` px of a run `--n 0 --no-text NO_TEXT --sides SIDES --seed SEED`,
    drawn as the benchmark draws it."""
    rng = np.random.default_rng(seed)
    for s in sides:
        for i in range(no_text):
            img, lines, _ = deid_ocr.make_frame(rng, False, s)
            if s == side and i == nth - 1:
                assert lines == []
                return img
    raise AssertionError("no such frame")


def test_a_radiographs_dome_found_as_a_short_row_region_and_read_as_one_letter_is_not_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text-free radiograph-like 512 px frame of tuning seed 14004 (2026-12-07, session 24; the 3rd frame of `--n 0
    --no-text 30 --sides 512,1024`): the detector returns the top of the bright dome as a row region 70 x 32 px, read "2"
    at 0.20; kept unread, it masked a strip 256 px wide. Read as a lone letter is (`textscreen.SHORT_READ`) it is dropped
    and the frame keeps every pixel; with the rule off it is masked."""
    from medrcube.construction.privacy import textscreen

    img = _text_free_frame(seed=14004, sides=(512, 1024), no_text=30, side=512, nth=3)
    on, off = _plans_rule_on_and_off(monkeypatch, textscreen, "SHORT_READ", img)
    assert not on.boxes and not on.quads
    assert off.boxes


def test_an_organ_found_twice_as_nested_letters_makes_no_column(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text-free CT-like 1,024 px frame of tuning seed 14002 (2026-12-07, session 24; the 3rd 1,024 px frame of `--n 0
    --no-text 30 --sides 512,1024`): a dark disc of anatomy comes back from two views as two nested letter-sized regions
    (99 and 91 px); counted as two letters they made a column grown the frame's whole height (30% of its pixels masked).
    Counted as one piece (`linemask.COLUMN_DISTINCT`, off by default, turned on here) they make none, and the frame keeps
    every pixel; with the rule off the column is masked."""
    from medrcube.construction.privacy import linemask

    img = _text_free_frame(seed=14002, sides=(512, 1024), no_text=30, side=1024, nth=3)
    on, off = _plans_rule_on_and_off(monkeypatch, linemask, "COLUMN_DISTINCT", img)
    assert not on.boxes and not on.quads
    assert off.quads and off.covered(img.shape).mean() > 0.2


def _plans_rule_on_and_off(monkeypatch: pytest.MonkeyPatch, module: object, rule: str, img: np.ndarray) -> tuple:
    """The frame's mask plan with the rule's switch (`module.rule`) on, then off."""
    from medrcube.construction.privacy import ocr
    from medrcube.construction.privacy.textscreen import mask_plan

    reader, plans = ocr.shared_reader(), []
    for setting in (True, False):
        monkeypatch.setattr(module, rule, setting)
        plans.append(mask_plan(reader, img)[0])
    return plans[0], plans[1]
