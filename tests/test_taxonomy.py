"""The taxonomy's part axis: the paper's five parts, the parts the project's own cubes use
(known, no warning, but not MedRCube parts), and genuinely unknown values kept as written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from medrcube import taxonomy
from medrcube.taxonomy import EXTRA_PARTS, KNOWN_PARTS, PARTS, canonical_part

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("raw", ["Abdomen", "pelvis", "SHOULDER", "lower limb", "Lower-Limb", "Knee", "abdominal", "lower extremity"])
def test_the_project_s_own_parts_are_known(raw: str) -> None:
    c = canonical_part(raw)
    assert c.known and c.value in EXTRA_PARTS


@pytest.mark.parametrize("raw", ["Elbow", "Tail", "Abdomenn", "Lower Limbs x"])
def test_a_genuinely_unknown_part_is_kept_as_written_and_not_known(raw: str) -> None:
    c = canonical_part(raw)
    assert not c.known and c.value == raw


def test_extra_parts_are_not_medrcube_parts() -> None:
    # Table 1 and every comparison with the paper iterate PARTS: the extras stay outside it.
    assert set(PARTS).isdisjoint(EXTRA_PARTS)
    assert KNOWN_PARTS == PARTS + EXTRA_PARTS
    assert taxonomy.PARTS == ("Brain", "Chest", "Heart", "Lungs", "Breast")


def test_every_part_of_the_construction_vocabulary_is_known() -> None:
    """Site cubes name their parts through the bundled vocabulary: none may warn."""
    vocab = yaml.safe_load((REPO / "src" / "medrcube" / "construction" / "stages" / "vocabulary.yaml").read_text(encoding="utf-8"))
    parts = {entry["part"] for entry in vocab["body_part"].values()}
    assert parts and all(canonical_part(p).known for p in parts), sorted(p for p in parts if not canonical_part(p).known)


def test_the_bundled_mini_cube_loads_without_an_unknown_part_warning() -> None:
    from medrcube.cube import load_cube

    cube = load_cube(REPO / "fixtures" / "mini")
    assert [p for p in cube.problems if p.reason == "unknown_part"] == []
    assert {"Abdomen", "Pelvis", "Shoulder", "Lower Limb"} <= {i.part for i in cube}
