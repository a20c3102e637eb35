"""`medrcube validate` and `medrcube cube stats|export` through the real dispatcher."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from medrcube.cli import main
from medrcube.cube import load_cube
from medrcube.cube.stats import cube_stats
from medrcube.testing.gencube import edit_record, find_record, image_of, write_not_image


def test_validate_clean_cube_with_warnings_only_exits_0(small_cube_template, capsys):
    assert main(["validate", str(small_cube_template)]) == 0
    out = capsys.readouterr().out
    n_unavail = sum(1 for i in load_cube(small_cube_template) if i.image is None)
    assert f"0 error(s), {n_unavail} warning(s)" in out
    assert f"WARNING image_unavailable ({n_unavail})" in out
    assert out.rstrip().endswith("OK (warnings only)")


def test_validate_exits_1_and_groups_problems_by_reason(small_cube, capsys):
    f, rec = find_record(small_cube)
    edit_record(small_cube, rec["id"], gt_answer="nope")
    f2, rec2 = find_record(small_cube, task="Modality Recognition")
    write_not_image(image_of(f2, rec2))
    assert main(["validate", str(small_cube)]) == 1
    out = capsys.readouterr().out
    assert "ERROR gt_answer_no_match (1): gt_answer matches no option" in out
    m = re.search(r"ERROR not_an_image \((\d+)\)", out)
    assert m and int(m.group(1)) >= 1
    assert f"item {rec['id']!r} field 'gt_answer'" in out and str(f) in out
    assert "FAILED:" in out
    # Errors are listed before warnings.
    assert out.index("ERROR ") < out.index("WARNING ")


def test_validate_strict_stops_at_the_first_error(small_cube, capsys):
    _, rec = find_record(small_cube)
    edit_record(small_cube, rec["id"], correct_index="Z")
    assert main(["validate", "--strict", str(small_cube)]) == 1
    out = capsys.readouterr().out
    assert "NOT LOADABLE" in out and "1 error(s), 0 warning(s)" in out and "invalid_value" in out


def test_validate_json_report(small_cube, capsys):
    _, rec = find_record(small_cube)
    edit_record(small_cube, rec["id"], modality="PET")
    assert main(["validate", "--json", str(small_cube)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["errors"] == 0
    assert report["by_reason"]["unknown_modality"] == {"severity": "warning", "count": 1, "meaning": "modality outside the taxonomy (kept as written)"}
    p = next(p for p in report["problems"] if p["reason"] == "unknown_modality")
    assert p["item_id"] == rec["id"] and p["field"] == "modality"


def test_validate_missing_path_exits_1(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nothing")]) == 1
    assert "no such file or directory" in capsys.readouterr().out


def test_cube_stats_tables_match_the_computed_stats(small_cube_template, capsys):
    assert main(["cube", "stats", str(small_cube_template)]) == 0
    out = capsys.readouterr().out
    s = cube_stats(load_cube(small_cube_template))
    assert f"{s.n_items} items from {s.n_datasets} datasets in {len(s.by_cell)} cells" in out
    for part, n in s.by_part.items():
        assert re.search(rf"^{part}\s+{n}\s", out, re.M), part
    assert re.search(rf"^chains \(high-level \+ low/mid-level item\)\s+{s.n_chain_images}$", out, re.M)
    assert re.search(rf"^restricted\s+{s.n_restricted}$", out, re.M)
    assert "part    modality" in out  # the cell matrix header
    # Aligned: every row of the cell matrix is as wide as its header (or narrower).
    block = out.split("items per cell")[1].split("\n\n")[0].splitlines()[1:]
    assert len({len(block[0]), len(block[1])}) == 1


def test_cube_stats_json(small_cube_template, capsys):
    assert main(["cube", "stats", "--json", str(small_cube_template)]) == 0
    data = json.loads(capsys.readouterr().out)
    cube = load_cube(small_cube_template)
    assert data["n_items"] == len(cube) and data["fingerprint"] == cube.fingerprint
    assert sum(c["n"] for c in data["by_cell"]) == len(cube)


def test_cube_stats_of_a_broken_cube_exits_1(tmp_path, capsys):
    assert main(["cube", "stats", str(tmp_path)]) == 1
    assert "no test.json" in capsys.readouterr().err


def test_cube_export_jsonl_and_parquet_round_trip(small_cube_template, tmp_path, capsys):
    cube = load_cube(small_cube_template)
    assert main(["cube", "export", str(small_cube_template), str(tmp_path / "out")]) == 0
    assert load_cube(tmp_path / "out" / "cube.jsonl").fingerprint == cube.fingerprint
    assert main(["cube", "export", str(small_cube_template), str(tmp_path / "c.parquet"), "--format", "parquet"]) == 0
    assert load_cube(tmp_path / "c.parquet").fingerprint == cube.fingerprint
    # Without image_path a table's keys are made of dataset and digest; the export keeps them.
    from medrcube.cube import to_hf_dataset

    to_hf_dataset(cube).remove_columns("image_path").to_parquet(str(tmp_path / "nopath.parquet"))
    table_cube = load_cube(tmp_path / "nopath.parquet")
    assert main(["cube", "export", str(tmp_path / "nopath.parquet"), str(tmp_path / "out2")]) == 0
    again = load_cube(tmp_path / "out2" / "cube.jsonl")
    assert again.fingerprint == cube.fingerprint
    assert [i.image for i in again] == [i.image for i in table_cube]


def test_console_script_in_a_subprocess(small_cube_template):
    out = subprocess.run([sys.executable, "-m", "medrcube.cli", "validate", str(small_cube_template)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "items loaded" in out.stdout
