"""A generated hospital archive with a realistic patient and scanner mix, for subgroup tests.

    write_archive(root, images=120, seed=0) -> Archive

Two sites (folders `north/` and `south/`), chest CT series of one axial slice each from
three vendors (GE, Siemens, Philips, each with its own model), patients of both sexes
aged 22 to 96 (some over 89, some stating PatientAge, others only a birth date), every
file carrying invented identifying tags (names, IDs, dates, institution) on purpose. The
truth of each image's coarse attributes is returned, so a test can check that a build
kept exactly them and nothing identifying. Pixels are drawn (ellipses and noise): no
real patient data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

VENDORS = (  # (Manufacturer as a console writes it, vocabulary term, ManufacturerModelName, recipe code)
    ("GE MEDICAL SYSTEMS", "GE", "Discovery CT750 HD", "CT750"),
    ("SIEMENS", "Siemens", "SOMATOM Definition AS", "DEF-AS"),
    ("Philips Medical Systems", "Philips", "Ingenuity CT", "INGENUITY"),
)
SITES = ("north", "south")
FAMILY = ("Quillfeather", "Marbleton", "Ashgrove", "Thistlewood", "Pennymarch", "Brackenridge", "Fennimore")
GIVEN = ("Odalys", "Ferdinand", "Lucasta", "Bartholomew", "Wilhelmina", "Cosmo", "Ysolde")


@dataclass
class Archive:
    root: Path
    truth: dict[str, dict[str, str]] = field(default_factory=dict)  # "site/file.dcm" -> attributes
    identifying: set[str] = field(default_factory=set)  # every identifying value written


def _band(age: int) -> str:
    return "90+" if age >= 90 else f"{age // 10 * 10}-{age // 10 * 10 + 9}"


def recipe_text(archive: Archive, out: Path, *, keep: tuple[str, ...] | None = None) -> str:
    """A recipe building the archive: each site its own source and site code, the models' codes."""
    models = ", ".join(f'"{m}": {code}' for _, _, m, code in VENDORS)
    keep_line = f"  keep: [{', '.join(keep)}]\n" if keep else ""
    sources = "".join(f"  - {{kind: dicom-folder, dataset: {s}-ct, path: {archive.root / s}, site: {s.upper()}}}\n"
                      for s in SITES)
    return (f"version: 1\nname: subgroup-site\nout: {out}\nsources:\n{sources}"
            f"attributes:\n{keep_line}  models: {{{models}}}\n"
            "tasks: [Modality Recognition, View Recognition, Organ Recognition]\n"
            "export: {hf: null}\n")


def write_archive(root: str | Path, *, images: int = 120, seed: int = 0, vendor_weights: tuple[float, ...] = (0.4, 0.35, 0.25)) -> Archive:
    """Write `images` single-slice CT series under root/{north,south}/ and return the truth."""
    from medrcube.construction.demo import _body, _dataset, _gray, _save

    rng = np.random.default_rng(seed)
    arch = Archive(Path(root))
    for i in range(images):
        site = SITES[0] if rng.random() < 0.55 else SITES[1]
        vendor = VENDORS[int(rng.choice(len(VENDORS), p=np.array(vendor_weights) / sum(vendor_weights)))]
        sex = "F" if rng.random() < 0.52 else "M"
        age = int(np.clip(rng.normal(62, 17), 22, 96))
        birth_year = 2023 - age - 1
        patient = {"PatientName": f"{FAMILY[i % len(FAMILY)]}^{GIVEN[(i * 3) % len(GIVEN)]}{i:03d}",
                   "PatientID": f"MRN-{7100000 + 37 * i}", "PatientBirthDate": f"{birth_year}0917",
                   "AccessionNumber": f"ACC-{5300000 + 11 * i}"}
        ds = _dataset(patient, 100 + i, 1, "CT", 48, 48)
        ds.PatientSex = sex
        if i % 3 == 0:  # no PatientAge: the band comes from the birth date and the study date
            del ds.PatientAge
        else:
            ds.PatientAge = f"{age:03d}Y"
        ds.Manufacturer, ds.ManufacturerModelName = vendor[0], vendor[2]
        ds.BodyPartExamined, ds.ImageOrientationPatient = "CHEST", [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
        ds.PixelSpacing, ds.SliceThickness = [0.8, 0.8], 1.0
        _gray(ds, _body(48, 48, rng, lungs=True))
        rel = f"{site}/p{i:03d}.dcm"
        _save(ds, arch.root / rel)
        arch.truth[rel] = {"sex": {"F": "female", "M": "male"}[sex], "age_band": _band(age),
                           "manufacturer": vendor[1], "model": vendor[3], "site": site.upper()}
        arch.identifying.update(v for v in patient.values())
        arch.identifying.add(f"{age:03d}Y")
    return arch
