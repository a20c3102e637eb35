"""Synthetic lesions: the quadrant and size class they are reported with are the ones drawn."""

from __future__ import annotations

import numpy as np
import pytest

from medrcube.construction.stages import lesions


def _image(shape: tuple[int, int] = (200, 260), seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(0.35 + 0.05 * rng.standard_normal(shape), 0, 1)


@pytest.mark.parametrize("quadrant", lesions.QUADRANTS)
@pytest.mark.parametrize("size", [s.name for s in lesions.SIZE_CLASSES])
def test_lesion_lies_where_and_as_large_as_reported(quadrant: str, size: str) -> None:
    img = _image()
    out, lesion = lesions.insert_lesion(img, np.ones(img.shape, bool), quadrant, size, np.random.default_rng(7))
    assert lesion.quadrant == quadrant and lesion.size_class == size
    changed = np.abs(out - img) > 0.05
    rows, cols = np.nonzero(changed)
    # The changed pixels form the disc: its centroid is the reported centre, its
    # extent the reported diameter (within the soft edge), all inside the quadrant.
    assert abs(rows.mean() - lesion.center[0]) < 1.5 and abs(cols.mean() - lesion.center[1]) < 1.5
    extent = max(rows.max() - rows.min(), cols.max() - cols.min()) + 1
    assert abs(extent - lesion.diameter_px) <= 0.2 * lesion.diameter_px + 2
    assert lesions.size_class_of(lesion.diameter_fraction) == size
    for r, c in [(rows.min(), cols.min()), (rows.max(), cols.max())]:
        assert lesions.quadrant_of(img.shape, (r, c)) == quadrant
    assert out[changed].mean() > img[changed].mean() + 0.2  # brighter by default


def test_lesion_is_deterministic_per_seed() -> None:
    img, allowed = _image(), np.ones((200, 260), bool)
    a, la = lesions.insert_lesion(img, allowed, "lower left", "medium", np.random.default_rng(3))
    b, lb = lesions.insert_lesion(img, allowed, "lower left", "medium", np.random.default_rng(3))
    c, lc = lesions.insert_lesion(img, allowed, "lower left", "medium", np.random.default_rng(4))
    assert la == lb and np.array_equal(a, b)
    assert la.center != lc.center or not np.array_equal(a, c)


def test_lesion_stays_inside_the_allowed_mask() -> None:
    img = _image()
    allowed = np.zeros(img.shape, bool)
    allowed[20:60, 150:240] = True  # a small "organ" in the upper right
    out, lesion = lesions.insert_lesion(img, allowed, "upper right", "small", np.random.default_rng(0))
    changed = np.abs(out - img) > 1e-9
    assert allowed[changed].all()
    with pytest.raises(lesions.NoRoom, match="upper left"):
        lesions.insert_lesion(img, allowed, "upper left", "small", np.random.default_rng(0))
    with pytest.raises(lesions.NoRoom, match="large"):
        lesions.insert_lesion(img, allowed, "upper right", "large", np.random.default_rng(0))


def test_dark_lesions_and_rgb_images() -> None:
    rgb = np.stack([_image(seed=s) for s in (1, 2, 3)], axis=-1) + 0.3
    out, lesion = lesions.insert_lesion(rgb, np.ones(rgb.shape[:2], bool), "upper left", "large", np.random.default_rng(1), polarity=-1)
    assert out.shape == rgb.shape and lesion.polarity == -1
    r, c = lesion.center
    assert out[r, c].mean() < rgb[r, c].mean() - 0.2


def test_invalid_arguments_are_named() -> None:
    img, allowed = _image(), np.ones((200, 260), bool)
    with pytest.raises(ValueError, match="quadrant"):
        lesions.insert_lesion(img, allowed, "middle", "small", np.random.default_rng(0))
    with pytest.raises(ValueError, match="size class"):
        lesions.insert_lesion(img, allowed, "upper left", "huge", np.random.default_rng(0))


def test_size_classes_partition_and_label() -> None:
    fractions = (0.01, 0.079, 0.08, 0.139, 0.14, 0.249, 0.25, 0.9)
    assert [lesions.size_class_of(f) for f in fractions] == ["small", "small", "medium", "medium", "large", "large", "very large", "very large"]
    for s in lesions.SIZE_CLASSES:
        assert s.low <= s.nominal < s.high and lesions.size_class_of(s.nominal) == s.name
    assert lesions.SIZE_BY_NAME["medium"].label() == "Medium (8% to 14% of the shorter image side)"


def test_body_mask_fills_holes() -> None:
    img = np.zeros((60, 60))
    img[10:50, 10:50] = 0.8
    img[25:35, 25:35] = 0.0  # a dark cavity inside the body
    mask = lesions.body_mask(img)
    assert mask[30, 30] and not mask[2, 2]


def test_textured_mask_excludes_a_flat_gray_fill() -> None:
    rng = np.random.default_rng(0)
    img = np.full((80, 80), 0.15)
    img[20:70, 10:60] = np.clip(0.4 + 0.1 * rng.standard_normal((50, 50)), 0, 1)  # speckled "sector"
    mask = lesions.textured_mask(img)
    assert mask[45, 35] and not mask[5, 75] and not mask[75, 5]
    assert not lesions.body_mask(img)[5, 75] or lesions.body_mask(img).mean() > 0.9  # a threshold alone keeps the fill
