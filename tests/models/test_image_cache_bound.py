"""The prepared-image cache's bound (models/images.py): 8 MB by default, or what
MEDRCUBE_IMAGE_CACHE_MB names; an unreadable value is an error naming the variable."""

from __future__ import annotations

import pytest

from medrcube.models.images import DEFAULT_CACHE_BYTES, cache_bound_from_env


def test_the_image_cache_bound_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEDRCUBE_IMAGE_CACHE_MB", raising=False)
    assert cache_bound_from_env() == DEFAULT_CACHE_BYTES == 8 * 2**20
    monkeypatch.setenv("MEDRCUBE_IMAGE_CACHE_MB", "64")
    assert cache_bound_from_env() == 64 * 2**20
    for bad in ("0", "-3", "nan", "lots"):
        monkeypatch.setenv("MEDRCUBE_IMAGE_CACHE_MB", bad)
        with pytest.raises(ValueError, match=f"MEDRCUBE_IMAGE_CACHE_MB is '{bad}'"):
            cache_bound_from_env()
