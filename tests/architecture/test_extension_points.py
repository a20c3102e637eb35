"""The registries' entry-point groups: pyproject.toml declares the product's own kinds,
providers and perturbations, and entrypoints.BUILTIN (used when an install predates a
group) repeats exactly those declarations; every one of them loads."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from medrcube import entrypoints

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def declared() -> dict[str, tuple[tuple[str, str], ...]]:
    points = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["entry-points"]
    return {group: tuple(table.items()) for group, table in points.items() if group.startswith("medrcube.")}


def test_the_fallback_repeats_pyproject() -> None:
    assert declared() == entrypoints.BUILTIN


@pytest.mark.parametrize("group", sorted(entrypoints.BUILTIN))
def test_the_product_s_own_entry_points_come_first_and_load(group: str) -> None:
    points = entrypoints.entry_points(group)
    own = [(ep.name, ep.value) for ep in points[: len(entrypoints.BUILTIN[group])]]
    assert own == list(entrypoints.BUILTIN[group])
    for ep in points[: len(own)]:
        assert ep.load() is not None


def test_a_broken_entry_point_names_itself_its_package_and_the_fix(tmp_path: Path) -> None:
    dist = tmp_path / "broken_site-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-site\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[medrcube.kinds]\nbad = medrcube_no_such_module:KIND\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), os.environ.get("PYTHONPATH", "")))}
    done = subprocess.run([sys.executable, "-c", "from medrcube.gate import kinds; kinds.registered()"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode != 0
    assert ("ExtensionError: entry point bad = 'medrcube_no_such_module:KIND' of group 'medrcube.kinds' "
            "(distribution 'broken-site') cannot be loaded: ModuleNotFoundError") in done.stderr
    assert "fix or uninstall that package" in done.stderr
