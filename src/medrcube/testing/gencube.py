"""A synthetic cube in the MedRCube release layout, for tests and benchmarks.

`generate_release_cube(root)` writes `<dataset>/test.json` folders with the release's
size (7,626 items, 36 datasets), its task mix (the counts of the paper's statistics
figure), its spelling (`Abnormity Diagnosis`, `X-ray`, `Lung`...), 2- to 4-option items,
correct_index as a letter in most datasets and a 0-based int in others, restricted
datasets whose images are absent, and image chains: every image carries one item, most
carry a high-level item plus low/mid-level ones on the same image.

Images are real PNGs. Encoding thousands of 512x512 PNGs is slow, so a few hundred base
images are encoded once and each written image is a base plus a `tEXt` chunk naming it:
every file is a valid PNG with distinct bytes (hence a distinct digest) at the cost of a
file write. Deterministic by `seed`.

The `malformed` helpers edit a generated cube in place to produce each validation case.
"""

from __future__ import annotations

import json
import math
import os
import random
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Items per task in the release (paper's statistics figure), keyed by the release spelling.
RELEASE_TASK_COUNTS: dict[str, int] = {
    "Disease Diagnosis": 2445,
    "Organ Recognition": 1067,
    "Modality Recognition": 1032,
    "ROI Grounding": 1000,
    "Imaging Protocol Recognition": 700,
    "Severity Grading": 568,
    "Abnormity Diagnosis": 514,
    "View Recognition": 300,
}
HIGH_LEVEL = {"Disease Diagnosis", "Severity Grading", "Abnormity Diagnosis"}

# (part, modality) of the dataset folders as the release spells them, with a weight
# (share of images) that reproduces the release's skew towards chest radiographs.
_CELLS: tuple[tuple[str, str, float], ...] = (
    ("Chest", "X-ray", 3.0),
    ("Lung", "CT", 1.6),
    ("Brain", "MRI", 1.3),
    ("Brain", "CT", 0.8),
    ("Breast", "Ultrasound", 1.0),
    ("Breast", "X-ray", 0.7),
    ("Breast", "MRI", 0.4),
    ("Heart", "Ultrasound", 0.7),
    ("Heart", "MRI", 0.4),
    ("Chest", "CT", 0.8),
    ("Lung", "X-ray", 0.6),
)
_MODALITY_WORDS = ("CT", "MRI", "X-ray", "Ultrasound")
_VIEWS: dict[str, tuple[str, ...]] = {
    "X-ray": ("PA", "AP", "lateral", "oblique"),
    "Ultrasound": ("apical four-chamber", "parasternal long axis", "subcostal", "transverse"),
}
_PLANES = ("axial", "sagittal", "coronal")
_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "MRI": ("T1-weighted", "T2-weighted", "FLAIR", "diffusion-weighted"),
    "CT": ("non-contrast", "contrast-enhanced arterial phase", "portal venous phase", "bone window"),
}
_ORGANS = ("brain", "lung", "heart", "breast", "liver", "kidney", "spine", "thyroid")
_REGIONS = ("upper left", "upper right", "lower left", "lower right")
_SEVERITY = ("none", "mild", "moderate", "severe")
_DISEASES = {
    "Chest": ("pneumonia", "pneumothorax", "cardiomegaly", "pleural effusion", "atelectasis", "no finding"),
    "Lung": ("lung nodule", "COVID-19 pneumonia", "emphysema", "interstitial lung disease", "normal lung"),
    "Brain": ("glioma", "meningioma", "pituitary tumour", "ischaemic stroke", "haemorrhage", "no tumour"),
    "Breast": ("benign mass", "malignant mass", "cyst", "calcification", "normal breast tissue"),
    "Heart": ("dilated cardiomyopathy", "hypertrophic cardiomyopathy", "myocardial infarction", "normal heart"),
}
_ORIGINAL_TASKS = ("classification", "detection", "segmentation", "grading")

DELETE = object()  # edit_record(...) value meaning "remove this key"


def _apportion(total: int, weights: Sequence[float]) -> list[int]:
    """Largest-remainder split of `total` in proportion to `weights` (sums exactly)."""
    s = sum(weights)
    raw = [total * w / s for w in weights]
    out = [math.floor(x) for x in raw]
    for i in sorted(range(len(raw)), key=lambda i: out[i] - raw[i])[: total - sum(out)]:
        out[i] += 1
    return out


@dataclass(frozen=True)
class _Base:
    """One base picture, ready to be written with a distinct first row (`_png_variant`)."""

    head: bytes  # PNG signature and IHDR chunk
    row0: bytes  # the first row's pixels
    rest: bytes  # the other rows, each with its filter byte (0)
    tail: bytes  # `rest` as raw deflate blocks, compressed once


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_variant(base: _Base, index: int) -> bytes:
    """`base` with its first pixels set from `index`: every file a picture of its own (its
    pixels differ, so medrcube counts it as a distinct image), written at the cost of a
    checksum: the first row goes in a stored deflate block, the rest is the base's."""
    mark = struct.pack(">I", index)[-len(base.row0):]  # an image narrower than 4 pixels keeps its width
    row0 = b"\x00" + mark + base.row0[len(mark):]
    stored = b"\x00" + struct.pack("<HH", len(row0), len(row0) ^ 0xFFFF) + row0
    adler = zlib.adler32(base.rest, zlib.adler32(row0))
    idat = b"\x78\x9c" + stored + base.tail + struct.pack(">I", adler)
    return base.head + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def _base_images(n: int, size: int, rng: np.random.Generator) -> list[_Base]:
    """`n` distinct grayscale pictures that look vaguely anatomical: blobs on a gradient."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / max(size - 1, 1)
    out = []
    for _ in range(n):
        img = 40 + 60 * (xx * rng.uniform(-1, 1) + yy * rng.uniform(-1, 1))
        for _ in range(int(rng.integers(2, 6))):
            cx, cy, r = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(0.05, 0.3)
            img += rng.uniform(40, 120) * np.exp(-(((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * r * r)))
        img += rng.normal(0, 2.0, img.shape)
        px = np.clip(img, 0, 255).astype(np.uint8)
        rows = np.concatenate([np.zeros((size, 1), np.uint8), px], axis=1)  # filter byte 0 per row
        rest = rows[1:].tobytes()
        comp = zlib.compressobj(6, zlib.DEFLATED, -15)
        head = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0))
        out.append(_Base(head, px[0].tobytes(), rest, comp.compress(rest) + comp.flush()))
    return out


def _question(task: str, part: str, modality: str, rng: random.Random) -> tuple[str, list[str], int]:
    """(question, options, answer index) for one synthetic item of `task`."""
    pool: tuple[str, ...]
    if task == "Modality Recognition":
        q, pool, answer = "Which imaging modality was used to acquire this image?", _MODALITY_WORDS, modality
    elif task == "View Recognition":
        pool = _VIEWS.get(modality, _PLANES)
        q, answer = "Which view or imaging plane does this image show?", rng.choice(pool)
    elif task == "Imaging Protocol Recognition":
        pool = _PROTOCOLS.get(modality, _PROTOCOLS["MRI"])
        q, answer = "Which imaging protocol or sequence produced this image?", rng.choice(pool)
    elif task == "Organ Recognition":
        organ = {"Chest": "lung", "Lung": "lung"}.get(part, part.lower())
        q, pool, answer = "Which organ is the main subject of this image?", _ORGANS, organ
    elif task == "ROI Grounding":
        q, pool, answer = "In which quadrant of the image is the lesion located?", _REGIONS, rng.choice(_REGIONS)
    elif task == "Abnormity Diagnosis":
        pool = ("normal", "abnormal")
        q, answer = "Is this image normal or abnormal?", rng.choice(pool)
    elif task == "Severity Grading":
        q, pool, answer = "How severe is the finding in this image?", _SEVERITY, rng.choice(_SEVERITY)
    else:  # Disease Diagnosis
        pool = _DISEASES[part]
        q, answer = "What is the most likely diagnosis?", rng.choice(pool)
    n = min(len(pool), rng.choice((2, 3, 4, 4, 4, 4)) if len(pool) > 2 else 2)
    options = [answer, *rng.sample([p for p in pool if p != answer], n - 1)]
    rng.shuffle(options)
    return q, options, options.index(answer)


def generate_release_cube(
    root: str | os.PathLike[str],
    *,
    n_items: int = 7626,
    n_datasets: int = 36,
    n_images: int = 3000,
    image_size: int = 512,
    seed: int = 0,
    restricted_fraction: float = 0.13,
    n_base_images: int = 256,
) -> Path:
    """Write a synthetic release-layout cube under `root` and return `root` as a Path.

    `n_images` image files are written (fewer if n_items is smaller). Datasets are named
    `DS01_<Part>_<Modality>`; a restricted dataset's test.json has `restricted: true` and
    image paths of its own, whose files are not written (as in the release): about
    `restricted_fraction` of the items.
    """
    if n_items < 1 or n_datasets < 1 or n_images < 1:
        raise ValueError("n_items, n_datasets and n_images must be positive")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    # Datasets: cycle through the cells so each gets at least one when n_datasets >= 11.
    cells = [_CELLS[i % len(_CELLS)] for i in range(n_datasets)]
    names = [f"DS{i + 1:02d}_{part}_{mod.replace('-', '')}" for i, (part, mod, _) in enumerate(cells)]
    weights = [w for _, _, w in cells]

    # Restricted datasets: a seeded choice whose weight share is close to the fraction.
    restricted: set[int] = set()
    target, share = restricted_fraction * sum(weights), 0.0
    for d in rng.sample(range(n_datasets), n_datasets):
        if len(restricted) < n_datasets - 1 and share + weights[d] / 2 <= target:
            restricted.add(d)
            share += weights[d]

    # `n_images` files are written for the open datasets; the restricted ones reference
    # their share of images on top, which stay absent (as in the release).
    open_ds = [d for d in range(n_datasets) if d not in restricted]
    n_images = min(n_images, n_items)
    n_closed = min(round(n_images * share / (sum(weights) - share)), n_items - n_images) if restricted else 0
    images_per_ds = [0] * n_datasets
    for group, n in ((open_ds, n_images), (sorted(restricted), n_closed)):
        if not group:
            continue
        for d, k in zip(group, _apportion(n, [weights[d] for d in group]), strict=True):
            images_per_ds[d] = k
    image_ds: list[int] = [d for d, k in enumerate(images_per_ds) for _ in range(k)]
    n_images = len(image_ds)
    int_index = {d for d in range(n_datasets) if d % 3 == 2}  # correct_index as 0-based int here

    # Tasks: the release mix scaled to n_items; every image gets one item first (a
    # high-level one while they last, so that extra low/mid items on it form chains).
    counts = _apportion(n_items, list(RELEASE_TASK_COUNTS.values()))
    tasks = [t for t, k in zip(RELEASE_TASK_COUNTS, counts, strict=True) for _ in range(k)]
    rng.shuffle(tasks)
    tasks.sort(key=lambda t: t not in HIGH_LEVEL)  # stable: high-level first, shuffled within
    first, rest = tasks[:n_images], tasks[n_images:]
    order = list(range(n_images))
    rng.shuffle(order)
    assignment: list[tuple[int, str]] = list(zip(order, first, strict=True))
    by_modality: dict[str, list[int]] = {}
    for img, d in enumerate(image_ds):
        by_modality.setdefault(cells[d][1], []).append(img)
    for t in rest:
        # Protocol questions make sense for MRI and CT only; pick an image of those.
        pool = (by_modality.get("MRI", []) + by_modality.get("CT", [])) if t == "Imaging Protocol Recognition" else None
        assignment.append((rng.choice(pool) if pool else rng.randrange(n_images), t))

    records: dict[int, list[dict[str, Any]]] = {d: [] for d in range(n_datasets)}
    for img, task in sorted(assignment, key=lambda a: (image_ds[a[0]], a[0])):
        d = image_ds[img]
        part, modality, _ = cells[d]
        q, options, answer = _question(task, part, modality, rng)
        rec: dict[str, Any] = {"id": f"{names[d]}-{len(records[d]):05d}", "dataset": names[d], "image_path": f"images/{img:05d}.png", "question": q}
        rec.update({f"option_{'ABCD'[i]}": o for i, o in enumerate(options)})
        rec.update(
            gt_answer=options[answer],
            correct_index=answer if d in int_index else "ABCD"[answer],
            task=task,
            modality=modality,
            parts=part,
            original_task=rng.choice(_ORIGINAL_TASKS),
            restricted=d in restricted,
        )
        records[d].append(rec)

    nprng = np.random.default_rng(seed)
    bases = _base_images(min(n_base_images, n_images), image_size, nprng)
    for d, recs in records.items():
        if not recs:
            continue
        folder = root / names[d]
        (folder / "images").mkdir(parents=True, exist_ok=True)
        (folder / "test.json").write_text(json.dumps(recs, indent=1, ensure_ascii=False), encoding="utf-8")
        if d in restricted:
            continue
        for img in sorted({int(r["image_path"][7:12]) for r in recs}):
            (folder / "images" / f"{img:05d}.png").write_bytes(_png_variant(bases[img % len(bases)], img))
    return root


# ---------------------------------------------------------------------------------------
# Malformed variants: each edits a generated cube in place and returns what it touched.


def release_files(root: str | os.PathLike[str]) -> list[Path]:
    return sorted(Path(root).glob("*/test.json"))


def find_record(root: str | os.PathLike[str], *, restricted: bool | None = False, task: str | None = None) -> tuple[Path, dict[str, Any]]:
    """The first record (in file order) matching the filters, with its test.json."""
    for f in release_files(root):
        for rec in json.loads(f.read_text(encoding="utf-8")):
            if (restricted is None or rec.get("restricted") == restricted) and (task is None or rec.get("task") == task):
                return f, rec
    raise LookupError("no matching record")


def edit_record(root: str | os.PathLike[str], item_id: str, **changes: Any) -> Path:
    """Set fields of record `item_id` (a value of DELETE removes the key); returns its file."""
    for f in release_files(root):
        recs = json.loads(f.read_text(encoding="utf-8"))
        for rec in recs:
            if rec.get("id") == item_id:
                for k, v in changes.items():
                    if v is DELETE:
                        rec.pop(k, None)
                    else:
                        rec[k] = v
                f.write_text(json.dumps(recs, indent=1, ensure_ascii=False), encoding="utf-8")
                return f
    raise LookupError(f"no record {item_id!r}")


def distinct_questions(root: str | os.PathLike[str]) -> None:
    """Make every question of the cube at `root` its own, by its item's id, so that every ask
    is its own request (the generator repeats questions on an image; tests that count
    requests, or tell by `cached` who asked what, need them apart)."""
    for f in release_files(root):
        recs = json.loads(f.read_text(encoding="utf-8"))
        for rec in recs:
            rec["question"] = f"{rec['question']} (case {rec['id']})"
        f.write_text(json.dumps(recs), encoding="utf-8")


def append_record(test_json: str | os.PathLike[str], record: dict[str, Any]) -> None:
    recs = json.loads(Path(test_json).read_text(encoding="utf-8"))
    recs.append(record)
    Path(test_json).write_text(json.dumps(recs, indent=1, ensure_ascii=False), encoding="utf-8")


def image_of(test_json: str | os.PathLike[str], record: dict[str, Any]) -> Path:
    image: str = record["image_path"]
    return Path(test_json).parent / image


def break_json(test_json: str | os.PathLike[str]) -> tuple[int, int]:
    """Corrupt a test.json (drop a comma in its third line); returns (line, column) of the break."""
    lines = Path(test_json).read_text(encoding="utf-8").split("\n")
    # Line 3 of the indent=1 dump is `  "id": "...",`: removing its comma breaks the next line.
    lines[2] = lines[2].rstrip(",")
    Path(test_json).write_text("\n".join(lines), encoding="utf-8")
    return 4, len(lines[3]) - len(lines[3].lstrip()) + 1


def write_not_image(path: str | os.PathLike[str], text: bytes = b"this is not an image\n") -> None:
    Path(path).write_bytes(text)


def write_bomb_png(path: str | os.PathLike[str], width: int = 100_000, height: int = 100_000) -> None:
    """A tiny PNG that *declares* width x height pixels: its header is a bomb, its body a
    few bytes. Written by hand so that nothing ever allocates the declared pixels."""
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1-bit grayscale

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    idat = zlib.compress(b"\x00" * 64)
    Path(path).write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
