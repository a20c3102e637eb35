"""Item production: question templates, distractors from the same axis, balanced answer positions,
and the release-layout record.

A `Fact` is one answerable statement about one image (its modality is MRI; its lesion
sits in the upper-left quadrant) together with where the answer came from. `Fact`s are
turned into multiple-choice records by `ItemWriter`, which spreads the correct letter
evenly over the positions for each (task, number of options) and draws distractors
deterministically from the axis's other values: plausible, and mutually exclusive with
the answer and with each other by construction of the pools below.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medrcube.construction.stages.lesions import QUADRANTS, SIZE_CLASSES
from medrcube.cube.item import LETTERS
from medrcube.taxonomy import TASK_BY_NAME

# -- option pools (one axis each; every value excludes every other) ----------------------

MODALITY_OPTIONS: dict[str, str] = {"CT": "CT", "MRI": "MRI", "X-Ray": "X-ray radiography", "US": "Ultrasound"}
# "Oblique" is a real alternative: a slice more than 20 degrees off every patient axis gets
# no plane item at all (sources.view_from_iop), so it is never the right answer here.
PLANE_OPTIONS: tuple[str, ...] = ("Axial", "Coronal", "Sagittal", "Oblique")
CHEST_PROJECTIONS: tuple[str, ...] = ("Posteroanterior (PA)", "Anteroposterior (AP)", "Lateral", "Oblique")
LIMB_PROJECTIONS: tuple[str, ...] = ("Anteroposterior (AP)", "Posteroanterior (PA)", "Lateral", "Oblique")
# MRI protocols. Each answer lists the distractors that exclude it: a diffusion b0 image
# is T2-weighted and a TOF angiogram is a T1-weighted gradient echo, so those pairs
# never appear together.
MRI_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "T1-weighted": ("T2-weighted", "Diffusion-weighted (DWI)", "Time-of-flight MR angiography", "BOLD functional MRI (EPI)"),
    "Time-of-flight MR angiography": ("T2-weighted", "Diffusion-weighted (DWI)", "BOLD functional MRI (EPI)"),
}
CT_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "CT perfusion (cerebral blood flow map)": ("Non-contrast CT", "CT angiography", "Dual-energy bone removal CT"),
}
US_MODES: dict[str, tuple[str, ...]] = {
    "B-mode only (no Doppler)": ("Colour Doppler", "M-mode", "Pulsed-wave spectral Doppler"),
    "Colour Doppler": ("B-mode only (no Doppler)", "M-mode", "Pulsed-wave spectral Doppler"),
}
# Body regions, far enough apart that one image cannot show two of them.
REGION_DISTRACTORS: dict[str, tuple[str, ...]] = {
    "Brain": ("Heart", "Upper abdomen", "Pelvis", "Knee"),
    "Chest": ("Head", "Pelvis", "Knee", "Upper abdomen"),
    "Heart": ("Brain", "Pelvis", "Knee", "Thyroid"),
    "Upper abdomen": ("Brain", "Chest (thorax)", "Pelvis", "Knee"),
    "Shoulder": ("Knee", "Hip", "Ankle", "Wrist"),
    "Lower leg": ("Forearm", "Thigh", "Upper arm", "Foot"),
    "Pelvis": ("Heart", "Thyroid", "Brain", "Knee"),
}
# Differentials of a lucent metaphyseal bone lesion, shown beside the mini cube's one real
# diagnosis (non-ossifying fibroma, 21 characters): one as long as it and two of equal
# shorter length, so that no option is uniquely the longest or the shortest and length
# says nothing of the answer (a leak: a text model learns to avoid either extreme).
BONE_LESION_DIAGNOSES: tuple[str, ...] = ("Chondromyxoid fibroma", "Osteosarcoma", "Bone infarct")
YES_NO: tuple[str, ...] = ("Yes", "No")
# Values of one task's pool that may not be shown together: one would also be right when
# the other is (a time-of-flight angiogram is a T1-weighted gradient echo; a chest image
# shows the heart). "B-mode only (no Doppler)" is worded to exclude colour Doppler.
NOT_EXCLUSIVE: frozenset[frozenset[str]] = frozenset(
    frozenset(p) for p in (
        ("T1-weighted", "Time-of-flight MR angiography"),
        ("Chest", "Heart"),
    )
)  # fmt: skip

# -- question templates -------------------------------------------------------------------

Q_MODALITY = "Which imaging modality was used to acquire this image?"
# View and protocol questions name no modality ("Which MRI sequence...", "Which radiographic
# projection..." told a text-only reader the answer of the image's modality item), and the
# lesion questions of one image never presuppose each other's answer (a leak a text-only model would use).
Q_VIEW = "Which view or imaging plane does this image show?"
Q_PLANE = Q_VIEW
Q_PROJECTION = Q_VIEW
Q_PROTOCOL = "Which imaging protocol or mode produced this image?"
Q_MRI_PROTOCOL = Q_PROTOCOL
Q_CT_PROTOCOL = Q_PROTOCOL
Q_US_MODE = Q_PROTOCOL
Q_REGION = "Which body region or organ is imaged?"
Q_LESION_PRESENT = "Does this image show a focal, well-circumscribed round lesion?"
Q_LESION_QUADRANT = (
    "This image contains one focal, well-circumscribed round lesion. "
    "In which quadrant of the image, as displayed, does it lie?"
)
Q_LESION_SIZE = (
    "This image contains one focal, well-circumscribed round lesion. "
    "Grade its size by its diameter relative to the shorter side of the image."
)


@dataclass(frozen=True, slots=True)
class Fact:
    """One answerable statement about an image and the evidence for it."""

    task: str  # canonical task name
    question: str
    answer: str
    distractors: tuple[str, ...]  # candidates; up to three are used
    derivation: str  # how the answer was derived, quoting the metadata
    original_task: str  # what the source supports ("DICOM Modality tag", "synthetic lesion")
    synthetic: bool = False  # the answer depends on a synthetic modification of the image
    extra: dict[str, Any] = field(default_factory=dict)  # more item metadata

    def __post_init__(self) -> None:
        if self.task not in TASK_BY_NAME:
            raise ValueError(f"Fact.task {self.task!r} is not a canonical task")
        if self.answer in self.distractors or len(set(self.distractors)) != len(self.distractors):
            raise ValueError(f"Fact {self.task}: distractors {self.distractors} repeat or contain the answer {self.answer!r}")
        if not self.distractors:
            raise ValueError(f"Fact {self.task}: needs at least one distractor")


def stable_seed(*parts: str) -> int:
    """A seed that depends on the given strings only (not on Python's hash randomisation)."""
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


class ItemWriter:
    """Turns Facts into release records with balanced answer positions.

    For each (task, number of options) the correct letter cycles A, B, C, D..., so every
    letter is correct equally often within a task (up to one), and distractor order is a
    seeded shuffle of the item id.
    """

    def __init__(self, max_options: int = 4):
        if not 2 <= max_options <= len(LETTERS):
            raise ValueError(f"max_options must be 2..{len(LETTERS)}, got {max_options}")
        self.max_options = max_options
        self._counters: dict[tuple[str, int], int] = {}

    def arrange(self, fact: Fact, item_id: str) -> tuple[list[str], int]:
        rng = np.random.default_rng(stable_seed("options", item_id))
        pool = list(fact.distractors)
        k = min(len(pool), self.max_options - 1)
        chosen = [pool[i] for i in sorted(rng.choice(len(pool), size=k, replace=False))]
        rng.shuffle(chosen)
        n = k + 1
        key = (fact.task, n)
        position = self._counters.get(key, 0) % n
        self._counters[key] = self._counters.get(key, 0) + 1
        options = chosen[:position] + [fact.answer] + chosen[position:]
        return options, position

    def record(
        self,
        fact: Fact,
        *,
        item_id: str,
        dataset: str,
        image_path: str,
        modality: str,
        part: str,
        meta: dict[str, Any],
        arranged: tuple[list[str], int] | None = None,
    ) -> dict[str, Any]:
        """A release-layout record (test.json entry) for one Fact (options as `arranged`, if given)."""
        options, answer = arranged if arranged is not None else self.arrange(fact, item_id)
        rec: dict[str, Any] = {
            "id": item_id,
            "dataset": dataset,
            "image_path": image_path,
            "question": fact.question,
        }
        for letter, text in zip(LETTERS, options, strict=False):
            rec[f"option_{letter}"] = text
        rec.update(
            gt_answer=fact.answer,
            correct_index=LETTERS[answer],
            task=fact.task,
            modality=modality,
            parts=part,
            original_task=fact.original_task,
            restricted=False,
            meta={**meta, **fact.extra, "synthetic": fact.synthetic, "derivation": fact.derivation},
        )
        return rec


# -- Fact builders shared by recipes --------------------------------------------------------


def modality_fact(modality: str, derivation: str, original_task: str = "DICOM Modality tag") -> Fact:
    if modality not in MODALITY_OPTIONS:
        raise ValueError(f"modality {modality!r} has no option text; expected one of {tuple(MODALITY_OPTIONS)}")
    answer = MODALITY_OPTIONS[modality]
    others = tuple(v for k, v in MODALITY_OPTIONS.items() if k != modality)
    return Fact("Modality Recognition", Q_MODALITY, answer, others, derivation, original_task)


def plane_fact(plane: str, derivation: str, original_task: str) -> Fact:
    answer = plane.capitalize()
    if answer not in PLANE_OPTIONS:
        raise ValueError(f"plane {plane!r} is not one of {PLANE_OPTIONS}")
    return Fact("View Recognition", Q_PLANE, answer, tuple(p for p in PLANE_OPTIONS if p != answer), derivation, original_task)


def projection_fact(answer: str, choices: Sequence[str], derivation: str) -> Fact:
    if answer not in choices:
        raise ValueError(f"projection {answer!r} is not one of {tuple(choices)}")
    return Fact(
        "View Recognition", Q_PROJECTION, answer, tuple(c for c in choices if c != answer), derivation,
        "DICOM ViewPosition tag",
    )  # fmt: skip


def protocol_fact(question: str, table: dict[str, tuple[str, ...]], answer: str, derivation: str, original_task: str) -> Fact:
    if answer not in table:
        raise ValueError(f"protocol {answer!r} has no distractor set; expected one of {tuple(table)}")
    return Fact("Imaging Protocol Recognition", question, answer, table[answer], derivation, original_task)


def region_fact(answer: str, derivation: str, original_task: str) -> Fact:
    if answer not in REGION_DISTRACTORS:
        raise ValueError(f"region {answer!r} has no distractor set; expected one of {tuple(REGION_DISTRACTORS)}")
    return Fact("Organ Recognition", Q_REGION, answer, REGION_DISTRACTORS[answer], derivation, original_task)


def lesion_facts(lesion_meta: dict[str, Any] | None) -> list[Fact]:
    """The high-level (and ROI) facts of a synthetic lesion, or the single 'absent' fact."""
    if lesion_meta is None:
        return [
            Fact(
                "Abnormality Diagnosis", Q_LESION_PRESENT, "No", ("Yes",),
                "No synthetic lesion was inserted and the unmodified source image shows no focal round lesion "
                "(no such finding is documented for it).",
                "synthetic lesion: presence", synthetic=True,
            )
        ]  # fmt: skip
    quadrant, size = lesion_meta["quadrant"], lesion_meta["size_class"]
    sizes = {s.name: s.label() for s in SIZE_CLASSES}
    where = (
        f"synthetic {lesion_meta['polarity']} disc drawn by the builder at row/col {lesion_meta['center_row_col']}, "
        f"diameter {lesion_meta['diameter_px']} px = {lesion_meta['diameter_fraction']:.1%} of the shorter side"
    )
    return [
        Fact("Abnormality Diagnosis", Q_LESION_PRESENT, "Yes", ("No",), f"Present by construction: {where}.",
             "synthetic lesion: presence", synthetic=True),
        Fact("ROI Grounding", Q_LESION_QUADRANT, quadrant.capitalize(),
             tuple(q.capitalize() for q in QUADRANTS if q != quadrant),
             f"Quadrant by construction (the whole disc lies inside it): {where}.",
             "synthetic lesion: location", synthetic=True),
        Fact("Severity Grading", Q_LESION_SIZE, sizes[size], tuple(v for k, v in sizes.items() if k != size),
             f"Size class by construction: {where}.", "synthetic lesion: size class", synthetic=True),
    ]  # fmt: skip
