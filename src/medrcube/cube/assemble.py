"""The loader-independent end of loading: duplicate ids, image outcomes -> Items -> Cube.

Every loader produces Drafts (records whose fields passed their checks) and, for each,
an ImageOutcome; the policy for what an outcome means lives here, once: a restricted item
whose image is absent is kept as unavailable (a warning), any other image problem skips
the item (an error).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from medrcube.cube.content import canonical_keys, contents
from medrcube.cube.fingerprint import cube_fingerprint
from medrcube.cube.item import Cube, CubeError, Item
from medrcube.cube.problems import Collector
from medrcube.cube.records import Draft


@dataclass(frozen=True, slots=True)
class ImageOutcome:
    """What became of a draft's image: a `key` when available; else `absent` (no image at
    all: fine for a restricted item) or an error `reason` with its `message`."""

    key: str | None = None
    absent: bool = False
    reason: str | None = None
    message: str = ""
    field: str = "image_path"


def drop_duplicate_ids(drafts: Sequence[Draft], col: Collector, where: Mapping[int, str] | None = None) -> list[Draft]:
    """Keep the first draft of each id; report each later one naming both places."""
    first: dict[str, Draft] = {}
    kept: list[Draft] = []
    for d in drafts:
        prev = first.get(d.id)
        if prev is None:
            first[d.id] = d
            kept.append(d)
            continue
        same = "the same file" if prev.source == d.source else prev.source
        col.error(
            d.source,
            d.id,
            "id",
            f"id {d.id!r} is already used in {same} (first occurrence kept, this one skipped); expected ids unique across the cube",
            "duplicate_id",
        )
    return kept


def build_items(drafts: Sequence[Draft], outcomes: Sequence[ImageOutcome], col: Collector) -> list[Item]:
    items: list[Item] = []
    for d, o in zip(drafts, outcomes, strict=True):
        if o.key is not None:
            items.append(Item(image=o.key, **d.fields))
        elif o.reason is None and o.absent and d.restricted:
            col.warn(d.source, d.id, o.field, f"restricted item without its image ({o.message}); kept as image unavailable", "image_unavailable")
            items.append(Item(image=None, **d.fields))
        elif o.reason is None:
            col.error(d.source, d.id, o.field, f"{o.message}; expected an image (only a restricted item may lack one)", "image_missing")
        else:
            col.error(d.source, d.id, o.field, o.message, o.reason)
    return items


def finish(
    items: list[Item],
    col: Collector,
    *,
    source: str,
    reader: Callable[[Mapping[str, str]], Callable[[str], bytes]],
    digests: Mapping[str, str],
    root: str | None,
) -> Cube:
    if not items:
        raise CubeError(col.problems, f"{source}: no loadable item ({col.n_errors} error(s)); a cube needs at least one valid item")
    used = {i.image for i in items if i.image is not None}
    digests = {k: v for k, v in digests.items() if k in used}
    read = reader(digests)  # only images of kept items are readable
    # images by their pixels: copies are one image. Remembered under the real path of the cube
    # (its folder or file) when it is on disk, so that another spelling of it (relative, through
    # a symlink) finds the same entry: that miss decoded every image again (11.6 s at paper scale).
    content = contents(os.path.realpath(source) if root is not None else source, digests, read)
    return Cube(
        items=tuple(items),
        source=source,
        fingerprint=cube_fingerprint(items, {k: c.key for k, c in content.items()}),
        read_image=read,
        digests=digests,
        problems=tuple(col.problems),
        root=root,
        contents=content,
        same_image=canonical_keys(content),
    )
