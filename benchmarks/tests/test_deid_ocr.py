"""The burned-in text benchmark's generator and scoring (the figures themselves: docs/construction.md)."""

from __future__ import annotations

import numpy as np

from benchmarks import deid_ocr


def test_frames_carry_the_lines_they_say_and_blank_frames_none() -> None:
    rng = np.random.default_rng(0)
    for _ in range(6):
        img, lines, info = deid_ocr.make_frame(rng, True)
        assert img.shape == (info["side"], info["side"]) and 1 <= len(lines) <= 4
        for b, facets in lines:
            x0, y0, x1, y1 = b.box
            assert 0 <= x0 < x1 <= info["side"] and 0 <= y0 < y1 <= info["side"] and b.glyphs[y0:y1, x0:x1].any()
            assert set(facets) == {"font", "size", "contrast", "position", "background", "side"}
    img, lines, _ = deid_ocr.make_frame(rng, False)
    assert lines == [] and 0 <= img.min() and img.max() <= 1


def test_legibility_needs_four_characters_in_a_row() -> None:
    assert deid_ocr.legible("MRN 48151623", "xx 4815 yy")
    assert deid_ocr.legible("DENT, ARTHURINA", "dentar")
    assert not deid_ocr.legible("MRN 48151623", "48 x 15")
    assert not deid_ocr.legible("23.05.1961", "")


def test_a_small_run_reports_every_figure() -> None:
    r = deid_ocr.run(2, seed=3, no_text=1)
    assert r["frames_with_text"] == 2 and r["frames_without_text"] == 1 and r["lines"] >= 2
    assert 0 <= r["recall"] <= 1 and 0 <= r["false_mask_rate"] <= 1 and r["seconds_per_frame"] > 0
    assert "line recall" in deid_ocr.markdown(r)
