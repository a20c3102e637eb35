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
        pytest.fail(f"{MINI_ROOT} has no README.md: rebuild it with `python -m medrcube.construction.mini fixtures/mini`")
    return MINI_ROOT


@pytest.fixture(scope="session")
def mini_records(mini_root: Path) -> list[dict[str, Any]]:
    """Every record of every test.json, with `_dir` (its dataset folder) added."""
    out = []
    for path in sorted(mini_root.glob("*/test.json")):
        for rec in json.loads(path.read_text(encoding="utf-8")):
            out.append({**rec, "_dir": path.parent})
    return out


# -- the construction pipeline: a synthetic hospital archive and recipes over it ----------------

REPO = Path(__file__).resolve().parents[2]
SITE_EXAMPLE = REPO / "recipes" / "site-example.yaml"


@pytest.fixture(scope="session")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding `build/demo-site` (the demo archive) and `recipes/`, laid out like the repository,
    so that recipes/site-example.yaml's relative paths resolve inside it."""
    from medrcube.construction.demo import make_demo_site

    root = tmp_path_factory.mktemp("site")
    make_demo_site(root / "build" / "demo-site")
    (root / "recipes").mkdir()
    return root


def write_recipe(root: Path, name: str, changes: dict[str, Any] | None = None, drop: tuple[str, ...] = ()) -> Path:
    """recipes/site-example.yaml with top-level keys replaced (`changes`) or removed (`drop`),
    written as <root>/recipes/<name>.yaml."""
    import yaml

    data = yaml.safe_load(SITE_EXAMPLE.read_text(encoding="utf-8"))
    data["name"] = name
    data["out"] = f"../build/{name}"
    for k in drop:
        data.pop(k, None)
    data.update(changes or {})
    path = root / "recipes" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def demo_build(demo_root: Path):
    """The site-example recipe built once (no reviewer): the BuildResult."""
    from medrcube.construction.pipeline import build

    return build(write_recipe(demo_root, "site-plain"))


@pytest.fixture(scope="session")
def site_recipe():
    """`write_recipe(root, name, changes=None, drop=())` as a fixture (tests import no conftest)."""
    return write_recipe
