"""Display images for a cube: windowing, resampling and a metadata-free PNG writer.

Everything here is pure numpy plus the standard library's zlib, so the bytes a build
writes depend on the input pixels alone: no image-library version, no timestamp, no
text chunk. A cube's PNG files carry exactly three chunk types (IHDR, IDAT, IEND).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Fixed, so that a rebuild is byte-identical: level 9 is the smallest output zlib makes.
ZLIB_LEVEL = 9


# -- windowing ---------------------------------------------------------------------------


def window(arr: np.ndarray, low: float, high: float) -> np.ndarray:
    """Map [low, high] linearly onto [0, 1], clipping outside (a display window)."""
    if not high > low:
        raise ValueError(f"window: high ({high}) must exceed low ({low})")
    out = (np.asarray(arr, dtype=np.float64) - low) / (high - low)
    return np.clip(out, 0.0, 1.0)


def window_center_width(arr: np.ndarray, center: float, width: float) -> np.ndarray:
    """A DICOM-style window given by its centre and width."""
    return window(arr, center - width / 2.0, center + width / 2.0)


def percentile_window(
    arr: np.ndarray, low_pct: float = 1.0, high_pct: float = 99.5, mask: np.ndarray | None = None
) -> np.ndarray:
    """Window between two percentiles of the values (of `mask`'s pixels when given).

    Used for MRI and radiographs, whose raw values have no fixed physical scale.
    """
    a = np.asarray(arr, dtype=np.float64)
    values = a[mask] if mask is not None else a.ravel()
    if values.size == 0:
        raise ValueError("percentile_window: the mask selects no pixel")
    low, high = np.percentile(values, [low_pct, high_pct])
    if not high > low:
        high = low + 1.0
    return window(a, float(low), float(high))


def to_uint8(img01: np.ndarray) -> np.ndarray:
    """[0, 1] floats -> 8-bit, rounding half up (explicit, so every platform agrees)."""
    out: np.ndarray = np.floor(np.clip(img01, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return out


# -- resampling --------------------------------------------------------------------------


def _keys_cubic(x: np.ndarray, a: float = -0.5) -> np.ndarray:
    x = np.abs(x)
    w = np.zeros_like(x)
    near = x <= 1
    far = (x > 1) & (x < 2)
    w[near] = (a + 2) * x[near] ** 3 - (a + 3) * x[near] ** 2 + 1
    w[far] = a * x[far] ** 3 - 5 * a * x[far] ** 2 + 8 * a * x[far] - 4 * a
    return w


def _resample_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) weights of a cubic kernel, widened when shrinking (anti-aliasing)."""
    scale = n_in / n_out
    stretch = max(scale, 1.0)
    support = 2.0 * stretch
    centers = (np.arange(n_out) + 0.5) * scale - 0.5
    offsets = np.arange(-int(np.ceil(support)) - 1, int(np.ceil(support)) + 2)
    js = np.floor(centers)[:, None].astype(np.int64) + offsets[None, :]  # (n_out, taps)
    w = _keys_cubic((js - centers[:, None]) / stretch)
    w /= w.sum(axis=1, keepdims=True)
    m = np.zeros((n_out, n_in), dtype=np.float64)
    rows = np.repeat(np.arange(n_out), js.shape[1])
    np.add.at(m, (rows, np.clip(js, 0, n_in - 1).ravel()), w.ravel())  # edge pixels repeat
    return m


def resize(img: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Resample a 2-D (or H x W x C) float image to `shape` (rows, cols), values clipped to [0, 1]."""
    rows, cols = shape
    if rows < 1 or cols < 1:
        raise ValueError(f"resize: target shape {shape} must be positive")
    a = np.asarray(img, dtype=np.float64)
    if a.shape[:2] == (rows, cols):
        return a.copy()
    mr = _resample_matrix(a.shape[0], rows)
    mc = _resample_matrix(a.shape[1], cols)
    if a.ndim == 2:
        out = mr @ a @ mc.T
    else:
        out = np.stack([mr @ a[..., c] @ mc.T for c in range(a.shape[2])], axis=-1)
    clipped: np.ndarray = np.clip(out, 0.0, 1.0)
    return clipped


def fit_shape(height: float, width: float, long_side: int) -> tuple[int, int]:
    """(rows, cols) with the longer side equal to `long_side`, keeping the aspect ratio.

    `height` and `width` are physical extents (pixels times spacing), so anisotropic
    pixels come out square.
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"fit_shape: extents must be positive, got {height} x {width}")
    scale = long_side / max(height, width)
    return max(1, int(round(height * scale))), max(1, int(round(width * scale)))


# -- PNG ---------------------------------------------------------------------------------


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def _filter_rows(rows: np.ndarray, bpp: int) -> bytes:
    """Apply the PNG filter (0-4) that minimises each row's sum of absolute residuals."""
    x = rows.astype(np.int16)
    left = np.zeros_like(x)
    left[:, bpp:] = x[:, :-bpp]
    up = np.zeros_like(x)
    up[1:] = x[:-1]
    upleft = np.zeros_like(x)
    upleft[1:, bpp:] = x[:-1, :-bpp]
    p = left + up - upleft
    pa, pb, pc = np.abs(p - left), np.abs(p - up), np.abs(p - upleft)
    paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upleft))
    candidates = np.stack([x, x - left, x - up, x - (left + up) // 2, x - paeth]) % 256
    signed = np.where(candidates > 127, 256 - candidates, candidates)
    best = np.argmin(signed.sum(axis=2), axis=0)  # first minimum wins: deterministic
    chosen = candidates[best, np.arange(x.shape[0])].astype(np.uint8)
    out = np.concatenate([best.astype(np.uint8)[:, None], chosen], axis=1)
    return out.tobytes()


def encode_png(img: np.ndarray) -> bytes:
    """Encode an 8-bit grayscale (H x W) or RGB (H x W x 3) array as PNG bytes.

    Only IHDR, IDAT and IEND are written: no text, time, gamma or colour-profile chunk,
    so nothing but pixels leaves the build.
    """
    a = np.asarray(img)
    if a.dtype != np.uint8:
        raise TypeError(f"encode_png: expected uint8 pixels, got {a.dtype}")
    if a.ndim == 2:
        color_type, channels = 0, 1
    elif a.ndim == 3 and a.shape[2] == 3:
        color_type, channels = 2, 3
    else:
        raise ValueError(f"encode_png: expected H x W or H x W x 3, got shape {a.shape}")
    height, width = a.shape[:2]
    ihdr = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    raw = _filter_rows(a.reshape(height, width * channels), channels)
    return PNG_SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw, ZLIB_LEVEL)) + _chunk(b"IEND", b"")


def write_png(path: str | Path, img: np.ndarray) -> int:
    """Write `img` (uint8) as a PNG file; returns the number of bytes written."""
    data = encode_png(img)
    Path(path).write_bytes(data)
    return len(data)


def png_chunk_types(data: bytes) -> list[str]:
    """The chunk types of a PNG file in order (for checking that no metadata chunk exists)."""
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG file (bad signature)")
    kinds, pos = [], len(PNG_SIGNATURE)
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kinds.append(data[pos + 4 : pos + 8].decode("latin-1"))
        pos += 12 + length
    return kinds
