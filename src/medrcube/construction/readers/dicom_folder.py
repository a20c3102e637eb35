"""A folder of DICOM files as a source: series grouped by SeriesInstanceUID, de-identified on read.

Two passes, so that a large archive is never held in memory. The first reads every
file's header: its identifying values are noted for the final leak scan, it is
de-identified (counted in the manifest), and it is placed in its series. The second
reads only the files whose slices are used, and de-identifies each again before
anything else looks at it: the rest of the pipeline sees the cleaned dataset, its
allow-listed technical attributes and its pixels. The UIDs that group files into series
are used in memory only; a series is named by its position in the folder ("series 3").

From each series the recipe's number of slices is taken, evenly spaced around the
middle (frames of a multi-frame file count as slices). Pixels get the file's own display
window (else the 1st-99.5th percentile), MONOCHROME1 is inverted, and the burned-in
annotation screen of `privacy` decides whether a frame is kept, cropped, masked or refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from medrcube.construction import imageio
from medrcube.construction.dicom_attributes import SourceError
from medrcube.construction.observation import ROI, Hint, SourceImage, documented
from medrcube.construction.privacy import coarse, deid
from medrcube.construction.privacy.safeguards import Manifest, screen_dicom
from medrcube.construction.readers.sources import frame_orientation, frame_window, frames, number_of_frames, read_dicom
from medrcube.construction.readers.tabular import LabelTable, SourceLog, rois_of
from medrcube.construction.recipe import PrivacySpec, SourceSpec

if TYPE_CHECKING:
    from pydicom.dataset import Dataset

# Technical attributes read into an image's metadata (the allow-list plus the sequence
# parameters that protocol rules need). Free text is not among them.
# Manufacturer and model (Annex E: keep) select the region rules of the scanner (privacy/regions.py).
META_KEYWORDS: tuple[str, ...] = (*deid.TECHNICAL_KEYWORDS, "InversionTime", "DiffusionBValue", "InstanceNumber", "Manufacturer",
                                  "ManufacturerModelName")  # fmt: skip


@dataclass
class _Instance:
    path: Path
    rel: str
    order: tuple[int, float, str]  # InstanceNumber, position along the slice normal, path
    frames: int
    attributes: dict[str, str]


def source_files(root: Path) -> list[Path]:
    out = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        out += [Path(folder) / n for n in sorted(names) if not n.startswith(".")]
    return out


def _order(ds: Dataset, rel: str) -> tuple[int, float, str]:
    """Sort key within a series: InstanceNumber, then position along the slice normal, then path."""
    try:
        number = int(ds.get("InstanceNumber", 0) or 0)
    except (TypeError, ValueError):
        number = 0
    pos = ds.get("ImagePositionPatient")
    z = float(pos[2]) if pos is not None and len(pos) == 3 else 0.0
    return (number, z, rel)


def pick_positions(n: int, k: int) -> list[int]:
    """k distinct indices out of n, evenly spaced and centred (k = 1: the middle one)."""
    if n <= 0:
        return []
    if k >= n:
        return list(range(n))
    return [int((i + 0.5) * n / k) for i in range(k)]


def display(ds: Dataset, frame: np.ndarray, index: int) -> tuple[np.ndarray, str]:
    """A frame as [0, 1] display values and how (window, inversion)."""
    if frame.ndim == 3:
        return frame.astype(np.float64) / 255.0, "colour as stored"
    win = frame_window(ds, index)
    if win is not None and win[1] > 0:
        img, how = imageio.window_center_width(frame, *win), f"DICOM window {win[0]:g}/{win[1]:g}"
    else:
        img, how = imageio.percentile_window(frame, 1.0, 99.5), "window 1-99.5th percentile"
    if str(ds.get("PhotometricInterpretation", "")) == "MONOCHROME1":
        img, how = 1.0 - img, how + ", inverted (MONOCHROME1)"
    return img, how


def read_dicom_folder(spec: SourceSpec, privacy: PrivacySpec, manifest: Manifest, leaks: dict[str, str], log: SourceLog) -> Iterator[SourceImage]:
    """The chosen slices of every series in the folder, de-identified, in folder order."""
    import pydicom

    assert spec.path is not None
    root = spec.path.resolve()
    table = LabelTable(spec.labels, leaks, manifest) if spec.labels is not None else None
    series: dict[str, list[_Instance]] = {}
    first_seen: dict[str, int] = {}
    for i, path in enumerate(source_files(root)):  # pass 1: headers
        rel = path.relative_to(root).as_posix()
        try:
            raw = read_dicom(path, stop_before_pixels=True, package_rules=False)
        except SourceError as exc:  # it names the file; pydicom's own error, if any, is its cause
            if isinstance(exc.__cause__, pydicom.errors.InvalidDicomError):  # no DICOM header: a README, a thumbnail
                log.note("not a usable DICOM file", str(path))
            else:  # damaged (anything from struct to KeyError), or a codec we refuse
                log.note("unreadable DICOM file" if exc.__cause__ is not None else "not a usable DICOM file", str(exc))
                manifest.refused_files["unreadable, or a transfer syntax refused"] += 1
            continue
        for value, keyword in deid.identifying_items(raw).items():
            leaks.setdefault(value, keyword)
        if "Rows" not in raw or "Columns" not in raw:
            log.note("DICOM file without an image", str(path))
            continue
        key = str(raw.get("SeriesInstanceUID", "")) or f"file:{rel}"  # in memory only
        # The kept subgroup attributes, generalised from the raw header before it is de-identified.
        attrs = coarse.from_header(raw, spec.attributes, spec.site) if spec.attributes is not None else {}
        manifest.add_deid(deid.deidentify(raw))
        series.setdefault(key, []).append(_Instance(path, rel, _order(raw, rel), number_of_frames(raw), attrs))
        first_seen.setdefault(key, i)
    for s, key in enumerate(sorted(series, key=lambda k: first_seen[k])):  # pass 2: the slices used
        instances = sorted(series[key], key=lambda x: x.order)
        slots = [(inst, f) for inst in instances for f in range(inst.frames)]
        decoded: dict[str, tuple[Dataset, np.ndarray] | None] = {}
        for j in pick_positions(len(slots), spec.slices):
            inst, f = slots[j]
            where = f"{inst.path}" + (f" frame {f + 1}" if inst.frames > 1 else "")
            if inst.rel not in decoded:
                decoded.clear()  # one file's pixels at a time
                decoded[inst.rel] = _load(inst, log, where)
            loaded = decoded[inst.rel]
            if loaded is None:
                manifest.refused_files["pixels cannot be decoded (frames)"] += 1
                continue
            ds, data = loaded
            image = _image(spec, inst, ds, data, f, s, j, len(slots), privacy, manifest, table, log, where, root)
            if image is not None:
                yield image


def _load(inst: _Instance, log: SourceLog, where: str) -> tuple[Dataset, np.ndarray] | None:
    """(de-identified dataset, decoded frames) of a file, or None when its pixels cannot be decoded."""
    try:
        ds = deid.deidentify(read_dicom(inst.path, package_rules=False)).dataset
        return ds, frames(ds)
    except SourceError as exc:  # read_dicom decoded the pixels and names the file
        log.note("pixels cannot be decoded", str(exc))
        return None
    except Exception as exc:  # noqa: BLE001 - pixel decoding fails in many ways (codec missing, truncated data)
        log.note("pixels cannot be decoded", f"{where}: {type(exc).__name__}: {exc}")
        return None


def _image(spec: SourceSpec, inst: _Instance, ds: Dataset, data: np.ndarray, f: int, s: int, j: int, n: int, privacy: PrivacySpec,
           manifest: Manifest, table: LabelTable | None, log: SourceLog, where: str, root: Path) -> SourceImage | None:  # fmt: skip
    frame = data[f]
    screen = screen_dicom(ds, frame.shape[:2], privacy)
    manifest.add_pixels(screen)
    if screen.action == "refuse":
        log.note(f"refused: {screen.reason}", where)
        return None
    pixels, how = display(ds, frame, f)
    pixels = screen.apply(pixels)
    processing = [how]
    if screen.action == "crop" and screen.crop is not None:  # a "crop" screen always carries its box
        processing.append(f"cropped to x {screen.crop[0]}-{screen.crop[2]}, y {screen.crop[1]}-{screen.crop[3]} ({screen.reason})")
    elif screen.action == "mask":
        processing.append(f"masked {len(screen.boxes)} region(s) ({screen.reason})")
    meta = deid.technical_metadata(ds, META_KEYWORDS)
    iop = frame_orientation(ds, f)
    if iop is not None:
        meta["ImageOrientationPatient"] = list(iop)
    if ds.get("ContrastBolusAgent"):
        meta["ContrastBolusAgent"] = "present"  # the agent's name is free text: only its presence is used
    spacing = meta.get("PixelSpacing")
    hints: dict[str, Hint] = {}
    labels: dict[str, Hint] = {}
    rois: list[ROI] = []
    if table is not None:
        rows = table.find(inst.rel)
        if rows:
            hints, labels = table.hints(rows, log, where)
            offset = (screen.crop[0], screen.crop[1]) if screen.action == "crop" and screen.crop else (0, 0)
            rois = rois_of(table, rows, root, pixels.shape[:2], log, where, offset=offset)
    for name, value in (("modality", spec.modality), ("part", spec.part), ("organ", spec.organ)):
        d = documented(value, name)
        if d is not None and name not in hints:
            hints[name] = d
    return SourceImage(
        dataset=spec.dataset, ref=f"series {s + 1} image {j + 1} of {n}", pixels=pixels, origin="dicom",
        spacing=(float(spacing[0]), float(spacing[1])) if isinstance(spacing, list) and len(spacing) == 2 else (1.0, 1.0),
        meta=meta, hints=hints, labels=labels, rois=rois, processing=processing, attributes=dict(inst.attributes),
    )  # fmt: skip
