"""A folder of NIfTI volumes as a source: slices cut along true anatomical planes.

A NIfTI file has no modality or body-part field, so those come from the recipe (a
documented source) or a labels CSV. The plane of each cut is known from the affine
(`sources.plane_of_file_axis`: within 20 degrees of a patient axis; oblique volumes give
no cut in that plane). A BIDS file-name suffix (`_T1w`, `_FLAIR`, `_dwi`...) names the
acquisition. The header is never exported (its `descrip` field is free text). Labels
apply to a whole volume (diagnosis, severity); regions of interest are not read from a
volume's label row, since one box cannot mark every slice. The subgroup attributes a
recipe keeps come from the volume's JSON sidecar when it has one (privacy/coarse.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

from medrcube.construction import imageio
from medrcube.construction.observation import Hint, SourceImage, documented
from medrcube.construction.privacy.safeguards import Manifest
from medrcube.construction.readers.dicom_folder import pick_positions, source_files
from medrcube.construction.readers.sources import (
    load_volume,
    plane_axis,
    plane_of_file_axis,
    volume_slice,
)
from medrcube.construction.readers.tabular import LabelTable, SourceLog, sidecar_attributes
from medrcube.construction.recipe import PrivacySpec, SourceSpec

SUFFIXES = (".nii", ".nii.gz")
_BIDS_SUFFIX = re.compile(r"_([A-Za-z0-9]+)\.nii(\.gz)?$")


def bids_suffix(name: str) -> str | None:
    """The BIDS suffix of a file name (`sub-01_T1w.nii.gz` -> 'T1w'), or None."""
    m = _BIDS_SUFFIX.search(name)
    return m.group(1) if m else None


def read_nifti_folder(spec: SourceSpec, privacy: PrivacySpec, manifest: Manifest, leaks: dict[str, str], log: SourceLog) -> Iterator[SourceImage]:
    """Slices of every volume in the folder: `spec.slices` per plane of `spec.planes`."""
    assert spec.path is not None
    root = spec.path.resolve()
    table = LabelTable(spec.labels, leaks, manifest) if spec.labels is not None else None
    volumes = [p for p in source_files(root) if p.name.endswith(SUFFIXES)]
    for v, path in enumerate(volumes):
        rel = path.relative_to(root).as_posix()
        try:
            vol = load_volume(path)
        except Exception as exc:  # noqa: BLE001 - nibabel raises many types for a damaged file
            log.note("unreadable NIfTI volume", f"{path}: {type(exc).__name__}: {exc}")
            continue
        body = vol.data[vol.data > 0]
        low, high = np.percentile(body if body.size else vol.data, [1.0, 99.5])
        if not high > low:
            log.note("constant NIfTI volume", str(path))
            continue
        rows = table.find(rel) if table is not None else []
        hints, labels = table.hints(rows, log, str(path)) if table is not None and rows else ({}, {})
        attributes = sidecar_attributes(path, spec, log)
        suffix = bids_suffix(path.name)
        if suffix and "protocol" not in hints:
            hints["protocol"] = Hint(suffix, f"BIDS file-name suffix {suffix!r}", "BIDS suffix")
        for name, value in (("modality", spec.modality), ("part", spec.part), ("organ", spec.organ)):
            d = documented(value, name)
            if d is not None and name not in hints:
                hints[name] = d
        for plane in spec.planes:
            axis = plane_axis(plane)
            src_axis, _ = vol.source_index(plane, 0)
            if vol.plane_of_source_axis[src_axis] != plane or plane_of_file_axis(vol.affine, src_axis) != plane:
                log.note(f"no true {plane} plane (oblique affine)", str(path))
                continue
            size = vol.data.shape[axis]
            for index in pick_positions(size, spec.slices):
                sl, (dr, dc) = volume_slice(vol, plane, index)
                pixels = imageio.window(sl, float(low), float(high))
                _, src_index = vol.source_index(plane, index)
                plane_hint = Hint(
                    plane,
                    f"nibabel.aff2axcodes(affine) = {vol.source_axcodes}: voxel axis {src_axis} runs towards "
                    f"{vol.source_axcodes[src_axis]}, so fixing it (index {src_index} of {size}) cuts {'an' if plane == 'axial' else 'a'} "
                    f"{plane} slice (its normal, from the affine, lies within 20 degrees of that axis)",
                    "NIfTI affine",
                )  # fmt: skip
                yield SourceImage(
                    dataset=spec.dataset, ref=f"volume {v + 1} {plane} slice {src_index} of {size}", pixels=pixels,
                    origin="nifti", spacing=(dr, dc), hints={**hints, "plane": plane_hint}, labels=labels,
                    processing=["reoriented to RAS, window 1-99.5th percentile of the volume"],
                    attributes=dict(attributes),
                )  # fmt: skip
