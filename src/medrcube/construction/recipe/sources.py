"""The `sources` entries of a recipe: each source's kind, path and documented values, and
its labels CSV (whose columns are checked against the file's header).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medrcube.construction.recipe.node import Node
from medrcube.construction.recipe.spec import (
    LABEL_FIELDS,
    NAME_RE,
    PACKAGE_BUILDERS,
    PLANES,
    SITE_RE,
    SOURCE_KINDS,
    LabelsFile,
    RecipeError,
    SourceSpec,
)
from medrcube.taxonomy import did_you_mean

_SOURCE_KEYS: dict[str, tuple[str, ...]] = {
    "dicom-folder": ("kind", "dataset", "path", "modality", "part", "organ", "labels", "slices", "site"),
    "nifti-folder": ("kind", "dataset", "path", "modality", "part", "organ", "labels", "slices", "planes", "site"),
    "images-csv": ("kind", "dataset", "path", "modality", "part", "organ", "labels", "site"),
    "package-images": ("kind", "dataset", "builder"),
}


def read_source(raw: Any, i: int, base: Path, src: str, name: str) -> SourceSpec:
    n = Node(raw, f"sources[{i}]", src)
    kind = n.string("kind", required=True, choices=SOURCE_KINDS, fix=f"say which kind of source: {', '.join(SOURCE_KINDS)}")
    assert kind is not None
    dataset = n.string("dataset", default=f"{name}-{i + 1}", pattern=NAME_RE) or f"{name}-{i + 1}"
    if kind == "package-images":
        builder = n.string("builder", required=True, choices=PACKAGE_BUILDERS, fix=f"name the builder: {', '.join(PACKAGE_BUILDERS)}")
        n.done(_SOURCE_KEYS[kind])
        return SourceSpec(kind=kind, dataset=dataset, builder=builder)
    path = n.path("path", base, required=True, must_exist="dir")
    from medrcube.taxonomy import MODALITIES

    modality = n.string("modality")
    if modality is not None:
        from medrcube.taxonomy import canonical_modality

        c = canonical_modality(modality)
        if not c.known:
            raise n.fail("modality", modality, f"is not a known modality{did_you_mean(modality, MODALITIES)}", f"use one of {', '.join(MODALITIES)}")
        modality = c.value
    part = n.string("part")
    if part is not None:
        from medrcube.taxonomy import canonical_part

        part = canonical_part(part).value
    organ = n.string("organ")
    labels = read_labels(n.node("labels"), base, src, kind)
    if kind == "images-csv" and labels is None:
        raise RecipeError(f"{src}: key 'sources[{i}].labels' is missing; an images-csv source needs a labels CSV naming its images (file, key)")
    slices = n.integer("slices", default=1, minimum=1, maximum=64) or 1
    planes = n.str_list("planes", choices=PLANES) if kind == "nifti-folder" else None
    site = n.string("site", pattern=SITE_RE, fix="a short code of the site: letters, digits, _ or -, at most 16, "
                    "e.g. 'site: NORTH' (never a name that identifies a patient)")
    n.done(_SOURCE_KEYS[kind])
    return SourceSpec(
        kind=kind, dataset=dataset, path=path, modality=modality, part=part, organ=organ, labels=labels, slices=slices,
        planes=planes or PLANES, site=site,
    )  # fmt: skip


def read_labels(n: Node | None, base: Path, src: str, kind: str) -> LabelsFile | None:
    if n is None:
        return None
    file = n.path("file", base, required=True, must_exist="file")
    key = n.string("key", default="path") or "path"
    cols = n.str_map("columns")
    for semantic in cols:
        if semantic not in LABEL_FIELDS:
            raise n.fail("columns", semantic, f"maps an unknown label field{did_you_mean(semantic, LABEL_FIELDS)}", f"label fields: {', '.join(LABEL_FIELDS)}")
    private = n.str_list("private") or ()
    n.done(("file", "key", "columns", "private"))
    assert file is not None
    import csv

    with open(file, newline="", encoding="utf-8-sig") as f:
        header = next(csv.reader(f), [])
    for col in (key, *cols.values(), *private):
        if col not in header:
            raise RecipeError(f"{src}: key {n.where!r}: column {col!r} is not in {file} (columns: {', '.join(header)}){did_you_mean(col, header)}")
    clash = set(private) & ({key} | set(cols.values()))
    if clash:
        raise RecipeError(f"{src}: key {n.where + '.private'!r}: column {sorted(clash)[0]!r} is also read as a label; a private column is never read")
    return LabelsFile(file=file, key=key, columns={**cols, "path": key}, private=private)
