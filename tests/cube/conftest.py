"""Fixtures for the cube tests: generated release-layout cubes (small images, fast)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from medrcube.testing.gencube import generate_release_cube


@pytest.fixture(scope="session")
def full_cube_template(tmp_path_factory) -> Path:
    """The release-sized cube (7,626 items, 36 datasets), 32 px images: generated once."""
    return generate_release_cube(tmp_path_factory.mktemp("full") / "cube", image_size=32)


@pytest.fixture(scope="session")
def small_cube_template(tmp_path_factory) -> Path:
    return generate_release_cube(
        tmp_path_factory.mktemp("small") / "cube", n_items=60, n_datasets=12, n_images=25, image_size=16, seed=3
    )


@pytest.fixture
def small_cube(small_cube_template, tmp_path) -> Path:
    """A private copy of a small generated cube that a test may break."""
    return Path(shutil.copytree(small_cube_template, tmp_path / "cube", symlinks=True))


@pytest.fixture(autouse=True, scope="session")
def _quiet_datasets():
    """`datasets` draws a progress bar per export; the test log does not need them."""
    import datasets

    datasets.disable_progress_bars()
    yield
