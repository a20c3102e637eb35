"""Every validation case of the release layout is its own test: each asserts the reason
code and that the message names the file, the item and the field, and says what is wrong."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from medrcube.cube import CubeError, Problem, load_cube
from medrcube.testing.gencube import (
    DELETE,
    append_record,
    break_json,
    edit_record,
    find_record,
    image_of,
    write_bomb_png,
    write_not_image,
)


def only(problems, reason: str) -> Problem:
    found = [p for p in problems if p.reason == reason]
    assert len(found) == 1, [str(p) for p in problems]
    return found[0]


def assert_names(p: Problem, file: Path, item_id: str | None, field: str | None) -> None:
    text = str(p)
    assert p.source == str(file)
    assert str(file) in text
    if item_id is not None:
        assert p.item_id == item_id and repr(item_id) in text
    if field is not None:
        assert p.field == field and repr(field) in text


def loaded_ids(cube) -> set[str]:
    return {i.id for i in cube}


@pytest.fixture
def target(small_cube):
    """(cube root, its test.json, a non-restricted record of it)."""
    f, rec = find_record(small_cube)
    return small_cube, f, rec


def test_malformed_json_names_file_line_and_column(target):
    root, f, rec = target
    line, column = break_json(f)
    cube = load_cube(root)
    p = only(cube.problems, "malformed_json")
    assert_names(p, f, None, None)
    assert f"line {line} column {column}" in p.message and "expected a JSON list" in p.message
    assert rec["id"] not in loaded_ids(cube) and len(cube) > 0  # the other files still load
    assert p.severity == "error"


def test_test_json_that_is_not_a_list(target):
    root, f, rec = target
    f.write_text(json.dumps({"records": []}))
    p = only(load_cube(root).problems, "not_a_list")
    assert_names(p, f, None, None)
    assert "JSON dict" in p.message and "expected a JSON list" in p.message


def test_record_that_is_not_an_object(target):
    root, f, _ = target
    append_record(f, ["not", "a", "record"])
    p = only(load_cube(root).problems, "not_an_object")
    assert_names(p, f, None, None)
    assert "record #" in p.message and "expected a JSON object" in p.message


@pytest.mark.parametrize("field", ["question", "gt_answer", "task", "modality", "parts"])
def test_missing_required_field(target, field):
    root, f, rec = target
    edit_record(root, rec["id"], **{field: DELETE})
    cube = load_cube(root)
    p = only(cube.problems, "missing_field")
    assert_names(p, f, rec["id"], field)
    assert "missing" in p.message and "expected" in p.message
    assert rec["id"] not in loaded_ids(cube)


def test_missing_id_names_the_record_number(target):
    root, f, rec = target
    recs = json.loads(f.read_text())
    n = next(k for k, r in enumerate(recs, start=1) if r["id"] == rec["id"])
    edit_record(root, rec["id"], id=DELETE)
    p = only(load_cube(root).problems, "missing_field")
    assert_names(p, f, None, "id")
    assert p.item_id is None and f"record #{n} has no id" in p.message


def test_field_of_the_wrong_type(target):
    root, f, rec = target
    edit_record(root, rec["id"], question=["what?"])
    p = only(load_cube(root).problems, "invalid_type")
    assert_names(p, f, rec["id"], "question")
    assert "list" in p.message and "expected a string" in p.message


@pytest.mark.parametrize(
    "field, value",
    [("question", "Which \ud800 one?"), ("image_path", "images/\udfff.png"), ("meta", {"site": ["ok", {"\ud801": 1}]})],
)
def test_lone_surrogate_in_a_field_is_refused_naming_it(target, field, value):
    # A JSON escape \ud800 decodes to a string no UTF-8 encode accepts (fingerprint, paths).
    root, f, rec = target
    recs = json.loads(f.read_text(encoding="utf-8"))
    next(r for r in recs if r["id"] == rec["id"])[field] = value
    f.write_text(json.dumps(recs), encoding="utf-8")  # ASCII: the surrogate as its \u escape
    cube = load_cube(root)
    p = only(cube.problems, "invalid_value")
    assert_names(p, f, rec["id"], field)
    assert "lone UTF-16 surrogate" in p.message and "expected UTF-8 text" in p.message
    str(p).encode("utf-8")  # the message itself can be printed and written
    assert rec["id"] not in loaded_ids(cube) and len(cube) > 0


def test_lone_surrogate_in_an_id_is_refused_without_quoting_it_raw(target):
    root, f, rec = target
    recs = json.loads(f.read_text(encoding="utf-8"))
    n, r = next((n, r) for n, r in enumerate(recs, start=1) if r["id"] == rec["id"])
    r["id"] = "x\udfff"
    f.write_text(json.dumps(recs), encoding="utf-8")
    p = only(load_cube(root).problems, "invalid_value")
    assert_names(p, f, None, "id")
    assert p.item_id is None and f"record #{n} id 'x\\udfff'" in str(p).encode("utf-8").decode()


def test_fewer_than_two_options(target):
    root, f, rec = target
    edit_record(root, rec["id"], option_B=DELETE, option_C=DELETE, option_D=DELETE, gt_answer=rec["option_A"], correct_index="A")
    cube = load_cube(root)
    p = only(cube.problems, "too_few_options")
    assert_names(p, f, rec["id"], "option_B")
    assert "1 option(s) (option_A)" in p.message and "expected at least option_A and option_B" in p.message
    assert rec["id"] not in loaded_ids(cube)


def test_option_gap(target):
    root, f, rec = target
    edit_record(root, rec["id"], option_B=DELETE, option_C="c text", gt_answer=rec["option_A"], correct_index="A")
    p = only(load_cube(root).problems, "option_gap")
    assert_names(p, f, rec["id"], "option_B")
    assert "option_C is present but option_B is missing" in p.message and "contiguous from option_A" in p.message


def test_gt_answer_matching_no_option(target):
    root, f, rec = target
    edit_record(root, rec["id"], gt_answer=rec["gt_answer"] + " (typo)")
    p = only(load_cube(root).problems, "gt_answer_no_match")
    assert_names(p, f, rec["id"], "gt_answer")
    assert "matches no option" in p.message and f"A={rec['option_A']!r}" in p.message
    assert "did you mean" in p.message  # the close option is suggested


def test_gt_answer_matching_several_options(target):
    root, f, rec = target
    edit_record(root, rec["id"], option_A="same", option_B="same", gt_answer="same", correct_index="A")
    cube = load_cube(root)
    p = only(cube.problems, "gt_answer_ambiguous")
    assert_names(p, f, rec["id"], "gt_answer")
    assert "option_A, option_B" in p.message and "expected exactly one" in p.message
    assert rec["id"] not in loaded_ids(cube)


@pytest.mark.parametrize("form", ["letter", "int"])
def test_correct_index_disagreeing_with_gt_answer(target, form):
    root, f, rec = target
    right = [rec[f"option_{x}"] for x in "ABCD" if f"option_{x}" in rec].index(rec["gt_answer"])
    wrong = (right + 1) % 2
    edit_record(root, rec["id"], correct_index="ABCD"[wrong] if form == "letter" else wrong)
    cube = load_cube(root)
    p = only(cube.problems, "correct_index_mismatch")
    assert_names(p, f, rec["id"], "correct_index")
    assert f"points to option_{'ABCD'[wrong]}" in p.message and f"expected {'ABCD'[right]!r} (or {right})" in p.message
    assert rec["id"] not in loaded_ids(cube)


def test_correct_index_that_is_no_index(target):
    root, f, rec = target
    edit_record(root, rec["id"], correct_index="first")
    p = only(load_cube(root).problems, "invalid_value")
    assert_names(p, f, rec["id"], "correct_index")
    assert "expected a letter" in p.message


def test_duplicate_ids_name_both_files(small_cube):
    files = sorted(small_cube.glob("*/test.json"))
    first = json.loads(files[0].read_text())[0]
    dup = {**json.loads(files[1].read_text())[0], "id": first["id"]}
    append_record(files[1], dup)
    cube = load_cube(small_cube)
    p = only(cube.problems, "duplicate_id")
    assert_names(p, files[1], first["id"], "id")
    assert str(files[0]) in p.message and "expected ids unique" in p.message
    assert sum(1 for i in cube if i.id == first["id"]) == 1


def test_missing_image_of_a_non_restricted_item_is_an_error(target):
    root, f, rec = target
    edit_record(root, rec["id"], image_path="images/does-not-exist.png")
    cube = load_cube(root)
    p = only(cube.problems, "image_missing")
    assert_names(p, f, rec["id"], "image_path")
    assert "does not exist" in p.message and "only a restricted item may lack one" in p.message
    assert p.severity == "error" and rec["id"] not in loaded_ids(cube)


def test_absolute_image_path(target):
    root, f, rec = target
    edit_record(root, rec["id"], image_path=str(image_of(f, rec).resolve()))
    p = only(load_cube(root).problems, "image_path_absolute")
    assert_names(p, f, rec["id"], "image_path")
    assert "is absolute" in p.message and "expected a path relative to" in p.message


def test_image_path_escaping_through_dotdot(target, tmp_path):
    root, f, rec = target
    (tmp_path / "outside.png").write_bytes(image_of(f, rec).read_bytes())
    edit_record(root, rec["id"], image_path="../../outside.png")
    cube = load_cube(root)
    p = only(cube.problems, "image_path_escapes")
    assert_names(p, f, rec["id"], "image_path")
    assert "outside the cube root" in p.message
    assert rec["id"] not in loaded_ids(cube)


def test_image_path_escaping_through_a_symlink(target, tmp_path):
    root, f, rec = target
    outside = tmp_path / "outside.png"
    outside.write_bytes(image_of(f, rec).read_bytes())
    link = f.parent / "images" / "link.png"
    os.symlink(outside, link)
    edit_record(root, rec["id"], image_path="images/link.png")
    cube = load_cube(root)
    p = only(cube.problems, "image_symlink_escapes")
    assert_names(p, f, rec["id"], "image_path")
    assert "through a symlink" in p.message and str(outside) in p.message
    assert rec["id"] not in loaded_ids(cube)


def test_symlink_inside_the_cube_is_allowed(target):
    root, f, rec = target
    os.symlink(image_of(f, rec).name, f.parent / "images" / "alias.png")
    edit_record(root, rec["id"], image_path="images/alias.png")
    cube = load_cube(root)
    assert cube.skipped == () and rec["id"] in loaded_ids(cube)


def test_unreadable_image(target):
    root, f, rec = target
    (f.parent / "images" / "adir.png").mkdir()  # exists, cannot be read as a file
    edit_record(root, rec["id"], image_path="images/adir.png")
    p = only(load_cube(root).problems, "image_unreadable")
    assert_names(p, f, rec["id"], "image_path")
    assert "cannot read" in p.message and "IsADirectoryError" in p.message


def test_non_image_file(target):
    root, f, rec = target
    write_not_image(image_of(f, rec))
    cube = load_cube(root)
    ps = [p for p in cube.problems if p.reason == "not_an_image"]
    assert ps and all(p.field == "image_path" for p in ps)
    p = next(p for p in ps if p.item_id == rec["id"])
    assert_names(p, f, rec["id"], "image_path")
    assert "not an image" in p.message and "b'this is " in p.message and "PNG" in p.message
    # Every item on that image is skipped, each with its own problem.
    assert {p.item_id for p in ps}.isdisjoint(loaded_ids(cube))


def test_truncated_header_is_not_an_image(target):
    root, f, rec = target
    path = image_of(f, rec)
    path.write_bytes(path.read_bytes()[:20])
    ps = [p for p in load_cube(root).problems if p.reason == "not_an_image" and p.item_id == rec["id"]]
    assert len(ps) == 1
    assert "corrupt image header" in ps[0].message or "not an image" in ps[0].message


@pytest.mark.parametrize(
    ("width", "height", "why"),
    [
        (100_000, 100_000, "above twice Pillow's limit: DecompressionBombError"),
        (10_000, 10_000, "between Pillow's limit and twice it: DecompressionBombWarning"),
    ],
)
def test_decompression_bomb(target, width, height, why):
    root, f, rec = target
    write_bomb_png(image_of(f, rec), width, height)
    cube = load_cube(root)
    p = next(p for p in cube.problems if p.item_id == rec["id"])
    assert p.reason == "decompression_bomb", why
    assert_names(p, f, rec["id"], "image_path")
    assert str(width * height) in p.message and "expected at most" in p.message
    assert rec["id"] not in loaded_ids(cube)


def test_decompression_bomb_under_our_own_limit(target):
    root, f, rec = target
    write_bomb_png(image_of(f, rec), 5000, 5000)  # below Pillow's limit
    assert rec["id"] in loaded_ids(load_cube(root))
    cube = load_cube(root, max_pixels=1_000_000)
    p = next(p for p in cube.problems if p.item_id == rec["id"])
    assert p.reason == "decompression_bomb" and "5000x5000 = 25000000 pixels; expected at most 1000000" in p.message


@pytest.mark.parametrize(
    ("field", "value", "reason", "kept"),
    [("task", "Report Generation", "unknown_task", "Report Generation"), ("modality", "PET", "unknown_modality", "PET"), ("parts", "Elbow", "unknown_part", "Elbow")],
)
def test_unknown_axis_values_are_kept_and_warned(target, field, value, reason, kept):
    root, f, rec = target
    edit_record(root, rec["id"], **{field: value})
    cube = load_cube(root)
    p = only(cube.problems, reason)
    assert p.severity == "warning"
    assert_names(p, f, rec["id"], field)
    assert "not in the taxonomy" in p.message and "known:" in p.message
    item = next(i for i in cube if i.id == rec["id"])
    assert kept in item.cell


def test_restricted_item_without_image_is_kept_as_unavailable(target):
    root, f, rec = target
    image_of(f, rec).unlink()
    for r in json.loads(f.read_text()):
        if r["image_path"] == rec["image_path"]:
            edit_record(root, r["id"], restricted=True)
    edit_record(root, rec["id"], image_path=None)  # no path at all is "absent" too
    cube = load_cube(root)
    assert cube.skipped == ()
    item = next(i for i in cube if i.id == rec["id"])
    assert item.image is None and item.restricted and not cube.image_available(item)
    p = next(p for p in cube.problems if p.item_id == rec["id"])
    assert p.reason == "image_unavailable" and p.severity == "warning"


def test_strict_raises_on_the_first_error(target):
    root, f, rec = target
    edit_record(root, rec["id"], gt_answer="nothing like it")
    with pytest.raises(CubeError) as info:
        load_cube(root, strict=True)
    assert len(info.value.problems) == 1 and info.value.problems[0].reason == "gt_answer_no_match"
    assert rec["id"] in str(info.value)


def test_strict_accepts_warnings(target):
    root, f, rec = target
    edit_record(root, rec["id"], modality="PET")
    assert len(load_cube(root, strict=True)) > 0


def test_cube_with_no_loadable_item_is_a_cube_error(tmp_path):
    d = tmp_path / "cube" / "DS"
    d.mkdir(parents=True)
    (d / "test.json").write_text(json.dumps([{"id": "x", "question": "q?"}]))
    with pytest.raises(CubeError, match="no loadable item") as info:
        load_cube(tmp_path / "cube")
    assert {p.reason for p in info.value.problems} == {"missing_field", "too_few_options"}


def test_test_json_symlinked_from_outside_is_not_read(small_cube, tmp_path):
    outside = tmp_path / "elsewhere.json"
    outside.write_text("[]")
    (small_cube / "ZZ_linked").mkdir()
    os.symlink(outside, small_cube / "ZZ_linked" / "test.json")
    p = only(load_cube(small_cube).problems, "unreadable_file")
    assert p.source == str(small_cube / "ZZ_linked" / "test.json") and str(outside) in p.message


def test_a_single_test_json_is_pointed_to_its_cube_root(target):
    root, f, _ = target
    with pytest.raises(CubeError, match="pass the cube root directory"):
        load_cube(f)
