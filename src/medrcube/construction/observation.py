"""The values passed between the pipeline's stages.

- A source reader (dicom_folder, nifti_folder, tabular) yields `SourceImage`s: one 2-D
  de-identified image with the technical metadata and labels it came with.
- Stage I (mapping) turns each into a `Mapped` image: its cube part and modality, and the
  `Competency`s (task, answer, derivation) its metadata supports.
- Stage II (production) turns competencies into items.

Nothing here holds an identifying value: readers de-identify before they build these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class Hint:
    """A value a source states about an image, with where it was read from."""

    value: str
    derivation: str  # "labels CSV column 'dx' = 'pneumonia'", "recipe: documented modality"
    original_task: str  # short provenance: "labels CSV", "NIfTI affine", "documented source"


def documented(value: str | None, what: str) -> Hint | None:
    """A recipe-level documented value (for sources whose files cannot state it): the hint a
    reader hands on when the recipe, not the file, says what the image is."""
    if not value:
        return None
    return Hint(value, f"recipe: the source is documented as {what} {value!r}", "documented source")


@dataclass(frozen=True, slots=True)
class ROI:
    """A region of interest in source pixel coordinates: a box (x0, y0, x1, y1, end-exclusive)
    and, for a mask, the mask itself (bool, the image's size)."""

    box: tuple[int, int, int, int]
    label: str | None = None  # raw label of the region (box_label / mask_label column)
    mask: np.ndarray | None = field(default=None, compare=False, repr=False)
    source: str = "box"  # "box" or "mask"


@dataclass
class SourceImage:
    """One 2-D image read from a source, de-identified, with what is known about it."""

    dataset: str
    ref: str  # opaque, non-identifying: "series 3 slice 2 of 5", "row 14"
    pixels: np.ndarray  # [0, 1] floats, H x W (gray) or H x W x 3 (colour)
    origin: str  # "dicom", "nifti", "image"
    spacing: tuple[float, float] = (1.0, 1.0)  # (row, column) pixel size, for the aspect ratio
    meta: dict[str, Any] = field(default_factory=dict)  # allow-listed technical DICOM attributes
    hints: dict[str, Hint] = field(default_factory=dict)  # modality, part, organ, plane, view, protocol...
    labels: dict[str, Hint] = field(default_factory=dict)  # diagnosis, abnormality, severity
    rois: list[ROI] = field(default_factory=list)
    processing: list[str] = field(default_factory=list)  # window, crop, mask: what was done to the pixels
    # Subgroup attributes kept by the recipe, already generalised (privacy/coarse.py): never a raw value.
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Competency:
    """One task an image supports: its answer and how the metadata gave it (Stage I's output).

    `kind` selects the question template and the option source: fixed option pools for
    modality, plane, projection, organ, abnormality (yes/no), severity and roi_locate;
    ontology concepts for protocols, diagnoses and findings (`answer` is then a concept id).
    """

    task: str
    kind: str  # a template name (templates.FIELDS)
    answer: str
    derivation: str
    original_task: str
    pool: tuple[str, ...] = ()  # the other options of a fixed pool
    concept: bool = False  # answer is an ontology concept id; distractors come from the ontology
    finding: str | None = None  # the finding the question names (severity, roi_locate)
    roi: int | None = None  # index into the image's ROIs (roi_identify, roi_locate)
    marked: bool = False  # asked on a copy of the image with the ROI outlined


@dataclass
class Mapped:
    """A source image placed in the cube: its axes and the competencies it supports."""

    image: SourceImage
    part: str
    modality: str
    competencies: list[Competency]
