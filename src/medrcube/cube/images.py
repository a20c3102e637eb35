"""Image checks that never decode pixels: digest + header from one read of the bytes.

Every image is read once at load. The same bytes feed the sha256 (the fingerprint and the
response store need it) and Pillow's header parser (format and declared size), so a
3,000-image cube costs one sequential read and no decoding.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass

# Raster formats a model adapter can send. Pillow opens more (EPS, PSD, ICO...), but a
# cube image in such a format is more likely a mistake than a choice, so it is refused.
ACCEPTED_FORMATS: tuple[str, ...] = ("PNG", "JPEG", "BMP", "TIFF", "GIF", "WEBP", "JPEG2000", "PPM")

# Pillow's own default limit (about 89 megapixels, a 9459 x 9459 image). A real
# radiograph or mammogram stays well below it; a file declaring more is a bomb.
DEFAULT_MAX_PIXELS: int = 89_478_485


@dataclass(frozen=True, slots=True)
class ImageCheck:
    """What one image's bytes turned out to be. `reason` is None for a good image."""

    digest: str
    format: str | None = None
    size: tuple[int, int] | None = None
    reason: str | None = None
    message: str = ""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_image_bytes(data: bytes, *, max_pixels: int = DEFAULT_MAX_PIXELS, digest: str | None = None) -> ImageCheck:
    """Hash `data` and parse its header (no pixel decoding).

    Pillow itself raises DecompressionBombError above twice its limit and warns above it;
    both are turned into the `decompression_bomb` reason, as is a declared size above
    `max_pixels`. Not thread-safe (warnings state is global): call it from one thread.
    """
    # Imported here, not with the module: a load whose image checks all come from the cache
    # (a user's later runs) decodes no header and does not need Pillow (docs/speed.md).
    from PIL import Image, UnidentifiedImageError

    digest = digest or sha256(data)
    if not data:
        return ImageCheck(digest, reason="not_an_image", message="the file is empty; expected a PNG or JPEG image")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=ACCEPTED_FORMATS) as im:
                fmt, size = im.format, im.size
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        said = str(exc).rstrip(".")
        return ImageCheck(digest, reason="decompression_bomb", message=f"Pillow refuses it as a decompression bomb ({said}); expected at most {max_pixels} pixels")
    except UnidentifiedImageError:
        head = data[:8]
        return ImageCheck(
            digest,
            reason="not_an_image",
            message=f"not an image (file starts with {head!r}); expected one of {', '.join(ACCEPTED_FORMATS)}",
        )
    except Exception as exc:  # noqa: BLE001 - a corrupt header raises anything from SyntaxError to struct.error
        return ImageCheck(digest, reason="not_an_image", message=f"corrupt image header ({type(exc).__name__}: {exc})")
    w, h = size
    if w <= 0 or h <= 0:
        return ImageCheck(digest, fmt, size, "not_an_image", f"declares an empty size {w}x{h}")
    if w * h > max_pixels:
        return ImageCheck(
            digest,
            fmt,
            size,
            "decompression_bomb",
            f"declares {w}x{h} = {w * h} pixels; expected at most {max_pixels} (a decompression bomb?)",
        )
    return ImageCheck(digest, fmt, size)
