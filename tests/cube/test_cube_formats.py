"""JSON Lines and Hugging Face sources: the same cube in every format, and the validation
cases that are specific to them (a bad line, a row without embedded image, the hub offline)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from medrcube.cube import CubeError, Item, load_cube, to_hf_dataset, write_jsonl
from medrcube.cube.hf import load_dataset_object


@pytest.fixture(scope="module")
def cube(small_cube_template):
    return load_cube(small_cube_template)


def test_jsonl_beside_the_images_gives_the_same_cube(cube, small_cube):
    write_jsonl(cube.items, small_cube / "cube.jsonl")
    again = load_cube(small_cube / "cube.jsonl")
    assert again.items == cube.items
    assert again.fingerprint == cube.fingerprint
    assert again.digests == cube.digests


def test_save_to_disk_and_parquet_give_the_same_cube(cube, tmp_path):
    ds = to_hf_dataset(cube)
    assert {"id", "image_path", "option_A", "option_D", "gt_answer", "correct_index", "parts", "restricted", "image"} <= set(ds.column_names)
    assert isinstance(ds.features["image"], datasets.Image)
    ds.save_to_disk(str(tmp_path / "disk"))
    ds.to_parquet(str(tmp_path / "cube.parquet"))
    for source in (tmp_path / "disk", tmp_path / "cube.parquet"):
        again = load_cube(source)
        assert again.items == cube.items, source
        assert again.fingerprint == cube.fingerprint
        item = next(i for i in again if i.image is not None)
        assert again.read_image(item.image) == cube.read_image(item.image)


def test_parquet_shards_by_glob_and_directory(cube, tmp_path):
    ds = to_hf_dataset(cube)
    half = len(ds) // 2
    (tmp_path / "data").mkdir()
    ds.select(range(half)).to_parquet(str(tmp_path / "data" / "test-0.parquet"))
    ds.select(range(half, len(ds))).to_parquet(str(tmp_path / "data" / "test-1.parquet"))
    for spec in (tmp_path / "data", str(tmp_path / "data" / "*.parquet")):
        again = load_cube(spec)
        assert again.fingerprint == cube.fingerprint and len(again) == len(cube)


def test_dataset_dict_with_a_test_split(cube, tmp_path):
    dd = datasets.DatasetDict({"test": to_hf_dataset(cube)})
    dd.save_to_disk(str(tmp_path / "dd"))
    assert load_cube(tmp_path / "dd").fingerprint == cube.fingerprint


def test_hf_restricted_rows_without_image_are_unavailable(cube):
    ds = to_hf_dataset(cube)
    restricted = [i for i in cube if i.restricted]
    assert restricted, "the generated cube has restricted datasets"
    assert all(row["image"] is None for row in ds if row["restricted"])
    again = load_dataset_object(ds, source="mem")
    assert sum(p.reason == "image_unavailable" for p in again.problems) == len(restricted)


def test_hf_non_restricted_row_without_image_is_an_error(cube):
    ds = to_hf_dataset(cube)
    victim = next(i for i in cube if not i.restricted)
    ds = ds.map(lambda r: {"image": None} if r["id"] == victim.id else {}, features=ds.features)
    again = load_dataset_object(ds, source="mem")
    p = next(p for p in again.problems if p.item_id == victim.id)
    assert (p.reason, p.field, p.source) == ("image_missing", "image", "mem")
    assert "image is None" in p.message and victim.id not in {i.id for i in again}


def test_hf_row_with_a_path_instead_of_bytes_is_refused(cube, tmp_path):
    victim = next(i for i in cube if not i.restricted)
    outside = tmp_path / "x.png"
    outside.write_bytes(cube.read_image(victim.image))
    ds = to_hf_dataset(cube).cast_column("image", datasets.Image(decode=False))
    ds = ds.map(lambda r: {"image": {"bytes": None, "path": str(outside)}} if r["id"] == victim.id else {}, features=ds.features)
    again = load_dataset_object(ds, source="mem")
    p = next(p for p in again.problems if p.item_id == victim.id)
    assert p.reason == "image_not_embedded" and str(outside) in p.message


def test_hf_row_with_non_image_bytes(cube):
    victim = next(i for i in cube if not i.restricted)
    ds = to_hf_dataset(cube).cast_column("image", datasets.Image(decode=False))
    ds = ds.map(lambda r: {"image": {"bytes": b"GIF89a-not-really", "path": None}} if r["id"] == victim.id else {}, features=ds.features)
    p = next(p for p in load_dataset_object(ds, source="mem").problems if p.item_id == victim.id)
    assert p.reason == "not_an_image" and p.field == "image"


def test_hf_table_without_image_column(cube, tmp_path):
    to_hf_dataset(cube).remove_columns("image").to_parquet(str(tmp_path / "x.parquet"))
    with pytest.raises(CubeError, match="no 'image' column"):
        load_cube(tmp_path / "x.parquet")


def test_hf_rows_are_checked_like_release_records(cube):
    ds = to_hf_dataset(cube)
    victim = cube.items[0]
    ds = ds.map(lambda r: {"gt_answer": "nowhere"} if r["id"] == victim.id else {}, features=ds.features)
    p = next(p for p in load_dataset_object(ds, source="mem").problems if p.item_id == victim.id)
    assert p.reason == "gt_answer_no_match" and p.field == "gt_answer"


def test_hf_meta_json_with_a_lone_surrogate_escape_is_refused(cube):
    # Arrow strings are valid UTF-8, but the JSON text of the meta column can decode to a
    # lone surrogate (\\ud800), which no later UTF-8 encode (the fingerprint) accepts.
    ds = to_hf_dataset(cube)
    victim = cube.items[0]
    ds = ds.map(lambda r: {"meta": '{"note": "\\ud800"}'} if r["id"] == victim.id else {}, features=ds.features)
    loaded = load_dataset_object(ds, source="mem")
    p = next(p for p in loaded.problems if p.item_id == victim.id)
    assert (p.reason, p.field) == ("invalid_value", "meta") and "lone UTF-16 surrogate" in p.message
    assert victim.id not in {i.id for i in loaded} and len(loaded) == len(cube) - 1


def test_jsonl_malformed_line_names_the_line(cube, small_cube):
    path = small_cube / "cube.jsonl"
    write_jsonl(cube.items[:5], path)
    lines = path.read_text().splitlines()
    lines[2] = lines[2][:-1]  # drop the closing brace
    path.write_text("\n".join(lines) + "\n")
    again = load_cube(path)
    assert len(again) == 4
    p = next(p for p in again.problems if p.reason == "malformed_json")
    assert p.source == str(path) and "line 3 column" in p.message


def test_jsonl_lines_beyond_the_parser_limits_name_their_line(cube, small_cube):
    # json.loads raises RecursionError / ValueError (not JSONDecodeError) for these.
    path = small_cube / "cube.jsonl"
    write_jsonl(cube.items[:5], path)
    lines = path.read_text().splitlines()
    lines[1] = "[" * 50_000 + "]" * 50_000
    lines[3] = lines[3].replace('"answer": ', '"answer": ' + "9" * 5000 + ", \"was\": ", 1)
    path.write_text("\n".join(lines) + "\n")
    again = load_cube(path)
    assert len(again) == 3  # the other lines still load
    found = sorted(p.message for p in again.problems if p.reason == "malformed_json")
    assert len(found) == 2 and all(p.source == str(path) for p in again.problems if p.reason == "malformed_json")
    assert "line 2: arrays or objects nested too deeply" in found[0]
    assert "line 4: an integer longer than" in found[1]


def test_jsonl_record_missing_a_field(cube, small_cube):
    path = small_cube / "cube.jsonl"
    recs = [i.to_dict() for i in cube.items[:3]]
    del recs[1]["options"]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    p = next(p for p in load_cube(path).problems if p.severity == "error")
    assert (p.reason, p.item_id, p.field) == ("missing_field", recs[1]["id"], "options")


def test_jsonl_answer_out_of_range(cube, small_cube):
    path = small_cube / "cube.jsonl"
    rec = cube.items[0].to_dict() | {"answer": 7}
    path.write_text(json.dumps(rec) + "\n" + json.dumps(cube.items[1].to_dict()) + "\n")
    p = next(p for p in load_cube(path).problems if p.severity == "error")
    assert (p.reason, p.field) == ("invalid_value", "answer") and "outside the" in p.message


def test_jsonl_options_beyond_the_26_letters_are_refused(cube, small_cube):
    path = small_cube / "cube.jsonl"
    letters26 = cube.items[0].to_dict() | {"id": "ok-26", "options": [f"o{k}" for k in range(26)], "answer": 25}
    too_many = cube.items[1].to_dict() | {"id": "bad-27", "options": [f"o{k}" for k in range(27)], "answer": 0}
    path.write_text(json.dumps(letters26) + "\n" + json.dumps(too_many) + "\n")
    loaded = load_cube(path)
    assert [i.id for i in loaded] == ["ok-26"]
    p = next(p for p in loaded.problems if p.severity == "error")
    assert (p.reason, p.item_id, p.field) == ("invalid_value", "bad-27", "options")
    assert "27 options; expected at most 26" in p.message


def test_jsonl_repeated_options_are_warned_naming_the_first(cube, small_cube):
    path = small_cube / "cube.jsonl"
    rec = cube.items[0].to_dict() | {"options": ["x", "y", "x", "x"], "answer": 1}
    path.write_text(json.dumps(rec) + "\n")
    found = [p.message for p in load_cube(path).problems if p.reason == "duplicate_options"]
    assert found == ["option 2 repeats option 0 ('x'); expected distinct options",
                     "option 3 repeats option 0 ('x'); expected distinct options"]


def test_jsonl_image_escaping_the_folder(cube, small_cube):
    path = small_cube / "cube.jsonl"
    item = next(i for i in cube if i.image)
    bad = Item(**{**item.to_dict(), "image": "../elsewhere.png"})
    write_jsonl([bad, *cube.items[1:3]], path)
    p = next(p for p in load_cube(path).problems if p.item_id == item.id)
    assert (p.reason, p.field) == ("image_path_escapes", "image")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("mode", ["HF_HUB_OFFLINE=1", "endpoint unreachable"])
def test_hub_name_without_network_fails_fast_with_a_local_copy_hint(tmp_path, mode):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    env["HF_HOME"] = str(tmp_path / "hf-home")  # an empty cache: nothing to fall back on
    if mode == "HF_HUB_OFFLINE=1":
        env["HF_HUB_OFFLINE"] = "1"
    else:
        # A port nobody listens on: unreachable whatever the machine's network.
        env["HF_ENDPOINT"] = f"http://127.0.0.1:{_closed_port()}"
    # The timeout only guards CI against a hang; "fast" is about seconds, not minutes.
    out = subprocess.run(
        [sys.executable, "-m", "medrcube.cli", "validate", "hf:Flmc/MedRCube"], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 1
    assert "hf:Flmc/MedRCube: the hub is unreachable" in out.stdout
    assert "HF_HUB_OFFLINE is set" in out.stdout if mode == "HF_HUB_OFFLINE=1" else "cannot connect to http://127.0.0.1" in out.stdout
    for hint in ("save_to_disk", "parquet", "release-layout directory"):
        assert hint in out.stdout
    assert not (Path(env["HF_HOME"]) / "hub").exists() or not any((Path(env["HF_HOME"]) / "hub").iterdir())


def test_table_without_image_path_keys_images_by_content(cube):
    from medrcube.cube.stats import cube_stats

    ds = to_hf_dataset(cube).remove_columns("image_path")
    again = load_dataset_object(ds, source="mem")
    assert again.fingerprint == cube.fingerprint
    for a, b in zip(cube.items, again.items, strict=True):
        if a.image is None:
            assert b.image is None
        else:
            assert b.image == f"{a.dataset}/{cube.digests[a.image][:20]}.png"
    # Rows of one image share its key, so the chains are those of the directory cube.
    s, t = cube_stats(cube), cube_stats(again)
    assert (t.n_images, t.n_chain_images, t.n_chain_pairs) == (s.n_images, s.n_chain_images, s.n_chain_pairs)
    assert len(set(again.digests)) == len(set(cube.digests))
