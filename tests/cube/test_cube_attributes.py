"""Subgroup attributes in cubes (cube/attributes.py): a JSON Lines cube states them itself or
maps its own columns through a declared mapping; values outside the vocabulary are read as
unknown with a warning naming the item, the column and the value; a release cube's
records carry them in meta; the fingerprint covers them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from medrcube.cube import load_cube
from medrcube.cube.attributes import age_band, age_years, manufacturer, parse_mapping, strata
from medrcube.cube.item import CubeError
from medrcube.cube.jsonl import write_jsonl
from medrcube.records import Attributes


def _png(path: Path, shade: int) -> None:
    Image.new("L", (8, 8), shade).save(path)


def _record(i: int, **extra: object) -> dict:
    return {"id": f"q{i}", "dataset": "ds", "image": f"img{i % 4}.png", "question": f"Which modality? ({i})",
            "options": ["CT", "MRI", "X-Ray", "US"], "answer": 2, "task": "Modality Recognition",
            "modality": "X-Ray", "part": "Chest", **extra}


def _jsonl(tmp_path: Path, records: list[dict]) -> Path:
    for k in range(4):
        _png(tmp_path / f"img{k}.png", 40 * k + 10)
    path = tmp_path / "cube.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_age_bands_keep_everything_over_89_in_one_band() -> None:
    assert [age_band(a) for a in (0, 9, 10, 45.9, 89.99, 90, 104)] == ["0-9", "0-9", "10-19", "40-49", "80-89",
                                                                       "90+", "90+"]
    assert age_years("072Y") == 72 and age_years("018M") == 1.5 and age_years("not an age") is None
    assert age_band(age_years("093Y")) == "90+" and age_band(None) == "unknown"


def test_manufacturers_map_to_the_closed_vocabulary() -> None:
    assert manufacturer("GE MEDICAL SYSTEMS") == "GE" and manufacturer("GE") == "GE"
    assert manufacturer("TOSHIBA_MEC") == "Canon" and manufacturer("Philips Medical Systems") == "Philips"
    assert manufacturer("Acme Imaging Ltd") == "unknown" and manufacturer("") == "unknown"


def test_a_jsonl_cube_maps_its_own_columns(tmp_path: Path) -> None:
    recs = [_record(i, patient_sex="W" if i % 2 else "M", age=31 + 20 * (i % 4), vendor="SIEMENS", hospital="North 1")
            for i in range(8)]
    recs[5]["patient_sex"] = "unsure"  # not in the vocabulary: unknown, and a warning
    path = _jsonl(tmp_path, recs)
    (tmp_path / "attributes.yaml").write_text(
        "sex: {column: patient_sex, values: {W: female}}\nage_band: {column: age}\nmanufacturer: vendor\n"
        "site: {column: hospital, values: {North 1: NORTH}}\n", encoding="utf-8")
    cube = load_cube(path)
    a = {it.id: it.attributes for it in cube.items}
    assert a["q0"] == Attributes(sex="male", age_band="30-39", manufacturer="Siemens", site="NORTH")
    assert a["q3"] == Attributes(sex="female", age_band="90+", manufacturer="Siemens", site="NORTH")
    assert a["q5"].sex == "unknown"
    warn = [p for p in cube.problems if p.reason == "unknown_attribute"]
    assert len(warn) == 1 and warn[0].item_id == "q5" and "'unsure'" in warn[0].message and "patient_sex" in str(warn[0])
    assert strata(cube.items)["manufacturer"] == {"Siemens": 4}  # per image, not per item


def test_the_mapping_can_be_passed_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [_record(i, vendor="GE Healthcare") for i in range(4)])
    assert load_cube(path).items[0].attributes is None  # no mapping, no attributes: the item as before
    mapped = load_cube(path, attributes=parse_mapping({"manufacturer": "vendor"}, "given"))
    assert mapped.items[0].attributes == Attributes(manufacturer="GE")
    assert mapped.fingerprint != load_cube(path).fingerprint
    (tmp_path / "attributes.yaml").write_text("ethnicity: race_column\n", encoding="utf-8")
    with pytest.raises(CubeError, match=r"attributes.yaml: key 'ethnicity' is not an attribute; choose from sex"):
        load_cube(path)
    (tmp_path / "attributes.yaml").write_text("sex: {column: s, values: {X: nonbinary-ish}}\n", encoding="utf-8")
    with pytest.raises(CubeError, match=r"sex.values.X maps to 'nonbinary-ish'.*female, male, other"):
        load_cube(path)


def test_canonical_attributes_round_trip_through_json_lines(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [_record(i, attributes={"sex": "female", "age_band": "70-79", "site": "A1"})
                             for i in range(4)])
    cube = load_cube(path)
    assert all(it.attributes == Attributes(sex="female", age_band="70-79", site="A1") for it in cube.items)
    assert all("attributes" not in it.meta for it in cube.items)
    out = tmp_path / "copy.jsonl"
    write_jsonl(cube.items, out)
    again = load_cube(out)
    assert again.items == cube.items and again.fingerprint == cube.fingerprint
    bad = _jsonl(tmp_path, [_record(0, attributes={"sex": "female", "age_band": "75"})])
    (tmp_path / "attributes.yaml").unlink(missing_ok=True)
    loaded = load_cube(bad)
    assert loaded.items[0].attributes == Attributes(sex="female", age_band="70-79")  # years: read into the band
    free = _jsonl(tmp_path, [_record(0, attributes={"site": "Saint Elsewhere Memorial Hospital, 42 Magrathea Way"})])
    got = load_cube(free)
    assert got.items[0].attributes.site == "unknown"  # free text is never kept
    assert any(p.reason == "unknown_attribute" and p.field == "attributes.site" for p in got.problems)


def test_a_release_record_carries_its_attributes_in_meta(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    (folder / "images").mkdir(parents=True)
    _png(folder / "images" / "a.png", 20)
    rec = {"id": "r1", "image_path": "images/a.png", "question": "Which modality?", "option_A": "CT",
           "option_B": "X-Ray", "gt_answer": "X-Ray", "correct_index": "B", "task": "Modality Recognition",
           "modality": "X-Ray", "parts": "Chest", "meta": {"attributes": {"manufacturer": "Philips", "sex": "male"}}}
    (folder / "test.json").write_text(json.dumps([rec]), encoding="utf-8")
    item = load_cube(tmp_path).items[0]
    assert item.attributes == Attributes(sex="male", manufacturer="Philips") and "attributes" not in item.meta
