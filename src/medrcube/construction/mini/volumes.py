"""NIfTI brain volumes from nibabel and dipy, cut into true axial, coronal and sagittal slices.

The plane of every cut is known from the affine (`readers.sources.plane_of_file_axis`), so
View Recognition items here are derived, not guessed. Consecutive cuts alternate between an
unmodified slice ("no lesion") and a slice with a synthetic lesion, so every image is a
different slice and the presence items stay balanced.
"""

from __future__ import annotations

import numpy as np

from medrcube.construction import imageio
from medrcube.construction.dicom_attributes import OBLIQUE_LIMIT_DEG, SourceError
from medrcube.construction.mini.common import Picture, dipy_file, fractions, nibabel_file, output_shape
from medrcube.construction.readers.sources import PackageFile, load_volume, plane_axis, plane_of_file_axis, volume_slice
from medrcube.construction.stages.questions import Q_PROTOCOL, Fact, modality_fact, plane_fact, region_fact

_VOLUME_DOCS: dict[str, str] = {
    "anatomical.nii": "nibabel's structural (anatomical) brain test volume, SPM-normalised ('spm - 3D normalized' in its header)",
    "example4d.nii.gz": "nibabel's 4-D functional brain test series (an FSL NIfTI file; the first volume is used)",
    "S0_10slices.nii.gz": "dipy's 10-slice S0 (non-diffusion-weighted) brain test volume",
    "aniso_vox.nii.gz": "dipy's anisotropic-voxel brain test volume",
}
# The protocol a volume's documentation names (NIfTI has no sequence tags): only where it
# names one. The structural volume is not documented as T1- or T2-weighted, so it has none.
_VOLUME_PROTOCOLS: dict[str, str] = {
    "example4d.nii.gz": "BOLD functional MRI (EPI)",
    "S0_10slices.nii.gz": "Diffusion MRI, b = 0 image",
}
_MRI_SEQUENCES: tuple[str, ...] = ("T1-weighted", "T2-weighted", "BOLD functional MRI (EPI)", "Diffusion MRI, b = 0 image")


def _protocol_fact(pf: PackageFile, doc: str) -> list[Fact]:
    answer = _VOLUME_PROTOCOLS.get(pf.name)
    if answer is None:
        return []
    others = tuple(x for x in _MRI_SEQUENCES if x != answer)
    return [Fact("Imaging Protocol Recognition", Q_PROTOCOL, answer, others, f"Documented source: {doc}.", "documented source")]


def volume_pictures(dataset: str, pf: PackageFile, cuts: list[tuple[str, float]], long_side: int = 256) -> list[Picture]:
    """One picture per (plane, fraction along that plane's axis) cut; odd cuts get a lesion."""
    vol = load_volume(pf.path())
    body = vol.data[vol.data > 0]
    low, high = np.percentile(body if body.size else vol.data, [1.0, 99.5])
    doc = _VOLUME_DOCS[pf.name]
    stem_base = pf.name.split(".")[0].lower()
    out = []
    seen: set[tuple[str, int]] = set()
    for n, (plane, frac) in enumerate(cuts):
        size = vol.data.shape[plane_axis(plane)]
        index = int(round(frac * (size - 1)))
        if (plane, index) in seen:
            raise SourceError(f"{pf.citation()}: two cuts land on {plane} index {index}; spread the cuts")
        seen.add((plane, index))
        src_axis, src_index = vol.source_index(plane, index)
        if vol.plane_of_source_axis[src_axis] != plane or plane_of_file_axis(vol.affine, src_axis) != plane:
            raise SourceError(f"{pf.citation()}: fixing file axis {src_axis} does not cut a true {plane} slice")
        sl, (dr, dc) = volume_slice(vol, plane, index)
        img = imageio.resize(imageio.window(sl, low, high), output_shape(sl.shape[0] * dr, sl.shape[1] * dc, long_side))
        facts = [
            modality_fact("MRI", f"NIfTI has no modality field; documented source: {doc}.", "documented source"),
            plane_fact(
                plane,
                f"nibabel.aff2axcodes(affine) = {vol.source_axcodes}: voxel axis {src_axis} runs towards "
                f"{vol.source_axcodes[src_axis]}, so fixing it (at index {src_index}, 0-based, of {size}) cuts "
                f"{'an' if plane == 'axial' else 'a'} {plane} slice (its normal, from the affine, lies within "
                f"{OBLIQUE_LIMIT_DEG:g} degrees of that axis).",
                "NIfTI affine",
            ),
            region_fact("Brain", f"Documented source: {doc}.", "documented source"),
            *_protocol_fact(pf, doc),
        ]
        out.append(
            Picture(
                dataset=dataset, stem=f"{stem_base}_{n + 1:02d}", pixels=img, modality="MRI", part="Brain", source=pf,
                locator=f"voxel axis {src_axis} index {src_index} (0-based) of {size}",
                processing=f"reoriented to RAS, window 1-99.5th percentile of the volume, resampled to {img.shape[1]}x{img.shape[0]}",
                facts=facts, lesion=n % 2 == 1, normal_ok=True,
            )
        )
    return out


def _planes(*spec: tuple[str, int, float, float]) -> list[tuple[str, float]]:
    """Cuts interleaved across planes: (plane, how many, from, to) per plane."""
    per_plane = [[(plane, f) for f in fractions(n, lo, hi)] for plane, n, lo, hi in spec]
    out: list[tuple[str, float]] = []
    for i in range(max(len(p) for p in per_plane)):
        out += [p[i] for p in per_plane if i < len(p)]
    return out


def nibabel_brain() -> list[Picture]:
    # The central 40-70% of each axis: the outer slices of these small volumes hold little brain.
    cuts_anat = _planes(("axial", 6, 0.3, 0.7), ("coronal", 6, 0.3, 0.7), ("sagittal", 6, 0.3, 0.7))
    # example4d covers a 53 mm slab: only its axial slices show a whole cross-section.
    cuts_4d = _planes(("axial", 8, 0.3, 0.75))
    pics = volume_pictures("nibabel-brain", nibabel_file("tests/data/anatomical.nii"), cuts_anat)
    pics += volume_pictures("nibabel-brain", nibabel_file("tests/data/example4d.nii.gz"), cuts_4d)
    return pics


def dipy_brain() -> list[Picture]:
    pics = volume_pictures("dipy-brain", dipy_file("S0_10slices.nii.gz"), _planes(("axial", 6, 0.22, 0.78)))
    # aniso_vox is acquired 35 degrees off the axial plane: only its sagittal cuts are true
    # planes (plane_of_file_axis refuses the others), so only those are used.
    pics += volume_pictures("dipy-brain", dipy_file("aniso_vox.nii.gz"), _planes(("sagittal", 10, 0.3, 0.7)))
    return pics
