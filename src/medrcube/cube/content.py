"""Images identified by their decoded pixels: copies under other names are one image.

A cube may hold one picture under several file names, byte for byte or re-encoded (other
PNG settings, no metadata, another container). Counted by file name, such copies would
pass as independent evidence: more images under a check (feasibility's `min_images`),
more clusters in every interval, a new cube fingerprint. So an image's identity is its
*content key*: the SHA-256 of its decoded pixels in a canonical form (16-bit and float
images as decoded, images with transparency as RGBA, every other one as RGB, so a
greyscale PNG and its RGB copy are one image), with its size. Everything that counts or
groups images reads it: the cube fingerprint, the records' image (`Cube.image_of`: the
first key in sort order of the keys sharing the content), hence clustering, feasibility,
the sequential order and the leakage audit.

Decoding is the cost (the load itself only reads headers, cube/images.py): each distinct
byte digest is decoded once, and its content key is remembered in this user's
authenticated cache (cube/derived_cache.py) by that digest, which the bytes sent are
always verified against; a second load decodes nothing. Beside the key, a 64-bit
difference hash (9x8 greyscale) finds *near* duplicates (a crop, a rescale, a JPEG
re-compression) for the audit to flag: they are not merged, since they may be different
images.
"""

from __future__ import annotations

import hashlib
import io
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from medrcube.cube.item import Content

if TYPE_CHECKING:
    from medrcube.cube.derived_cache import Slot

KIND = "image-content"
VERSION = "medrcube-pixels-v1"
NEAR_BITS = 3  # a difference hash this close (of 64 bits) is a near duplicate


def decode_content(data: bytes) -> Content:
    """The content key and difference hash of one image's bytes."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        im.load()
        canon: Image.Image
        if im.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
            canon = im
        elif im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
            canon = im.convert("RGBA")
        else:
            canon = im.convert("RGB")
        h = hashlib.sha256(f"{VERSION}\x00{canon.mode}\x00{canon.size[0]}x{canon.size[1]}\x00".encode())
        h.update(canon.tobytes())
        grey: Image.Image
        if canon.mode in ("RGB", "RGBA"):
            grey = canon.convert("L")
        else:  # 16-bit or float: scaled to 8 bits over its own range
            import numpy as np

            a = np.asarray(canon, dtype=np.float64)
            lo, hi = float(a.min()), float(a.max())
            grey = Image.fromarray(((a - lo) * (255.0 / (hi - lo) if hi > lo else 0.0)).astype(np.uint8), mode="L")
        px = grey.resize((9, 8), Image.Resampling.BILINEAR).tobytes()
    bits = 0
    for row in range(8):
        for col in range(8):
            bits = (bits << 1) | (px[row * 9 + col] > px[row * 9 + col + 1])
    return Content(h.hexdigest(), bits)


def _decode_entry(value: object) -> dict[str, tuple[str, int]]:
    if not isinstance(value, dict):
        raise ValueError("malformed image-content entry")
    out: dict[str, tuple[str, int]] = {}
    for digest, pair in value.items():
        key, dh = pair
        if not isinstance(key, str) or len(key) != 64 or type(dh) is not int:
            raise ValueError("malformed image-content entry")
        out[str(digest)] = (key, dh)
    return out


def entry_slot(source: str) -> Slot | None:
    """The entry of the content keys of the cube at `source`, its real root for a directory
    cube (None when caching is off)."""
    import PIL

    from medrcube.cube.derived_cache import Slot, source_digest

    return Slot.open(KIND, {"source": source, "pillow": PIL.__version__, "code": source_digest([__file__])})


def contents(source: str, digests: Mapping[str, str], read: Callable[[str], bytes]) -> dict[str, Content]:
    """Image key -> its Content, each distinct byte digest decoded once (or taken from
    this user's cache, keyed by the digest). An image that cannot be decoded keeps a key
    made of its byte digest: it is still one image, and the run reports its read."""
    slot = entry_slot(source)
    hit = None if slot is None else slot.read(_decode_entry)
    known = {} if hit is None else hit[0]
    by_digest: dict[str, Content] = {}
    first_key: dict[str, str] = {}
    for k, d in sorted(digests.items()):
        first_key.setdefault(d, k)
    missing = [(d, k) for d, k in first_key.items() if d not in known]
    decoded = _decode_missing(missing, read)
    for d in first_key:  # the entry's order: the digests' first keys
        c = Content(*known[d]) if d in known else decoded[d]
        by_digest[d] = c if c is not None else Content(hashlib.sha256(f"{VERSION}\x00bytes\x00{d}".encode()).hexdigest(), 0)
    now = {d: [c.key, c.dhash] for d, c in by_digest.items()}
    if slot is not None and now != {d: list(v) for d, v in known.items()}:
        slot.write(now)
    return {k: by_digest[d] for k, d in digests.items()}


# The first load decodes here for this long; what is left then, if at this pace it would take
# this long again, goes to worker processes (cube/decode_workers.py) on the other cores: a
# small cube (the bundled one, 330 images: 0.5 s) never pays their start-up (about 0.15 s of
# CPU each), the paper-scale one (12 s on one core) is shared out.
DECODE_HERE_S = 1.0
WORKERS_FOR_S = 0.5


def _decode_missing(missing: list[tuple[str, str]], read: Callable[[str], bytes]) -> dict[str, Content | None]:
    """(digest, key) -> the Content of its image, None where it cannot be read or decoded (a
    broken image is reported where it is read; here it is keyed by its bytes)."""
    import time

    from medrcube.cube import decode_workers

    out: dict[str, Content | None] = {}
    start = time.monotonic()
    for n, (d, k) in enumerate(missing):
        spent = time.monotonic() - start
        if (spent >= DECODE_HERE_S and spent / max(n, 1) * (len(missing) - n) >= WORKERS_FOR_S
                and (workers := min(decode_workers.MAX_WORKERS, decode_workers.cores())) >= 2):
            out.update(decode_workers.decode_all(missing[n:], read, decode_content, workers))
            break
        try:
            out[d] = decode_content(read(k))
        except Exception:  # noqa: BLE001 - keyed by its bytes (above)
            out[d] = None
    return out


def canonical_keys(content: Mapping[str, Content]) -> dict[str, str]:
    """Image key -> the first key (in sort order) of the keys whose pixels are the same."""
    first: dict[str, str] = {}
    for k in sorted(content):
        first.setdefault(content[k].key, k)
    return {k: first[c.key] for k, c in content.items()}


def near_duplicates(content: Mapping[str, Content], bits: int = NEAR_BITS) -> list[tuple[str, str, int]]:
    """Pairs of images with different pixels whose difference hashes are at most `bits`
    apart: (key, key, distance), each pair once by its canonical keys. Four 16-bit bands:
    two hashes within 3 bits agree on at least one band, so only those are compared."""
    canon = canonical_keys(content)
    # a nearly flat image has a nearly empty difference hash: no evidence of likeness
    hashes = {canon[k]: c.dhash for k, c in content.items() if 4 <= c.dhash.bit_count() <= 60}
    bands: dict[tuple[int, int], list[str]] = defaultdict(list)
    for k, h in sorted(hashes.items()):
        for band in range(4):
            bands[(band, (h >> (16 * band)) & 0xFFFF)].append(k)
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, str, int]] = []
    for keys in bands.values():
        if len(keys) < 2 or len(keys) > 200:  # a band shared by hundreds is a flat image: no evidence
            continue
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                d = bin(hashes[a] ^ hashes[b]).count("1")
                if d <= bits and (a, b) not in seen:
                    seen.add((a, b))
                    out.append((a, b, d))
    return sorted(out)
