"""Statistics of a loaded cube: a pure function of its items, image digests and problems,
and a plain-text rendering as aligned tables (`medrcube cube stats`).

Images are counted by content (digest), so an image stored once per row (a Hugging Face
table) and an image file shared by several records (the release layout) count alike. A
chain is an image carrying both a high-level item and a lower-level one: the pairs the
credibility analysis needs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrcube import taxonomy
from medrcube.cube.item import Cube, Item, Problem


@dataclass(frozen=True)
class CubeStats:
    n_items: int
    n_datasets: int
    by_part: dict[str, int]
    by_modality: dict[str, int]
    by_task: dict[str, int]
    by_cell: dict[tuple[str, str, str], int]  # (part, modality, task) -> items
    n_images: int  # distinct available images
    n_shared_images: int  # images with items of more than one task
    n_chain_images: int  # images with a high-level and a low/mid-level item
    n_chain_pairs: int  # (high, low/mid) item pairs on the same image
    n_restricted: int
    n_unavailable: int  # items without an image (asked in the blind variant only)
    skipped: dict[str, int] = field(default_factory=dict)  # error problems by reason
    n_skipped_items: int = 0
    warnings: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_items": self.n_items,
            "n_datasets": self.n_datasets,
            "by_part": self.by_part,
            "by_modality": self.by_modality,
            "by_task": self.by_task,
            "by_cell": [{"part": p, "modality": m, "task": t, "n": n} for (p, m, t), n in self.by_cell.items()],
            "n_cells": len(self.by_cell),
            "images": {
                "distinct": self.n_images,
                "shared_across_tasks": self.n_shared_images,
                "chains": self.n_chain_images,
                "chain_pairs": self.n_chain_pairs,
            },
            "restricted": self.n_restricted,
            "unavailable": self.n_unavailable,
            "skipped": {"items": self.n_skipped_items, "by_reason": self.skipped},
            "warnings": self.warnings,
        }


def _ordered(counter: Counter[str], canonical: Sequence[str]) -> dict[str, int]:
    """Canonical names in taxonomy order first, then the others alphabetically."""
    known = [k for k in canonical if k in counter]
    rest = sorted(k for k in counter if k not in canonical)
    return {k: counter[k] for k in known + rest}


def _rank(value: str, canonical: Sequence[str]) -> tuple[int, str]:
    return (canonical.index(value), "") if value in canonical else (len(canonical), value)


def compute_stats(items: Sequence[Item], digests: Mapping[str, str], problems: Iterable[Problem] = ()) -> CubeStats:
    """The statistics of `items` (pure: no I/O)."""
    cells = Counter(i.cell for i in items)
    by_cell = {
        c: cells[c]
        for c in sorted(cells, key=lambda c: (_rank(c[0], taxonomy.PARTS), _rank(c[1], taxonomy.MODALITIES), _rank(c[2], taxonomy.TASK_NAMES)))
    }
    per_image: dict[str, list[Item]] = defaultdict(list)
    for i in items:
        if i.image is not None:
            per_image[digests.get(i.image, i.image)].append(i)
    shared = chains = pairs = 0
    for group in per_image.values():
        if len({i.task for i in group}) > 1:
            shared += 1
        high = sum(1 for i in group if taxonomy.is_high_level(i.task))
        low = sum(1 for i in group if taxonomy.task_level(i.task) in (taxonomy.Level.LOW, taxonomy.Level.MID))
        if high and low:
            chains += 1
            pairs += high * low
    problems = list(problems)
    errors = [p for p in problems if p.severity == "error"]
    return CubeStats(
        n_items=len(items),
        n_datasets=len({i.dataset for i in items}),
        by_part=_ordered(Counter(i.part for i in items), taxonomy.PARTS),
        by_modality=_ordered(Counter(i.modality for i in items), taxonomy.MODALITIES),
        by_task=_ordered(Counter(i.task for i in items), taxonomy.TASK_NAMES),
        by_cell=by_cell,
        n_images=len(per_image),
        n_shared_images=shared,
        n_chain_images=chains,
        n_chain_pairs=pairs,
        n_restricted=sum(1 for i in items if i.restricted),
        n_unavailable=sum(1 for i in items if i.image is None),
        skipped=dict(sorted(Counter(p.reason for p in errors).items())),
        n_skipped_items=len({(p.source, p.item_id) for p in errors if p.item_id is not None}),
        warnings=dict(sorted(Counter(p.reason for p in problems if p.severity == "warning").items())),
    )


def cube_stats(cube: Cube) -> CubeStats:
    # images by content: copies under other names (or re-encoded) are one image
    return compute_stats(cube.items, {k: c.key for k, c in cube.contents.items()} or cube.digests, cube.problems)


# ---------------------------------------------------------------------------------------
# Plain-text rendering


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, numeric_from: int = 1) -> str:
    """Columns padded to their widest cell; columns from `numeric_from` on right-aligned."""
    cells = [[str(h) for h in headers], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[j]) for r in cells) for j in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if j >= numeric_from else c.ljust(w) for j, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def _pct(n: int, total: int) -> str:
    return f"{100 * n / total:.1f}%" if total else "-"


def format_stats(s: CubeStats, *, title: str = "") -> str:
    """The statistics as readable aligned tables."""
    out: list[str] = []
    if title:
        out += [title, "=" * len(title), ""]
    out.append(
        f"{s.n_items} items from {s.n_datasets} datasets in {len(s.by_cell)} cells; "
        f"{s.n_images} distinct images; {s.n_restricted} restricted, {s.n_unavailable} without image; "
        f"{s.n_skipped_items} skipped"
    )
    for name, counts in (("part", s.by_part), ("modality", s.by_modality), ("task", s.by_task)):
        rows = []
        for k, n in counts.items():
            label = k
            if name == "task":
                level = taxonomy.task_level(k)
                label = f"{k} ({taxonomy.task_abbrev(k)}, {level.name.lower()})" if level else f"{k} (not in taxonomy)"
            rows.append((label, n, _pct(n, s.n_items)))
        out += ["", render_table((name, "items", "share"), rows)]

    # Cells as a (part, modality) x task matrix: one row per slice, tasks as columns.
    tasks = list(s.by_task)
    pm: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for (p, m, t), n in s.by_cell.items():
        pm[(p, m)][t] = n
    matrix = [(p, m, *(row.get(t, ".") for t in tasks), sum(row.values())) for (p, m), row in pm.items()]
    heads = ("part", "modality", *(taxonomy.task_abbrev(t) for t in tasks), "total")
    out += ["", "items per cell (part x modality x task; '.' = empty)", render_table(heads, matrix, numeric_from=2)]

    out += [
        "",
        render_table(
            ("images", "count"),
            [
                ("distinct images", s.n_images),
                ("shared across tasks", s.n_shared_images),
                ("chains (high-level + low/mid-level item)", s.n_chain_images),
                ("chain pairs (high x low/mid items)", s.n_chain_pairs),
            ],
        ),
    ]
    out += [
        "",
        render_table(
            ("availability", "items"),
            [("restricted", s.n_restricted), ("image unavailable", s.n_unavailable), ("skipped (errors)", s.n_skipped_items)],
        ),
    ]
    if s.skipped:
        out += ["", render_table(("skipped: reason", "problems"), list(s.skipped.items()))]
    if s.warnings:
        out += ["", render_table(("warning: reason", "problems"), list(s.warnings.items()))]
    return "\n".join(out) + "\n"
