"""benchmarks/allure_writer.py runs, writes its figures and finds allure's own files (not a speed test)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import allure_writer


def test_the_writers_make_the_same_files_and_the_figures_are_written(tmp_path: Path) -> None:
    out = tmp_path / "aw.json"
    assert allure_writer.main(["--items", "9", "--rounds", "2", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["same_files"] is True and doc["items"] == 9
    assert set(doc["per_item"]) == {"allure", "c_encoding"}
    assert all(v["median_ms"] > 0 for v in doc["per_item"].values())


def test_the_items_are_a_gate_case_s_three() -> None:
    items = allure_writer.gate_like_items(6)
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["TestResult", "TestResultContainer", "TestResultContainer"] * 2
    assert items[1].children == [items[0].uuid]
