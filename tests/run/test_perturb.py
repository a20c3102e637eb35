"""Image perturbations: determinism, size and mode limits, applicability, the plan's keys."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medrcube.cube import load_cube
from medrcube.cube.item import Item
from medrcube.run.perturb import (
    Perturbation,
    PerturbationError,
    decode,
    parse_perturbation,
    perturb_image,
    roi_box,
    roi_kept,
)
from medrcube.run.plan import plan_asks
from medrcube.run.variants import parse_variants

MINI = Path(__file__).resolve().parents[2] / "fixtures" / "mini"
EVERY = ["jpeg:30", "lowres:64", "noise:0.03", "poisson:0.05", "window:0.8", "brightness:-0.1", "rotate:5",
         "crop:0.9", "flip", "noise:0.03@7"]


def _png(mode: str, size: tuple[int, int]) -> bytes:
    rng = np.random.default_rng(1)
    if mode == "I;16":
        im = Image.fromarray(rng.integers(0, 4096, size[::-1], dtype=np.uint16))
    elif mode == "RGBA":
        im = Image.fromarray(rng.integers(0, 256, (*size[::-1], 4), dtype=np.uint8), mode="RGBA")
    elif mode == "P":
        im = Image.fromarray(rng.integers(0, 256, size[::-1], dtype=np.uint8), mode="L").convert("P")
    else:
        im = Image.fromarray(rng.integers(0, 256, (*size[::-1], 3), dtype=np.uint8), mode="RGB").convert(mode)
    buf = io.BytesIO()
    im.save(buf, format="TIFF" if mode == "CMYK" else "PNG")  # PNG cannot hold CMYK
    return buf.getvalue()


@pytest.mark.parametrize("spec", EVERY)
def test_same_parameters_and_seed_give_the_same_bytes(spec: str) -> None:
    data = _png("L", (120, 80))
    p = parse_perturbation(spec)
    first = perturb_image(p, data)
    assert first is not None and first == perturb_image(parse_perturbation(spec), data)
    assert first != data


def test_the_seed_and_the_source_change_the_noise() -> None:
    data = _png("L", (64, 64))
    a = perturb_image(parse_perturbation("noise:0.05"), data)
    b = perturb_image(parse_perturbation("noise:0.05@1"), data)
    other = perturb_image(parse_perturbation("noise:0.05"), data, source_digest="another image")
    assert len({a, b, other}) == 3


@pytest.mark.parametrize("mode", ["L", "RGB", "I;16", "RGBA", "P", "CMYK", "LA"])
@pytest.mark.parametrize("spec", ["jpeg:30", "noise:0.03", "rotate:-7", "lowres:32", "crop:0.8"])
def test_output_is_8_bit_l_or_rgb_within_max_side(mode: str, spec: str) -> None:
    data = _png(mode, (300, 150))
    out = perturb_image(parse_perturbation(spec), data, max_side=128)
    assert out is not None
    im = Image.open(io.BytesIO(out))
    assert im.mode in ("L", "RGB")
    assert max(im.size) <= 128
    assert im.size == (128, 64)  # the aspect ratio is kept
    assert im.format == ("JPEG" if spec.startswith("jpeg") else "PNG")


def test_sixteen_bit_pixels_are_windowed_over_their_range() -> None:
    arr = np.linspace(1000, 3000, 64 * 64).reshape(64, 64).astype(np.uint16)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    pixels, size = decode(buf.getvalue())
    assert size == (64, 64) and pixels.min() == 0.0 and pixels.max() == 1.0


def test_each_kind_changes_what_it_says() -> None:
    flat = np.full((64, 64), 128, np.uint8)
    ramp = np.tile((np.arange(64) * 4).astype(np.uint8), (64, 1))

    def run(spec: str, arr: np.ndarray) -> np.ndarray:
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="PNG")
        out = perturb_image(parse_perturbation(spec), buf.getvalue())
        assert out is not None
        return np.asarray(Image.open(io.BytesIO(out)), dtype=np.float64)

    assert abs(run("noise:0.05", flat).std() - 0.05 * 255) < 1.0
    assert run("brightness:0.1", flat).mean() == pytest.approx(128 + 25.5, abs=1)
    assert np.array_equal(run("flip", ramp), ramp[:, ::-1])
    windowed = run("window:0.5", ramp)
    assert windowed.min() == 0 and windowed.max() == 255  # narrower window: clipped, more contrast
    low = run("lowres:16", ramp)
    assert low.shape == ramp.shape and np.abs(low - ramp).max() > 5
    assert run("rotate:10", ramp)[0, 0] == 0  # corners filled with black


def test_spec_grammar_and_errors() -> None:
    assert parse_perturbation("JPEG:30").spec == "jpeg:30"
    assert parse_perturbation("noise:0.030").spec == "noise:0.03"
    assert parse_perturbation("noise:0.03@7").seed == 7
    for bad, words in [("jpeg", "needs a level"), ("jpeg:0", "outside"), ("jpeg:30.5", "integer"),
                       ("noise:x", "not a number"), ("flip:1", "no level"), ("rotate:45", "outside"),
                       ("noise:0.1@x", "seed"), ("crop:1", "outside")]:
        with pytest.raises(PerturbationError, match=words):
            parse_perturbation(bad)


def test_variant_grammar_takes_perturbations_at_several_levels() -> None:
    vs = parse_variants("standard,jpeg:30,lowres:256,noise:0.03,window:0.8,jpeg:70")
    assert [v.spec for v in vs] == ["standard", "jpeg:30", "lowres:256", "noise:0.03", "window:0.8", "jpeg:70"]
    assert vs[1].instances(4) == [("jpeg:30", 0)]
    with pytest.raises(ValueError, match="appears twice"):
        parse_variants("jpeg:30,jpeg:30.0")
    with pytest.raises(ValueError, match="jpeg:Q"):
        parse_variants("jpg:30")
    with pytest.raises(ValueError, match="needs a level"):
        parse_variants("standard,noise")


def _item(task: str, question: str = "Which organ is shown?", options: tuple[str, ...] = ("Brain", "Heart")) -> Item:
    return Item(id="x", dataset="d", image="i.png", question=question, options=options, answer=0, task=task,
                modality="CT", part="Chest")


@pytest.mark.parametrize("task", ["ROI Grounding"])
def test_flip_never_applies_to_roi_grounding(task: str) -> None:
    flip = parse_perturbation("flip")
    it = _item(task, "In which quadrant does the lesion lie?", ("Upper part", "Lower part"))
    assert not flip.applies_to_item(it.task, it.question, it.options)


@pytest.mark.parametrize("question,options", [
    ("Is the effusion on the left side?", ("Yes", "No")),
    ("Which lung is affected?", ("Left lung", "Right lung")),
    ("Where is the fracture?", ("Contralateral femur", "Tibia")),
])
def test_flip_never_applies_to_a_laterality_dependent_item(question: str, options: tuple[str, ...]) -> None:
    flip = parse_perturbation("flip")
    assert not flip.applies_to_item("Disease Diagnosis", question, options)
    assert parse_perturbation("noise:0.03").applies_to_item("Disease Diagnosis", question, options)


def test_flip_applies_where_the_side_does_not_matter() -> None:
    assert parse_perturbation("flip").applies_to_item("Modality Recognition", "Which modality?", ("CT", "MRI"))
    assert not parse_perturbation("crop:0.9").applies_to_task("Severity Grading")


def test_the_plan_never_flips_a_laterality_dependent_item_of_the_mini_cube() -> None:
    cube = load_cube(MINI)
    plan = plan_asks(cube, "standard,flip", fingerprint="f")
    flipped = {a.item.id for a in plan if a.variant == "flip"}
    assert flipped
    for item in cube.items:
        text = " ".join((item.question, *item.options)).lower()
        if item.task == "ROI Grounding" or "left" in text or "right" in text:
            assert item.id not in flipped


def test_roi_is_kept_by_rotation_and_crop_or_the_item_is_left_out() -> None:
    meta = {"lesion": {"center_row_col": [10, 10], "diameter_px": 8}}
    box = roi_box(meta)
    assert box == (6.0, 6.0, 14.0, 14.0)
    assert not roi_kept(Perturbation("crop", 0.8), (100, 100), box)  # the corner is cut off
    assert roi_kept(Perturbation("crop", 0.8), (100, 100), roi_box({"bbox": [40, 40, 60, 60]}))
    assert not roi_kept(Perturbation("rotate", 15), (100, 100), (0, 0, 8, 8))
    # ROI Grounding: a lesion near the midline that a rotation moves to another quadrant
    assert roi_kept(Perturbation("rotate", 10), (100, 100), (50.5, 20, 52, 22))
    assert not roi_kept(Perturbation("rotate", 10), (100, 100), (50.5, 20, 52, 22), "ROI Grounding")
    assert roi_kept(Perturbation("noise", 0.1), (100, 100), (0, 0, 1, 1))


def test_the_store_key_is_that_of_the_bytes_sent() -> None:
    cube = load_cube(MINI)
    plan = plan_asks(cube, ["standard", "jpeg:30", "noise:0.03"], fingerprint="f")
    std = {a.item.id: a for a in plan if a.variant == "standard"}
    for ask in (a for a in plan if a.variant != "standard"):
        (image,) = ask.images
        sent = image.read()
        assert hashlib.sha256(sent).hexdigest() == image.digest
        assert image.digest != std[ask.item.id].images[0].digest
        assert ask.image_digest == std[ask.item.id].image_digest  # the record keeps the item's image
        assert ask.key != std[ask.item.id].key
    again = plan_asks(cube, ["standard", "jpeg:30", "noise:0.03"], fingerprint="f")
    assert [a.key for a in again] == [a.key for a in plan]
    # items on one image see the same perturbed image
    by_image: dict[str, set[str]] = {}
    for a in plan:
        if a.variant == "noise:0.03":
            by_image.setdefault(a.image_digest or "", set()).add(a.images[0].digest)
    assert all(len(v) == 1 for v in by_image.values())


def test_max_side_caps_the_perturbed_image() -> None:
    cube = load_cube(MINI)
    plan = plan_asks(cube, ["noise:0.03"], fingerprint="f", image_max_side=64)
    for ask in plan[:20]:
        im = Image.open(io.BytesIO(ask.images[0].read()))
        assert max(im.size) <= 64 and im.mode in ("L", "RGB")


def test_the_roi_rule_follows_the_pixels_of_a_rotation() -> None:
    # a bright square near the top right; rotate:15 (counter-clockwise as displayed)
    # moves it up-left, towards the top edge: roi_kept must predict where it goes
    arr = np.zeros((100, 100), np.uint8)
    arr[8:16, 70:78] = 255
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    out = perturb_image(parse_perturbation("rotate:15"), buf.getvalue())
    assert out is not None
    moved = np.asarray(Image.open(io.BytesIO(out)), dtype=np.float64)
    ys, xs = np.nonzero(moved > 128)
    assert ys.mean() < 12 - 3 and xs.mean() < 74  # up and to the left
    assert not roi_kept(Perturbation("rotate", 15), (100, 100), (70, 2, 78, 10))  # pushed off the top
    assert roi_kept(Perturbation("rotate", -15), (100, 100), (70, 2, 78, 10))  # clockwise: down, stays in
