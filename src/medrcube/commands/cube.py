"""`medrcube cube stats CUBE [--json] [--audit]` and `medrcube cube export CUBE OUT --format F`.

`stats` prints items per part, modality, task and cell, images shared across tasks
(chains), restricted, unavailable and skipped counts as aligned tables. `export` writes a
loaded cube as JSON Lines (with its images beside it), a save_to_disk dataset, or parquet.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import PurePosixPath

from medrcube.cube import Cube, CubeError, Item, item_strata, load_cube, write_jsonl
from medrcube.cube.audit import audit_items
from medrcube.cube.stats import cube_stats, format_stats


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    stats = sub.add_parser("stats", help="statistics of a cube as tables")
    stats.add_argument("cube", help="release-layout directory, .jsonl, parquet, save_to_disk directory or hf:NAME")
    stats.add_argument("--json", action="store_true", help="print JSON instead of tables")
    stats.add_argument("--strict", action="store_true", help="refuse a cube with any error")
    stats.add_argument("--audit", action="store_true", help="run the leakage audit and mark the cells it flags (see `medrcube validate --audit`)")
    export = sub.add_parser("export", help="write a cube as jsonl (+ images), a save_to_disk dataset, or parquet")
    export.add_argument("cube")
    export.add_argument("out", help="output directory (jsonl, hf) or .parquet file")
    export.add_argument("--format", choices=("jsonl", "hf", "parquet"), default="jsonl")


def run(args: argparse.Namespace) -> int:
    try:
        cube = load_cube(args.cube, strict=getattr(args, "strict", False))
    except CubeError as exc:
        sys.stderr.write(f"medrcube cube {args.action}: {exc}\n")
        return 1
    if args.action == "stats":
        s = cube_stats(cube)
        review = _review_line(args.cube)
        flags = audit_items(cube.items).flagged_cells() if getattr(args, "audit", False) else None
        strata = {a: v for a, v in item_strata(cube.items).items() if set(v) != {"unknown"}}
        if args.json:
            doc = {"source": cube.source, "fingerprint": cube.fingerprint, **s.to_dict()}
            if strata:
                doc["subgroup_images"] = strata
            if review is not None:
                doc["deid_review"] = review
            if flags is not None:
                doc["leak_flags"] = {"/".join(c): kinds for c, kinds in sorted(flags.items())}
            sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(format_stats(s, title=f"cube {cube.source} (fingerprint {cube.fingerprint[:16]})"))
            for a, values in strata.items():  # images per subgroup attribute value (cube/attributes.py)
                sys.stdout.write(f"images by {a}: " + ", ".join(f"{v} {n}" for v, n in sorted(values.items())) + "\n")
            if review is not None:
                sys.stdout.write(review + "\n")
            if flags is not None:
                lines = [f"  {'/'.join(c)}: {', '.join(kinds)}" for c, kinds in sorted(flags.items())]
                sys.stdout.write("\ncells flagged by the leakage audit" + (":\n" + "\n".join(lines) if lines else ": none") + "\n")
        return 0
    return _export(cube, args.out, args.format)


def _review_line(source: str) -> str | None:
    """A built cube's de-identification review, from the manifest beside it (None for any other cube)."""
    from pathlib import Path

    from medrcube.construction.privacy.reviewsheet import review_line

    p = Path(source)
    return review_line(p) if p.is_dir() else None


def _safe_key(key: str) -> bool:
    p = PurePosixPath(key)
    return bool(key) and not p.is_absolute() and ".." not in p.parts and "\\" not in key and ":" not in key


def _export(cube: Cube, out: str, fmt: str) -> int:
    if fmt == "parquet":
        from medrcube.cube.hf import to_hf_dataset

        to_hf_dataset(cube).to_parquet(out)
    elif fmt == "hf":
        from medrcube.cube.hf import to_hf_dataset

        to_hf_dataset(cube).save_to_disk(out)
    else:
        os.makedirs(out, exist_ok=True)
        items: list[Item] = []
        written: set[str] = set()
        for item in cube.items:
            key = item.image
            if key is not None:
                # Keys from a dataset table are names, not paths: a key that is not a safe
                # relative path is replaced by one made of the image digest.
                target = key if _safe_key(key) and "." in PurePosixPath(key).name else f"images/{cube.digests[key]}.img"
                if target not in written:
                    path = os.path.join(out, *target.split("/"))
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    with open(path, "wb") as f:
                        f.write(cube.read_image(key))
                    written.add(target)
                if target != key:
                    item = Item(**{**item.to_dict(), "options": item.options, "image": target})
            items.append(item)
        write_jsonl(items, os.path.join(out, "cube.jsonl"))
        out = os.path.join(out, "cube.jsonl")
    sys.stdout.write(f"wrote {len(cube)} items to {out}\n")
    return 0
