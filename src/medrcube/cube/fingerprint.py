"""The content fingerprint of a cube: one sha256 over its items and its image bytes.

Each item contributes its canonical record (Item.to_dict) with the image key replaced by
the sha256 of the image bytes, items sorted by id. So the fingerprint does not depend on
the format (directory, JSON Lines, Hugging Face dataset), on where the cube lies, on file
order or on image file names; and any change of an item's field, of its option order or
of one image byte changes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

from medrcube.cube.item import Item

# Bump when the canonical record changes meaning, so old caches cannot match new cubes.
FINGERPRINT_VERSION = "medrcube-cube-fingerprint-v1"


def canonical_record(item: Item, digests: Mapping[str, str]) -> str:
    record = item.to_dict()
    record["image"] = None if item.image is None else digests[item.image]
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def cube_fingerprint(items: Iterable[Item], digests: Mapping[str, str]) -> str:
    h = hashlib.sha256(FINGERPRINT_VERSION.encode() + b"\n")
    for item in sorted(items, key=lambda i: i.id):
        h.update(canonical_record(item, digests).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
