"""Fixtures of the report tests; the record and run builders are in report_builders.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from medrcube.testing.gencube import generate_release_cube


@pytest.fixture(scope="session")
def small_cube(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small generated release-layout cube (real PNG images, restricted datasets, chains)."""
    return generate_release_cube(
        tmp_path_factory.mktemp("report-cube"), n_items=160, n_datasets=12, n_images=60, image_size=32,
        n_base_images=6, seed=5,
    )
