"""The release-layout loader on generated cubes: the release-sized cube and the details
of the format (aliases, both correct_index forms, meta, keys, images read lazily)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from medrcube import taxonomy
from medrcube.cube import CubeError, load_cube
from medrcube.cube.stats import cube_stats
from medrcube.testing.gencube import RELEASE_TASK_COUNTS, append_record, edit_record, find_record, generate_release_cube


def _records(root: Path) -> list[dict]:
    return [r for f in sorted(root.glob("*/test.json")) for r in json.loads(f.read_text())]


def test_release_sized_cube_loads_validates_and_reports(full_cube_template):
    root = full_cube_template
    assert len(list(root.glob("*/test.json"))) == 36
    records = _records(root)
    cube = load_cube(root)

    assert len(cube) == 7626 == len(records)
    assert cube.skipped == ()  # no error: every item loads
    restricted = [r for r in records if r["restricted"]]
    assert 0.08 < len(restricted) / len(records) < 0.18
    unavailable = [p for p in cube.problems if p.reason == "image_unavailable"]
    assert {p.item_id for p in unavailable} == {r["id"] for r in restricted}
    assert all(i.image is None for i in cube if i.restricted)
    assert all(i.image is not None for i in cube if not i.restricted)

    # The release spelling is canonicalised, and the task mix is the release's.
    expected = Counter({taxonomy.canonical_task(t).value: n for t, n in RELEASE_TASK_COUNTS.items()})
    assert Counter(i.task for i in cube) == expected
    assert {i.modality for i in cube} == {"CT", "MRI", "X-Ray", "US"}
    assert {i.part for i in cube} == {"Brain", "Chest", "Heart", "Lungs", "Breast"}

    s = cube_stats(cube)
    assert s.n_items == 7626 and s.n_datasets == 36
    assert sum(s.by_cell.values()) == 7626 and len(s.by_cell) >= 30
    assert s.n_chain_images > 1000 and s.n_chain_pairs >= s.n_chain_images
    assert s.n_unavailable == s.n_restricted == len(restricted)
    assert s.n_images == len(set(cube.digests.values()))


def test_keys_are_posix_paths_relative_to_the_root_and_images_read_lazily(small_cube_template):
    cube = load_cube(small_cube_template)
    f, rec = find_record(small_cube_template)
    item = next(i for i in cube if i.id == rec["id"])
    assert item.image == f"{f.parent.name}/{rec['image_path']}"
    data = cube.read_image(item.image)
    assert data == (small_cube_template / item.image).read_bytes()
    assert cube.image_digest(item) == cube.digests[item.image]
    with pytest.raises(KeyError, match="not an available image"):
        cube.read_image("../outside.png")


def test_both_correct_index_forms_are_accepted(small_cube):
    f, rec = find_record(small_cube)
    answer = "ABCD".index(rec["correct_index"]) if isinstance(rec["correct_index"], str) else rec["correct_index"]
    edit_record(small_cube, rec["id"], correct_index=answer)  # 0-based int
    cube = load_cube(small_cube)
    assert next(i for i in cube if i.id == rec["id"]).answer == answer
    forms = {type(r["correct_index"]) for r in _records(small_cube)}
    assert forms == {int, str}  # the generator writes both forms
    assert cube.skipped == ()


def test_aliases_are_canonicalised(small_cube):
    _, rec = find_record(small_cube)
    edit_record(small_cube, rec["id"], task="Abnormity Diagnosis", modality="X-ray", parts="Lung")
    item = next(i for i in load_cube(small_cube) if i.id == rec["id"])
    assert item.cell == ("Lungs", "X-Ray", "Abnormality Diagnosis")


def test_extra_keys_and_meta_object_go_to_meta(small_cube):
    _, rec = find_record(small_cube)
    edit_record(small_cube, rec["id"], source_label="BUSI-benign", meta={"synthetic": True, "source_label": "override"})
    item = next(i for i in load_cube(small_cube) if i.id == rec["id"])
    assert dict(item.meta) == {"synthetic": True, "source_label": "override"}


def test_three_option_items_and_option_d_null(small_cube):
    f, rec = find_record(small_cube)
    new = {**{k: v for k, v in rec.items() if not k.startswith("option_")}, "id": "three", "option_A": "a", "option_B": "b", "option_C": "c", "option_D": None, "gt_answer": "c", "correct_index": "C"}
    append_record(f, new)
    item = next(i for i in load_cube(small_cube) if i.id == "three")
    assert item.options == ("a", "b", "c") and item.answer == 2 and item.answer_letter == "C"


def test_dotdot_that_stays_inside_the_cube_is_allowed(small_cube):
    f, rec = find_record(small_cube)
    other = next(d for d in sorted(small_cube.iterdir()) if d.is_dir() and d != f.parent)
    target = other / "images" / "shared.png"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes((f.parent / rec["image_path"]).read_bytes())
    edit_record(small_cube, rec["id"], image_path=f"../{other.name}/images/./shared.png")
    item = next(i for i in load_cube(small_cube) if i.id == rec["id"])
    assert item.image == f"{other.name}/images/shared.png"


def test_generator_is_deterministic_by_seed(tmp_path):
    a = generate_release_cube(tmp_path / "a", n_items=40, n_datasets=5, n_images=15, image_size=8, seed=7)
    b = generate_release_cube(tmp_path / "b", n_items=40, n_datasets=5, n_images=15, image_size=8, seed=7)
    c = generate_release_cube(tmp_path / "c", n_items=40, n_datasets=5, n_images=15, image_size=8, seed=8)
    fa, fb, fc = (load_cube(x).fingerprint for x in (a, b, c))
    assert fa == fb != fc


def test_empty_directory_is_a_cube_error(tmp_path):
    with pytest.raises(CubeError, match=r"no test\.json found"):
        load_cube(tmp_path)


def test_nonexistent_source_is_a_cube_error(tmp_path):
    with pytest.raises(CubeError, match="no such file or directory"):
        load_cube(tmp_path / "nope")
