"""cube/stats.py is a pure function of items, digests and problems: checked on hand-made
items whose numbers are known, and on a file-level fingerprint change."""

from __future__ import annotations

import shutil

from medrcube.cube import Item, Problem, load_cube
from medrcube.cube.stats import compute_stats, format_stats, render_table


def item(id_, task, image, part="Chest", modality="X-Ray", restricted=False):
    return Item(id=id_, dataset="d", image=image, question="q", options=("a", "b"), answer=0, task=task, modality=modality, part=part, restricted=restricted)


ITEMS = [
    item("1", "Disease Diagnosis", "a.png"),
    item("2", "Modality Recognition", "a.png"),
    item("3", "Organ Recognition", "a.png"),  # a: 1 high x 2 low/mid -> 2 pairs
    item("4", "Disease Diagnosis", "b.png"),
    item("5", "Severity Grading", "b.png"),  # b: shared across tasks, but no chain
    item("6", "View Recognition", "c.png"),
    item("7", "Abnormality Diagnosis", "c2.png"),  # c2 has c's bytes: one image, a chain
    item("8", "Disease Diagnosis", None, part="Brain", modality="MRI", restricted=True),
    item("9", "Report Generation", "d.png", part="Knee"),  # outside the taxonomy
]
DIGESTS = {"a.png": "A", "b.png": "B", "c.png": "C", "c2.png": "C", "d.png": "D"}
PROBLEMS = [
    Problem("f", "x", "gt_answer", "m", "gt_answer_no_match"),
    Problem("f", "y", "image_path", "m", "image_missing"),
    Problem("f", "y", "option_C", "m", "option_gap"),  # the same item twice: one skipped item
    Problem("f", "8", "image_path", "m", "image_unavailable", "warning"),
]


def test_counts_by_axis_and_cell():
    s = compute_stats(ITEMS, DIGESTS, PROBLEMS)
    assert s.n_items == 9 and s.n_datasets == 1
    assert s.by_part == {"Brain": 1, "Chest": 7, "Knee": 1}  # taxonomy order, then the rest
    assert list(s.by_task)[:3] == ["Modality Recognition", "View Recognition", "Organ Recognition"]
    assert s.by_task["Disease Diagnosis"] == 3 and list(s.by_task)[-1] == "Report Generation"
    assert s.by_cell[("Chest", "X-Ray", "Disease Diagnosis")] == 2
    assert sum(s.by_cell.values()) == 9


def test_images_chains_and_availability():
    s = compute_stats(ITEMS, DIGESTS, PROBLEMS)
    assert s.n_images == 4  # A, B, C (two keys, same bytes), D
    assert s.n_shared_images == 3  # A, B, C
    assert s.n_chain_images == 2  # A and C
    assert s.n_chain_pairs == 2 + 1
    assert (s.n_restricted, s.n_unavailable) == (1, 1)
    assert s.skipped == {"gt_answer_no_match": 1, "image_missing": 1, "option_gap": 1}
    assert s.n_skipped_items == 2
    assert s.warnings == {"image_unavailable": 1}


def test_format_is_aligned_and_complete():
    text = format_stats(compute_stats(ITEMS, DIGESTS, PROBLEMS), title="t")
    assert "9 items from 1 datasets in 8 cells" in text
    assert "Report Generation (not in taxonomy)" in text
    assert "gt_answer_no_match" in text and "image_unavailable" in text
    table = render_table(("name", "n"), [("a", 1), ("long name", 100)]).splitlines()
    assert table == ["name         n", "---------  ---", "a            1", "long name  100"]


def test_stats_are_pure():
    before = list(ITEMS)
    assert compute_stats(ITEMS, DIGESTS, PROBLEMS) == compute_stats(ITEMS, DIGESTS, PROBLEMS)
    assert ITEMS == before


def test_fingerprint_follows_image_pixels_not_names_places_or_encoding(small_cube_template, tmp_path):
    import io

    from PIL import Image

    base = load_cube(small_cube_template)
    moved = shutil.copytree(small_cube_template, tmp_path / "elsewhere" / "cube")
    assert load_cube(moved).fingerprint == base.fingerprint  # relocation: same content
    key = next(i.image for i in base if i.image)
    path = moved / key
    original = path.read_bytes()
    im = Image.open(io.BytesIO(original))
    im.load()
    buf = io.BytesIO()
    im.save(buf, format="PNG", compress_level=0)  # other bytes, the same picture
    assert buf.getvalue() != original
    path.write_bytes(buf.getvalue())
    assert load_cube(moved).fingerprint == base.fingerprint
    px = im.copy()
    px.putpixel((0, 0), (px.getpixel((0, 0)) + 1) % 256 if px.mode == "L" else px.getpixel((0, 0)))
    if px.mode != "L":
        px = px.convert("L")
        px.putpixel((0, 0), (px.getpixel((0, 0)) + 1) % 256)
    px.save(path, format="PNG")  # one pixel changed: another cube
    changed = load_cube(moved)
    assert changed.skipped == () and changed.fingerprint != base.fingerprint
    path.write_bytes(original)
    assert load_cube(moved).fingerprint == base.fingerprint
