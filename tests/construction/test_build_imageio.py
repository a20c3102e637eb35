"""Windowing, resampling and the metadata-free PNG encoder."""

from __future__ import annotations

import io
import zlib

import numpy as np
import pytest
from PIL import Image

from medrcube.construction import imageio


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (64, 48), (5, 9, 3), (40, 31, 3)])
def test_png_round_trips_through_pillow(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(sum(shape))
    # Smooth gradients plus noise exercise every filter type.
    base = np.linspace(0, 255, int(np.prod(shape))).reshape(shape)
    img = np.clip(base + rng.normal(0, 20, shape), 0, 255).astype(np.uint8)
    data = imageio.encode_png(img)
    decoded = np.asarray(Image.open(io.BytesIO(data)))
    assert decoded.shape == img.shape and np.array_equal(decoded, img)
    assert imageio.png_chunk_types(data) == ["IHDR", "IDAT", "IEND"]
    assert imageio.encode_png(img) == data  # same pixels, same bytes


def test_png_chunk_crcs_are_valid() -> None:
    data = imageio.encode_png(np.zeros((3, 4), np.uint8))
    pos = 8
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        body = data[pos + 4 : pos + 8 + length]
        assert int.from_bytes(data[pos + 8 + length : pos + 12 + length], "big") == zlib.crc32(body)
        pos += 12 + length


def test_png_rejects_what_it_cannot_encode() -> None:
    with pytest.raises(TypeError, match="uint8"):
        imageio.encode_png(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="H x W"):
        imageio.encode_png(np.zeros((2, 2, 4), np.uint8))
    with pytest.raises(ValueError, match="signature"):
        imageio.png_chunk_types(b"GIF89a")


def test_png_written_by_pillow_with_text_is_told_apart() -> None:
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("PatientName", "Doe^John")
    buf = io.BytesIO()
    Image.fromarray(np.zeros((2, 2), np.uint8)).save(buf, format="PNG", pnginfo=info)
    assert "tEXt" in imageio.png_chunk_types(buf.getvalue())


def test_resize_preserves_constants_range_and_shape() -> None:
    flat = np.full((37, 53), 0.25)
    for shape in [(10, 10), (74, 106), (37, 53), (200, 17)]:
        out = imageio.resize(flat, shape)
        assert out.shape == shape and np.allclose(out, 0.25)
    rgb = imageio.resize(np.ones((8, 8, 3)) * [0.1, 0.5, 0.9], (20, 4))
    assert rgb.shape == (20, 4, 3) and np.allclose(rgb[5, 2], [0.1, 0.5, 0.9])
    step = np.zeros((40, 40))
    step[:, 20:] = 1.0
    small = imageio.resize(step, (10, 10))
    assert small.min() >= 0 and small.max() <= 1
    assert np.all(np.diff(small[5]) >= -1e-12)  # an edge stays monotone when shrunk
    with pytest.raises(ValueError, match="positive"):
        imageio.resize(flat, (0, 3))


def test_windows_and_shapes() -> None:
    a = np.array([-100.0, 0.0, 50.0, 100.0, 300.0])
    assert imageio.window(a, 0, 100).tolist() == [0.0, 0.0, 0.5, 1.0, 1.0]
    assert imageio.window_center_width(a, 50, 100).tolist() == [0.0, 0.0, 0.5, 1.0, 1.0]
    with pytest.raises(ValueError, match="must exceed"):
        imageio.window(a, 5, 5)
    w = imageio.percentile_window(np.arange(101.0), 10, 90)
    assert w[10] == 0.0 and w[90] == 1.0 and w[50] == 0.5
    assert imageio.to_uint8(np.array([0.0, 0.5, 1.0, 2.0])).tolist() == [0, 128, 255, 255]
    assert imageio.fit_shape(100, 50, 256) == (256, 128)
    assert imageio.fit_shape(160, 232, 348) == (240, 348)
