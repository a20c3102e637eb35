"""Fixtures for the construction-pipeline tests: the committed mini cube and its records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

MINI_ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "mini"


@pytest.fixture(scope="session")
def mini_root() -> Path:
    if not (MINI_ROOT / "README.md").is_file():
        pytest.fail(f"{MINI_ROOT} has no README.md: rebuild it with `python -m medrcube.build.mini fixtures/mini`")
    return MINI_ROOT


@pytest.fixture(scope="session")
def mini_records(mini_root: Path) -> list[dict[str, Any]]:
    """Every record of every test.json, with `_dir` (its dataset folder) added."""
    out = []
    for path in sorted(mini_root.glob("*/test.json")):
        for rec in json.loads(path.read_text(encoding="utf-8")):
            out.append({**rec, "_dir": path.parent})
    return out
