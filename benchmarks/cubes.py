"""The benchmark cubes: one full-size generated cube, cached, and JSON Lines subsets of it.

The full cube (`generate_release_cube` with the release's size: 7,626 items, 36
datasets, 3,000 512x512 images) is written once under benchmarks/out/cubes/, in a folder
named by the generator's parameters and a hash of the generator's source, so a changed
generator or parameter makes a new cube and an unchanged one is reused. A folder is
complete only when its stamp file exists (a killed generation is redone, not trusted).

Subsets (`subset`) are JSON Lines files written at the cube's root, so that their image
paths are the cube's own (relative to the file): the same image files, the same digests,
no copy. The items of a subset are a seeded sample kept in the cube's order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT

FULL: dict[str, Any] = {"n_items": 7626, "n_datasets": 36, "n_images": 3000, "image_size": 512, "seed": 0}
STAMP = "BENCH_COMPLETE.json"


def _generator_digest() -> str:
    import medrcube.testing.gencube as gencube

    return hashlib.sha256(Path(gencube.__file__).read_bytes()).hexdigest()[:10]


def cube_dir(params: dict[str, Any] | None = None) -> Path:
    p = {**FULL, **(params or {})}
    name = "cube-" + "-".join(f"{k}{v}" for k, v in sorted(p.items())) + "-g" + _generator_digest()
    return OUT / "cubes" / name


def full_cube(log=print, params: dict[str, Any] | None = None) -> Path:
    """The full-size cube's directory, generated on first use (then reused)."""
    from medrcube.testing.gencube import generate_release_cube

    p = {**FULL, **(params or {})}
    root = cube_dir(params)
    if (root / STAMP).is_file():
        return root
    if root.exists():
        shutil.rmtree(root)  # an interrupted generation
    # The same cube from an older generator is stale (and 350 MB at full size): drop it.
    stem = root.name.rsplit("-g", 1)[0]
    for old in root.parent.glob(stem + "-g*") if root.parent.is_dir() else ():
        if old != root:
            shutil.rmtree(old, ignore_errors=True)
    log(f"generating the benchmark cube {root.name} (once; cached under benchmarks/out/cubes/) ...")
    generate_release_cube(root, **p)
    (root / STAMP).write_text(json.dumps(p, indent=1) + "\n", encoding="utf-8")
    return root


def subset(root: Path, n: int, *, images_only: bool, seed: int = 1) -> Path:
    """A JSON Lines file at `root` holding `n` items of the cube there (see module docstring).

    `images_only`: draw from the items whose image is available (the throughput runs
    want every request to carry an image). `n` larger than the pool takes the pool."""
    name = f"subset-{n}{'-img' if images_only else ''}-s{seed}.jsonl"
    path = root / name
    if path.is_file():
        return path
    from medrcube.cube import load_cube, write_jsonl

    cube = load_cube(root)
    pool = [i for i, it in enumerate(cube.items) if it.image is not None or not images_only]
    chosen = sorted(random.Random(seed).sample(pool, min(n, len(pool))))
    tmp = path.with_suffix(".tmp")
    write_jsonl([cube.items[i] for i in chosen], tmp)
    tmp.replace(path)
    return path


def with_slow_marks(cube: Any, count: int, spread: int) -> tuple[Any, list[str]]:
    """`cube` with `count` items (spread evenly over the first `spread` ones) whose question
    ends in a unique mark ` [slow-K]`; the scripted server is told to delay exactly those.
    Returns (new cube, marks)."""
    items = list(cube.items)
    marks: list[str] = []
    step = max(1, spread // max(count, 1))
    for k in range(count):
        i = min(k * step, len(items) - 1)
        mark = f"[slow-{k}]"
        items[i] = dataclasses.replace(items[i], question=f"{items[i].question} {mark}")
        marks.append(mark)
    return dataclasses.replace(cube, items=tuple(items)), marks
