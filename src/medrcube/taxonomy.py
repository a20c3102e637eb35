"""The three axes of the competency cube: canonical names, task levels and aliases.

The axes are open sets. A site cube may add a part or a modality; an unknown value is
kept as written (stripped) and reported by validation, never dropped or coerced.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import IntEnum


class Level(IntEnum):
    """Where a task sits in the radiological reasoning chain."""

    LOW = 1
    MID = 2
    HIGH = 3


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    abbrev: str
    level: Level


TASKS: tuple[Task, ...] = (
    Task("Modality Recognition", "MR", Level.LOW),
    Task("View Recognition", "VR", Level.LOW),
    Task("Imaging Protocol Recognition", "IPR", Level.LOW),
    Task("Organ Recognition", "OR", Level.MID),
    Task("ROI Grounding", "RG", Level.MID),
    Task("Disease Diagnosis", "DD", Level.HIGH),
    Task("Abnormality Diagnosis", "AD", Level.HIGH),
    Task("Severity Grading", "SG", Level.HIGH),
)
TASK_BY_NAME: dict[str, Task] = {t.name: t for t in TASKS}
TASK_NAMES: tuple[str, ...] = tuple(t.name for t in TASKS)

# Column order of the paper's Table 1.
PARTS: tuple[str, ...] = ("Brain", "Chest", "Heart", "Lungs", "Breast")
# Parts the project's own cubes use beyond the paper's five: the bundled mini cube
# (Abdomen, Pelvis, Shoulder, Lower Limb) and site cubes, whose DICOM BodyPartExamined
# values the construction vocabulary maps onto these names (Knee too). They are known
# (no "unknown part" warning) but they are not MedRCube parts: Table 1 and every
# comparison with the paper use PARTS. A value in neither tuple is still kept as written
# and reported by validation.
EXTRA_PARTS: tuple[str, ...] = ("Abdomen", "Pelvis", "Shoulder", "Lower Limb", "Knee")
KNOWN_PARTS: tuple[str, ...] = PARTS + EXTRA_PARTS
MODALITIES: tuple[str, ...] = ("CT", "X-Ray", "MRI", "US")

# Aliases are matched case-insensitively after collapsing whitespace, hyphens and
# underscores; the canonical names and the abbreviations are aliases of themselves.
_TASK_ALIASES: dict[str, str] = {
    "abnormity diagnosis": "Abnormality Diagnosis",
    "abnormality detection": "Abnormality Diagnosis",
    "view identification": "View Recognition",
    "view classification": "View Recognition",
    "plane recognition": "View Recognition",
    "modality identification": "Modality Recognition",
    "modality classification": "Modality Recognition",
    "protocol recognition": "Imaging Protocol Recognition",
    "imaging protocols recognition": "Imaging Protocol Recognition",  # the release's statistics figure
    "imaging protocol identification": "Imaging Protocol Recognition",
    "sequence recognition": "Imaging Protocol Recognition",
    "organ identification": "Organ Recognition",
    "organ classification": "Organ Recognition",
    "roi recognition": "ROI Grounding",
    "region grounding": "ROI Grounding",
    "lesion localization": "ROI Grounding",
    "disease classification": "Disease Diagnosis",
    "severity classification": "Severity Grading",
    "grading": "Severity Grading",
}
_MODALITY_ALIASES: dict[str, str] = {
    "x ray": "X-Ray",
    "xray": "X-Ray",
    "cr": "X-Ray",
    "dx": "X-Ray",
    "radiograph": "X-Ray",
    "radiography": "X-Ray",
    "computed tomography": "CT",
    "ct scan": "CT",
    "mr": "MRI",
    "mri": "MRI",
    "magnetic resonance": "MRI",
    "magnetic resonance imaging": "MRI",
    "ultrasound": "US",
    "ultrasonography": "US",
    "sonography": "US",
    "echocardiography": "US",
}
_PART_ALIASES: dict[str, str] = {
    "lung": "Lungs",
    "pulmonary": "Lungs",
    "head": "Brain",
    "cardiac": "Heart",
    "thorax": "Chest",
    "thoracic": "Chest",
    "breasts": "Breast",
    "mammary": "Breast",
    "abdominal": "Abdomen",
    "pelvic": "Pelvis",
    "lower extremity": "Lower Limb",
}


def _norm(value: str) -> str:
    return " ".join(value.replace("-", " ").replace("_", " ").split()).casefold()


def _table(canonical: tuple[str, ...], aliases: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    table = {_norm(c): c for c in canonical}
    table.update({_norm(k): v for k, v in aliases.items()})
    table.update({_norm(k): v for k, v in extra.items()})
    return table


_TASK_TABLE = _table(TASK_NAMES, _TASK_ALIASES, {t.abbrev: t.name for t in TASKS})
_MODALITY_TABLE = _table(MODALITIES, _MODALITY_ALIASES, {})
_PART_TABLE = _table(KNOWN_PARTS, _PART_ALIASES, {})


@dataclass(frozen=True, slots=True)
class Canonical:
    """A value mapped onto an axis: `value` is canonical when `known`, else kept as written."""

    value: str
    known: bool


def _canonical(raw: str, table: dict[str, str]) -> Canonical:
    hit = table.get(_norm(raw))
    return Canonical(hit, True) if hit else Canonical(" ".join(raw.split()), False)


def canonical_task(raw: str) -> Canonical:
    return _canonical(raw, _TASK_TABLE)


def canonical_modality(raw: str) -> Canonical:
    return _canonical(raw, _MODALITY_TABLE)


def canonical_part(raw: str) -> Canonical:
    return _canonical(raw, _PART_TABLE)


def task_level(task: str) -> Level | None:
    """The level of a canonical task name, or None for a task outside the taxonomy."""
    t = TASK_BY_NAME.get(task)
    return t.level if t else None


def task_abbrev(task: str) -> str:
    t = TASK_BY_NAME.get(task)
    return t.abbrev if t else task


def is_high_level(task: str) -> bool:
    return task_level(task) == Level.HIGH


def did_you_mean(value: str, choices: list[str] | tuple[str, ...], n: int = 3) -> str:
    """A ' (did you mean X?)' suffix for error messages, or '' when nothing is close."""
    close = difflib.get_close_matches(value, list(choices), n=n, cutoff=0.5)
    if not close:
        lowered = {c.casefold(): c for c in choices}
        close = difflib.get_close_matches(value.casefold(), list(lowered), n=n, cutoff=0.5)
        close = [lowered[c] for c in close]
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
