"""Subgroup attributes kept by a build, generalised before the header is de-identified.

A review board asks how a model does for women and men, the old and the young, on each
vendor's scanners and at each site. The header de-identification removes sex, age and
dates (privacy/deid.py), so the few coarse values a build keeps are read from the raw
header first, and generalised at once to a closed vocabulary (cube/attributes.py):

- sex: PatientSex F, M, O -> female, male, other;
- age_band: the decade of PatientAge (or of the years between PatientBirthDate and the
  study's date, never kept), with every age over 89 in one band "90+" (HIPAA safe harbor);
- manufacturer: the vendor of the closed list for Manufacturer;
- model: the code the recipe gives ManufacturerModelName (`attributes.models`), any
  other model "unknown";
- site: the code the recipe gives the source (`site`, else `attributes.site`);
- protocol: the protocol family the build's vocabulary derives (Stage I), if any.

A NIfTI volume or a PNG/JPEG image has no header to read them from; a JSON sidecar beside
it (`sub-01_T1w.json` for `sub-01_T1w.nii.gz`, `case7.json` for `case7.png`, as BIDS
places them) may state them under the DICOM keywords (`PatientSex`, `PatientAge`,
`Manufacturer`, `ManufacturerModelName`), BIDS's `ManufacturersModelName`, or plain
`sex`, `age` (years) and `model`; they are generalised by the same rules, nothing else
of the sidecar is read, and the sidecar itself is never exported.

No other value is read into them, none is free text, and only those the recipe keeps
(`attributes.keep`) are written: the manifest lists them with how each was generalised
and how many exported images hold each value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from medrcube.construction.recipe.spec import AttributesSpec
from medrcube.cube import attributes as vocab
from medrcube.records import UNKNOWN

RULES: dict[str, str] = {
    "sex": "PatientSex F/M/O -> female/male/other, else unknown",
    "age_band": "decade of PatientAge (or of the years from PatientBirthDate to the study date, not kept); "
                "over 89: one band 90+ (HIPAA safe harbor), else unknown",
    "manufacturer": f"Manufacturer -> one of {', '.join(vocab.MANUFACTURERS)}, else unknown",
    "model": "ManufacturerModelName -> the recipe's code (attributes.models), else unknown",
    "site": "the recipe's site code of the source (sources[].site, else attributes.site), else unknown",
    "protocol": "the protocol family the build's vocabulary derives (Imaging Protocol Recognition), else unknown",
}
SIDECAR_RULE = ("NIfTI and PNG/JPEG sources: the same rules on the image's JSON sidecar (PatientSex or sex, "
                "PatientAge or age in years, Manufacturer, ManufacturerModelName or ManufacturersModelName or model)")
# The keys a JSON sidecar may state each raw value under, in order of preference.
SIDECAR_KEYS: dict[str, tuple[str, ...]] = {
    "PatientSex": ("PatientSex", "sex"),
    "PatientAge": ("PatientAge", "age"),
    "Manufacturer": ("Manufacturer", "manufacturer"),
    "ManufacturerModelName": ("ManufacturerModelName", "ManufacturersModelName", "model"),
}


def _years_between(birth: Any, day: Any) -> float | None:
    b, d = str(birth or "").strip(), str(day or "").strip()
    if len(b) < 8 or len(d) < 8 or not (b[:8].isdigit() and d[:8].isdigit()):
        return None
    years = int(d[:4]) - int(b[:4]) - (1 if d[4:8] < b[4:8] else 0)
    return float(years) if years >= 0 else None


def from_header(raw: Any, spec: AttributesSpec, site: str | None) -> dict[str, str]:
    """The kept attributes of one raw (not yet de-identified) DICOM header, generalised."""
    out: dict[str, str] = {}
    keep = set(spec.keep)
    if "sex" in keep:
        out["sex"] = vocab.normalise("sex", raw.get("PatientSex"))
    if "age_band" in keep:
        age = raw.get("PatientAge")
        years = vocab.age_years(age if isinstance(age, int | float) else str(age or "")) if age not in (None, "") \
            else None
        if years is None:
            day = raw.get("StudyDate") or raw.get("AcquisitionDate") or raw.get("ContentDate") or raw.get("SeriesDate")
            years = _years_between(raw.get("PatientBirthDate"), day)
        out["age_band"] = vocab.age_band(years)
    if "manufacturer" in keep:
        out["manufacturer"] = vocab.manufacturer(str(raw.get("Manufacturer") or ""))
    if "model" in keep:
        out["model"] = spec.models.get(str(raw.get("ManufacturerModelName") or "").strip(), UNKNOWN)
    out.update(from_source(spec, site))
    return out


def from_source(spec: AttributesSpec, site: str | None) -> dict[str, str]:
    """The attributes a source states whatever its files (site; protocol left to Stage I)."""
    out: dict[str, str] = {}
    if "site" in spec.keep:
        out["site"] = site or spec.site or UNKNOWN
    if "protocol" in spec.keep:
        out["protocol"] = UNKNOWN  # filled by production from the derived protocol, if any
    return out


def sidecar_of(image: Path) -> Path:
    """Where an image's JSON sidecar lies: its name without the image suffix, plus .json."""
    name = image.name
    for suffix in (".nii.gz", ".nii"):
        if name.endswith(suffix):
            return image.with_name(name[: -len(suffix)] + ".json")
    return image.with_suffix(".json")


def from_sidecar(image: Path, spec: AttributesSpec, site: str | None) -> dict[str, str]:
    """The kept attributes of an image from its JSON sidecar (module docstring), generalised as a
    header's are; without a sidecar, what the source states (from_source). ValueError names the
    sidecar when it is not a JSON object."""
    path = sidecar_of(image)
    if not path.is_file():
        return from_source(spec, site)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not readable as JSON ({exc}); fix or remove the sidecar") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a sidecar must be a JSON object such as {{\"PatientSex\": \"F\", \"PatientAge\": "
                         f"\"064Y\"}}, found {type(data).__name__}")
    raw = {key: next((data[k] for k in names if data.get(k) not in (None, "")), None)
           for key, names in SIDECAR_KEYS.items()}
    return from_header(raw, spec, site)


def manifest_section(spec: AttributesSpec | None, counts: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The manifest's `subgroup_attributes`: kept, how each is generalised, images per value."""
    if spec is None:
        return {"kept": [], "note": "the recipe keeps no subgroup attribute (no `attributes` section)"}
    return {"kept": list(spec.keep), "rules": {k: RULES[k] for k in spec.keep}, "sidecars": SIDECAR_RULE,
            "images_per_value": {k: dict(sorted(counts.get(k, {}).items())) for k in spec.keep}}


def counts(drafts: Any) -> dict[str, dict[str, int]]:
    """Exported images per value of each kept attribute, over the chosen drafts."""
    seen: dict[tuple[str, str], dict[str, str]] = {}
    for d in drafts:
        a = d.fact.extra.get("attributes")
        if a:
            seen.setdefault((d.dataset, d.image), a)
    out: dict[str, dict[str, int]] = {}
    for a in seen.values():
        for k, v in a.items():
            out.setdefault(k, {})
            out[k][v] = out[k].get(v, 0) + 1
    return out
