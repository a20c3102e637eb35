"""The content fingerprint of a cube: one sha256 over its items and its images' pixels.

Each item contributes its canonical record (Item.to_dict) with the image key replaced by
the image's content key (the sha256 of its decoded pixels, cube/content.py), items sorted
by id. So the fingerprint does not depend on the format (directory, JSON Lines, Hugging
Face dataset), on where the cube lies, on file order, on image file names or on how the
images are encoded (a re-encoded copy of a cube is the same cube); any change of an
item's field, of its option order or of one pixel changes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

from medrcube.cube.item import Item

# Bump when the canonical record changes meaning, so old caches cannot match new cubes.
FINGERPRINT_VERSION = "medrcube-cube-fingerprint-v2"


def canonical_record(item: Item, digests: Mapping[str, str]) -> str:
    """`digests`: image key -> the key that stands for its content (the content key)."""
    record = item.to_dict()
    record["image"] = None if item.image is None else digests[item.image]
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def cube_fingerprint(items: Iterable[Item], digests: Mapping[str, str]) -> str:
    h = hashlib.sha256(FINGERPRINT_VERSION.encode() + b"\n")
    for item in sorted(items, key=lambda i: i.id):
        h.update(canonical_record(item, digests).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
