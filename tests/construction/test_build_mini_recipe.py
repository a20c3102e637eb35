"""The mini cube's recipe modules on their own: lesion copies, conspicuous placements, unique
stems, and the facts each image is asked (the whole cube is checked in test_build_mini_fixture)."""

from __future__ import annotations

import numpy as np
import pytest

from medrcube.construction.mini.assembly import choose_facts, read_pictures
from medrcube.construction.mini.common import LESION_TASKS, LOCATION_TASKS, Picture, pydicom_file
from medrcube.construction.mini.placement import conspicuity, copies, draw_lesion, lesion_plan, split_presence
from medrcube.construction.stages.questions import modality_fact, plane_fact


def _picture(**kw: object) -> Picture:
    yy, xx = np.mgrid[0:128, 0:128]
    body = (np.hypot(yy - 64, xx - 64) < 60).astype(float) * 0.4
    base = dict(
        dataset="t", stem="s", pixels=body, modality="CT", part="Chest", source=pydicom_file("CT_small.dcm"),
        locator="the single slice", processing="none",
        facts=[modality_fact("CT", "tag"), plane_fact("axial", "iop", "iop")], normal_ok=True,
    )  # fmt: skip
    base.update(kw)
    return Picture(**base)  # type: ignore[arg-type]


def test_copies_put_the_unmodified_slice_first_and_ask_presence_only_as_often_as_told() -> None:
    out = copies(_picture(), 5, normal=True, presence=1)
    assert [p.stem for p in out] == ["s_n", "s_l01", "s_l02", "s_l03", "s_l04", "s_l05"]
    assert [p.lesion for p in out] == [False, True, True, True, True, True]
    assert out[1].lesion_tasks == LESION_TASKS
    assert all(p.lesion_tasks == LOCATION_TASKS for p in out[2:])
    assert all(p.lesion_tasks == LESION_TASKS for p in copies(_picture(), 3, normal=False))  # presence=None: all ask it


def test_a_source_never_asked_no_lesion_gets_no_unmodified_copy() -> None:
    with pytest.raises(ValueError, match="may not be asked 'no lesion'"):
        copies(_picture(normal_ok=False), 2, normal=True)


def test_copies_of_one_slice_ask_its_view_once_and_every_image_is_a_chain() -> None:
    views: set[tuple[str, str, str]] = set()
    plan = lesion_plan()
    asked = []
    for p in copies(_picture(), 3, normal=True, presence=1):
        _, meta = draw_lesion(p, plan, np.random.default_rng(1))
        asked.append([f.task for f in choose_facts(p, meta, views)])
    assert asked[0] == ["Modality Recognition", "View Recognition", "Abnormality Diagnosis"]
    assert asked[1] == ["Modality Recognition", "ROI Grounding", "Abnormality Diagnosis", "Severity Grading"]
    assert asked[2] == ["Modality Recognition", "ROI Grounding", "Severity Grading"]


def test_conspicuity_measures_the_disc_against_its_ring() -> None:
    img = np.full((100, 100), 0.3)
    yy, xx = np.mgrid[0:100, 0:100]
    d = np.hypot(yy - 50, xx - 50)
    img[d <= 10] = 0.8
    assert conspicuity(img, (50, 50), 10) == pytest.approx(0.5)
    img[(d >= 14) & (d <= 20)] = 0.9  # a brighter ring: the disc does not stand out
    assert conspicuity(img, (50, 50), 10) < 0


def test_drawn_lesions_stand_out_and_a_picture_with_no_room_is_refused() -> None:
    plan = lesion_plan()
    for seed in range(6):
        pixels, meta = draw_lesion(_picture(lesion=True), plan, np.random.default_rng(seed))
        assert meta is not None and conspicuity(pixels, tuple(meta["center_row_col"]), meta["diameter_px"] / 2) > 0
    with pytest.raises(RuntimeError, match="no quadrant and size fits"):
        draw_lesion(_picture(lesion=True, allowed=np.zeros((128, 128), dtype=bool)), plan, np.random.default_rng(0))


def test_picture_stems_must_be_unique_within_a_dataset() -> None:
    with pytest.raises(RuntimeError, match="stems repeat"):
        read_pictures([lambda: [_picture(), _picture()]])


def test_presence_and_location_of_one_lesion_are_asked_on_different_images() -> None:
    """Issue 28: "This image contains one lesion. Where..." beside "Is there a lesion?"
    answers the latter from text; a picture asking both becomes two images."""
    split = split_presence(copies(_picture(), 2, normal=True, presence=1))
    tasks = [p.lesion_tasks for p in split if p.lesion]
    assert tasks == [("Abnormality Diagnosis",), ("ROI Grounding", "Severity Grading"), ("ROI Grounding", "Severity Grading")]
    assert len({p.stem for p in split}) == len(split)
