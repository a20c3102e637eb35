"""The recipe as values: what `load_recipe` returns (the sources, their labels files, the
severity scale, review, privacy and export settings), and the recipe's error.

Frozen dataclasses, so readers and stages take exactly the settings they need and cannot
change them; parse.py builds them from the YAML file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrcube.taxonomy import TASK_NAMES

SOURCE_KINDS: tuple[str, ...] = ("dicom-folder", "nifti-folder", "images-csv", "package-images")
PACKAGE_BUILDERS: tuple[str, ...] = ("mini",)
LABEL_FIELDS: tuple[str, ...] = (
    "path", "modality", "part", "organ", "view", "protocol", "diagnosis", "abnormality", "severity",
    "box", "box_label", "mask", "mask_label", "burned_in",
)  # fmt: skip
PLANES: tuple[str, ...] = ("axial", "coronal", "sagittal")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RecipeError(ValueError):
    """The recipe cannot be used; the message names the file, the key, the value and the fix."""


@dataclass(frozen=True, slots=True)
class LabelsFile:
    """A CSV of labels: one row per image (images-csv) or per file/folder (dicom, nifti)."""

    file: Path
    key: str  # the column that names the image, relative to the source path
    columns: Mapping[str, str]  # semantic field (LABEL_FIELDS) -> CSV column
    private: tuple[str, ...] = ()  # identifying columns: never read into items, searched for in the export


ATTRIBUTE_KEYS: tuple[str, ...] = ("sex", "age_band", "manufacturer", "model", "site", "protocol")
SITE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,15}$")


@dataclass(frozen=True, slots=True)
class AttributesSpec:
    """The subgroup attributes a build keeps per image (cube/attributes.py): which ones, the
    site code, and the scanner models' codes (a closed list: any other model is "unknown")."""

    keep: tuple[str, ...] = ATTRIBUTE_KEYS
    site: str | None = None  # the recipe's site code; a source's own `site` overrides it
    models: Mapping[str, str] = field(default_factory=dict)  # ManufacturerModelName -> code


@dataclass(frozen=True, slots=True)
class SourceSpec:
    kind: str
    dataset: str
    path: Path | None = None
    builder: str | None = None
    modality: str | None = None  # documented modality (for files without one: NIfTI, PNG)
    part: str | None = None
    organ: str | None = None
    labels: LabelsFile | None = None
    slices: int = 1  # dicom: slices per series; nifti: slices per plane
    planes: tuple[str, ...] = PLANES
    site: str | None = None  # the site code of this source's images (else the recipe's attributes.site)
    attributes: AttributesSpec | None = None  # the recipe's `attributes` (None: none kept)


@dataclass(frozen=True, slots=True)
class SeveritySpec:
    scale: tuple[str, ...]
    values: Mapping[str, str] = field(default_factory=dict)  # raw label -> scale entry


@dataclass(frozen=True, slots=True)
class ReviewSpec:
    model: str
    models_file: Path | None = None
    retries: int = 2
    store: Path | None = None
    allow_remote: bool = False
    on_malformed: str = "hold_out"  # or "keep"
    expert_judgments: Path | None = None
    concurrency: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PrivacySpec:
    burned_in: str = "refuse"  # or "mask"
    mask: tuple[tuple[float, float, float, float], ...] = ()  # fractions of width/height
    text: str = "mask"  # text the OCR finds in any frame: "mask" its regions or "refuse" the frame
    region_rules: Path | None = None  # the region-rule table (privacy/regions.py); None: the default table
    region_rules_off: bool = False  # `region_rules: none`
    review_frames: int = 30  # frames drawn for the review sheet (privacy/reviewsheet.py)


@dataclass(frozen=True, slots=True)
class ExportSpec:
    release: str | None = "release"
    hf: str | None = "hf"
    report: str | None = "report"
    max_side: int = 512


# The audit's kinds of leak where the items' own texts give the answer away: what `on_leak: text` fails on.
TEXT_KINDS = ("sibling_named", "sibling_lift", "options_prior")


@dataclass(frozen=True, slots=True)
class AuditSpec:
    """The leakage audit's stage (`cube.audit`): its bounds, and whether a leak fails the build."""

    # "text" (default): list the leaks, exit 4 when the question texts give an answer away (a sibling
    # question names it, or the options alone pick it: TEXT_KINDS); "fail": exit 4 on any leak;
    # "flag": list them only; "off": skip. Under "fail" and "text" the cube stays written, to be inspected.
    on_leak: str = "text"
    prior_margin: float = 0.10
    sibling_margin: float = 0.10
    length_margin: float = 0.10
    letter_band: float = 0.99
    constant_letter_grounding: float = 0.05

    def failing(self, kinds: list[str]) -> list[str]:
        """Of the kinds of the audit's findings, those that fail the build under `on_leak`."""
        if self.on_leak == "fail":
            return list(kinds)
        return [k for k in kinds if k in TEXT_KINDS] if self.on_leak == "text" else []


@dataclass(frozen=True, slots=True)
class Recipe:
    path: Path
    name: str
    sources: tuple[SourceSpec, ...]
    out: Path | None = None
    tasks: tuple[str, ...] = TASK_NAMES
    diagnosis_values: Mapping[str, str] = field(default_factory=dict)
    severity: SeveritySpec | None = None
    per_cell: int | None = None
    cell_targets: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    seed: str = "medrcube-build-v1"
    options: int = 4
    similar_fraction: float = 0.5
    templates: Mapping[str, str] = field(default_factory=dict)
    review: ReviewSpec | None = None
    privacy: PrivacySpec = PrivacySpec()
    export: ExportSpec = ExportSpec()
    audit: AuditSpec = AuditSpec()
    ontology: Path | None = None
    vocabulary: Path | None = None
    attributes: AttributesSpec | None = None  # None: no subgroup attribute is kept

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def package_only(self) -> bool:
        return any(s.kind == "package-images" for s in self.sources)
