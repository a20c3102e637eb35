"""Label files and plain images: a labels CSV (path, diagnosis, severity, boxes, masks...) and
the PNG/JPEG images it names.

`LabelTable` reads a recipe's labels CSV once: rows keyed by the image (or DICOM file or
folder) they describe, the semantic columns the recipe maps, and the private columns,
whose values are never read into an item but are searched for in the export.
`read_images_csv` turns an images-csv source into `SourceImage`s.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

from medrcube.construction import imageio
from medrcube.construction.observation import ROI, Hint, SourceImage, documented
from medrcube.construction.privacy import coarse
from medrcube.construction.privacy.safeguards import Manifest, screen_flag
from medrcube.construction.recipe import LabelsFile, PrivacySpec, SourceSpec

HINT_FIELDS = ("modality", "part", "organ", "view", "protocol")
LABEL_FIELDS = ("diagnosis", "abnormality", "severity")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


class SourceDataError(ValueError):
    """A source's files or labels cannot be read; the message names the file, the row and the fix."""


@dataclass
class SourceLog:
    """Problems met while reading sources: counted by reason for the report (no file names),
    and listed with file names for the local console only."""

    counts: Counter[str] = field(default_factory=Counter)
    messages: list[str] = field(default_factory=list)

    def note(self, reason: str, detail: str) -> None:
        self.counts[reason] += 1
        self.messages.append(f"{detail}: {reason}")


def _norm_key(text: str) -> str:
    p = PurePosixPath(str(text).strip().replace("\\", "/"))
    return p.as_posix().lstrip("./") if str(p) != "." else ""


@dataclass
class Row:
    number: int  # 1-based data row of the CSV (header is row 0)
    values: dict[str, str]


class LabelTable:
    """A labels CSV: rows by key (path relative to the source folder)."""

    def __init__(self, spec: LabelsFile, leaks: dict[str, str], manifest: Manifest):
        self.spec = spec
        self.rows: dict[str, list[Row]] = {}
        with open(spec.file, newline="", encoding="utf-8-sig") as f:
            for i, raw in enumerate(csv.DictReader(f), start=1):
                values = {k: (v or "").strip() for k, v in raw.items() if k is not None}
                for col in spec.private:
                    v = values.pop(col, "")
                    if len(v) >= 4:
                        leaks.setdefault(v, f"labels CSV private column {col!r}")
                    manifest.private_columns[col] += 1
                key = _norm_key(values.get(spec.key, ""))
                if not key:
                    raise SourceDataError(f"{spec.file}: row {i} has an empty {spec.key!r} column; every row must name its image")
                self.rows.setdefault(key, []).append(Row(i, values))

    def value(self, row: Row, semantic: str) -> str:
        col = self.spec.columns.get(semantic)
        return row.values.get(col, "").strip() if col else ""

    def find(self, rel: str) -> list[Row]:
        """The rows for a file: its own path, else the nearest parent folder listed."""
        key = _norm_key(rel)
        while True:
            if key in self.rows:
                return self.rows[key]
            if "/" not in key:
                return self.rows.get("", [])
            key = key.rsplit("/", 1)[0]

    def hints(self, rows: list[Row], log: SourceLog, where: str) -> tuple[dict[str, Hint], dict[str, Hint]]:
        """(hints, labels) of an image from its rows; rows that disagree on a value drop it."""
        hints: dict[str, Hint] = {}
        labels: dict[str, Hint] = {}
        for semantic in (*HINT_FIELDS, *LABEL_FIELDS):
            col = self.spec.columns.get(semantic)
            if not col:
                continue
            values = {self.value(r, semantic) for r in rows} - {""}
            if len(values) > 1:
                log.note(f"rows disagree on {semantic!r}", where)
                continue
            if values:
                v = values.pop()
                target = labels if semantic in LABEL_FIELDS else hints
                target[semantic] = Hint(v, f"labels CSV column {col!r} = {v!r}", "labels CSV")
        return hints, labels


def parse_boxes(text: str) -> list[tuple[int, int, int, int]]:
    """'x0 y0 x1 y1' (spaces or commas; several boxes separated by ';') -> boxes, end-exclusive."""
    out = []
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        nums = [float(v) for v in part.replace(",", " ").split()]
        if len(nums) != 4:
            raise ValueError(f"box {part!r} has {len(nums)} numbers; expected 'x0 y0 x1 y1'")
        x0, y0, x1, y1 = nums
        if not (x0 < x1 and y0 < y1):
            raise ValueError(f"box {part!r} is empty; expected x0 < x1 and y0 < y1")
        out.append((int(np.floor(x0)), int(np.floor(y0)), int(np.ceil(x1)), int(np.ceil(y1))))
    return out


def rois_of(table: LabelTable, rows: list[Row], folder: Path, shape: tuple[int, int], log: SourceLog, where: str,
            offset: tuple[int, int] = (0, 0)) -> list[ROI]:  # fmt: skip
    """Boxes and masks of an image's rows, shifted by `offset` (x, y) when the image was cropped."""
    rois: list[ROI] = []
    dx, dy = offset
    for r in rows:
        box_text, mask_path = table.value(r, "box"), table.value(r, "mask")
        if box_text:
            try:
                boxes = parse_boxes(box_text)
            except ValueError as exc:
                log.note("malformed box", f"{where} (labels row {r.number}): {exc}")
                boxes = []
            label = table.value(r, "box_label") or None
            rois += [ROI((x0 - dx, y0 - dy, x1 - dx, y1 - dy), label, source="box") for x0, y0, x1, y1 in boxes]
        if mask_path:
            p = (folder / mask_path).resolve()
            if not p.is_relative_to(folder.resolve()) or not p.is_file():
                log.note("mask file missing or outside the source folder", f"{where} (labels row {r.number}): {mask_path}")
                continue
            from PIL import Image

            with Image.open(p) as im:
                m = np.asarray(im.convert("L")) > 0
            if dx or dy:
                m = m[dy : dy + shape[0], dx : dx + shape[1]]
            if m.shape != tuple(shape):
                log.note("mask size differs from the image", f"{where} (labels row {r.number})")
                continue
            ys, xs = np.nonzero(m)
            if len(ys) == 0:
                log.note("empty mask", f"{where} (labels row {r.number})")
                continue
            box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
            rois.append(ROI(box, table.value(r, "mask_label") or None, mask=m, source="mask"))
    return rois


def load_plain_image(path: Path) -> np.ndarray:
    """A PNG/JPEG as [0, 1] floats: H x W for gray, H x W x 3 for colour (EXIF orientation applied).

    Nothing of the file but its pixels is kept: text chunks and EXIF are dropped here and
    the export re-encodes the pixels.
    """
    from PIL import Image, ImageOps

    with Image.open(path) as opened:
        im = ImageOps.exif_transpose(opened)
        if im.mode in ("I;16", "I;16B", "I;16L", "I"):
            arr = np.asarray(im, dtype=np.float64)
            return imageio.percentile_window(arr, 0.5, 99.5)
        if im.mode in ("L", "1", "LA"):
            return np.asarray(im.convert("L"), dtype=np.float64) / 255.0
        rgb = np.asarray(im.convert("RGB"), dtype=np.float64) / 255.0
    if np.array_equal(rgb[..., 0], rgb[..., 1]) and np.array_equal(rgb[..., 1], rgb[..., 2]):
        return rgb[..., 0].copy()  # a gray image stored as RGB
    return rgb


def read_images_csv(spec: SourceSpec, privacy: PrivacySpec, manifest: Manifest, leaks: dict[str, str], log: SourceLog) -> Iterator[SourceImage]:
    """The images of an images-csv source, in the CSV's key order (sorted), de-identified."""
    assert spec.path is not None and spec.labels is not None
    folder = spec.path.resolve()
    table = LabelTable(spec.labels, leaks, manifest)
    for n, key in enumerate(sorted(k for k in table.rows if k)):
        rows = table.rows[key]
        where = f"{spec.labels.file} row {rows[0].number} ({key})"
        path = (folder / key).resolve()
        if not path.is_relative_to(folder):
            log.note("image path leaves the source folder", where)
            continue
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            log.note("not a PNG or JPEG file", where)
            continue
        if not path.is_file():
            log.note("image file missing", where)
            continue
        try:
            pixels = load_plain_image(path)
        except Exception as exc:  # noqa: BLE001 - PIL raises many types for a bad file
            log.note("unreadable image", f"{where}: {type(exc).__name__}: {exc}")
            continue
        flags = {table.value(r, "burned_in") for r in rows} - {""}
        screen = screen_flag("yes" if any(f.lower() in {"yes", "y", "true", "1"} for f in flags) else None, pixels.shape[:2], privacy)
        manifest.add_pixels(screen)
        if screen.action == "refuse":
            log.note(f"refused: {screen.reason}", where)
            continue
        pixels = screen.apply(pixels)
        hints, labels = table.hints(rows, log, where)
        for name, value in (("modality", spec.modality), ("part", spec.part), ("organ", spec.organ)):
            d = documented(value, name)
            if d is not None and name not in hints:
                hints[name] = d
        processing = [f"{'gray' if pixels.ndim == 2 else 'colour'} {pixels.shape[1]}x{pixels.shape[0]} from a {path.suffix.lower()[1:].upper()} file"]
        if screen.action == "mask":
            processing.append(f"masked {len(screen.boxes)} region(s): {screen.reason}")
        attributes = sidecar_attributes(path, spec, log)
        yield SourceImage(
            dataset=spec.dataset, ref=f"image {n + 1} (labels row {rows[0].number})", pixels=pixels, origin="image",
            hints=hints, labels=labels, rois=rois_of(table, rows, folder, pixels.shape[:2], log, where),
            processing=processing, attributes=attributes,
        )  # fmt: skip


def sidecar_attributes(path: Path, spec: SourceSpec, log: SourceLog) -> dict[str, str]:
    """The kept subgroup attributes of an image or volume from its JSON sidecar, if any
    (privacy/coarse.py); an unreadable sidecar is noted on the log and the source's own
    attributes stand. None kept by the recipe: {}."""
    if spec.attributes is None:
        return {}
    try:
        return coarse.from_sidecar(path, spec.attributes, spec.site)
    except ValueError as exc:
        log.note("unreadable attributes sidecar", str(exc))
        return coarse.from_source(spec.attributes, spec.site)
