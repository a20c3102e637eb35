"""`load_cube(spec)`: one entry point for every cube source, dispatching on what `spec` is.

- `hf:NAME`                         a Hugging Face hub dataset (split `test`)
- `FILE.jsonl`                      JSON Lines of canonical records
- `FILE.parquet`, a glob of them    a dataset exported to parquet (release columns + image)
- a directory with `dataset_info.json` / `dataset_dict.json`   a `save_to_disk` dataset
- a directory with `*.parquet` files and no test.json          parquet files
- any other directory               the release layout (`<dataset>/test.json`)

Policy (all sources): a bad item is reported and skipped, the rest load; `strict=True`
raises CubeError on the first error; a cube with no loadable item is a CubeError.

Subgroup attributes (cube/attributes.py) are read last, the same way for every source:
from a record's own `attributes`, else through the cube's declared column mapping
(`attributes=`, else an `attributes.yaml` beside the cube).
"""

from __future__ import annotations

import glob
import os
from dataclasses import replace
from typing import Any

from medrcube.cube.images import DEFAULT_MAX_PIXELS
from medrcube.cube.item import Cube, CubeError

HF_PREFIX = "hf:"


def load_cube(spec: str | os.PathLike[str], *, strict: bool = False, max_pixels: int = DEFAULT_MAX_PIXELS,
              attributes: Any = None) -> Cube:
    """Load and validate a cube (see the module docstring for the accepted specs);
    `attributes`: an AttributeMapping, the path of one, or None (an `attributes.yaml`
    beside the cube, if any)."""
    from medrcube.cube import attributes as attrs

    cube = _load(spec, strict=strict, max_pixels=max_pixels)
    mapping = attributes
    try:
        if mapping is None:
            found = attrs.sidecar(os.fspath(spec))
            mapping = attrs.load_mapping(found) if found else None
        elif not isinstance(mapping, attrs.AttributeMapping):
            mapping = attrs.load_mapping(mapping)
    except attrs.AttributeMappingError as exc:
        raise CubeError(str(exc)) from None
    if mapping is None and not any("attributes" in it.meta for it in cube.items):
        return cube
    items, problems = attrs.attach(cube.items, mapping, cube.source)
    from medrcube.cube.fingerprint import cube_fingerprint

    return replace(cube, items=tuple(items), problems=(*cube.problems, *problems),
                   # as cube/assemble.py computes it: images by their content key, not their bytes' digest
                   fingerprint=cube_fingerprint(items, {k: c.key for k, c in cube.contents.items()}))


def _load(spec: str | os.PathLike[str], *, strict: bool, max_pixels: int) -> Cube:
    text = os.fspath(spec)
    if isinstance(text, str) and text.startswith(HF_PREFIX):
        from medrcube.cube.hf import load_hub  # datasets is imported only when needed

        return load_hub(text[len(HF_PREFIX) :], strict=strict, max_pixels=max_pixels)
    if os.path.isdir(text):
        kind = _directory_kind(text)
        if kind == "release":
            from medrcube.cube.release import load_release

            return load_release(text, strict=strict, max_pixels=max_pixels)
        from medrcube.cube.hf import load_disk, load_parquet

        if kind == "disk":
            return load_disk(text, strict=strict, max_pixels=max_pixels)
        return load_parquet(sorted(glob.glob(os.path.join(glob.escape(text), "**", "*.parquet"), recursive=True)), source=text, strict=strict, max_pixels=max_pixels)
    if text.endswith(".jsonl") and os.path.isfile(text):
        from medrcube.cube.jsonl import load_jsonl

        return load_jsonl(text, strict=strict, max_pixels=max_pixels)
    if text.endswith(".parquet"):
        files = sorted(glob.glob(text)) if glob.has_magic(text) else [text] if os.path.isfile(text) else []
        if files:
            from medrcube.cube.hf import load_parquet

            return load_parquet(files, source=text, strict=strict, max_pixels=max_pixels)
    if os.path.basename(text) == "test.json":
        raise CubeError(f"{text}: a single test.json is one dataset of a cube; pass the cube root directory (the folder above <dataset>/test.json)")
    if os.path.exists(text):
        raise CubeError(
            f"{text}: not a cube source I know; expected a release-layout directory, a .jsonl file, "
            "parquet file(s), a save_to_disk directory, or hf:NAME"
        )
    raise CubeError(
        f"{text}: no such file or directory; expected a release-layout directory (<dataset>/test.json), "
        "a .jsonl file, parquet file(s), a save_to_disk directory, or hf:NAME"
    )


def _directory_kind(path: str) -> str:
    if os.path.isfile(os.path.join(path, "dataset_info.json")) or os.path.isfile(os.path.join(path, "dataset_dict.json")):
        return "disk"
    from medrcube.cube.release import find_release_files

    if find_release_files(path):
        return "release"
    if glob.glob(os.path.join(glob.escape(path), "**", "*.parquet"), recursive=True):
        return "parquet"
    return "release"  # load_release explains what is missing
