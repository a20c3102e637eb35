"""Every number of a construction recipe refuses NaN, infinities and out-of-range values
in one line naming the recipe file, the key and the fix (issue 25).

The recipe is written as a user writes it (YAML `.nan`, `.inf`, `-.inf`, `1.0e+400`,
negatives) and read by `load_recipe`, the reader `medrcube build` uses; the source
folder exists (empty: parsing a recipe reads no image).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from medrcube.construction.recipe import RecipeError, load_recipe

# Every number a recipe holds: placeholder -> (its good value, the key the error must name).
NUMBERS = {
    "version": ("1", "version"),
    "slices": ("1", "sources[0].slices"),
    "per_cell": ("3", "targets.per_cell"),
    "cell": ("40", "targets.cells"),
    "options": ("4", "items.options"),
    "similar_fraction": ("0.5", "items.similar_fraction"),
    "retries": ("2", "review.retries"),
    "review_concurrency": ("4", "review.concurrency"),
    "temperature": ("0", "review.params.temperature"),
    "max_tokens": ("16", "review.params.max_tokens"),
    "mask": ("0.1", "privacy.mask"),
    "review_frames": ("30", "privacy.review_frames"),
    "prior_margin": ("0.1", "audit.prior_margin"),
    "sibling_margin": ("0.1", "audit.sibling_margin"),
    "length_margin": ("0.1", "audit.length_margin"),
    "letter_band": ("0.99", "audit.letter_band"),
    "constant_letter_grounding": ("0.05", "audit.constant_letter_grounding"),
    "max_side": ("512", "export.max_side"),
}

RECIPE = """\
version: {version}
name: site-numbers
sources:
  - kind: dicom-folder
    path: dicom
    slices: {slices}
targets:
  per_cell: {per_cell}
  cells: {{"Chest/X-Ray/Disease Diagnosis": {cell}}}
items:
  options: {options}
  similar_fraction: {similar_fraction}
review:
  model: random
  retries: {retries}
  concurrency: {review_concurrency}
  params: {{temperature: {temperature}, max_tokens: {max_tokens}}}
privacy:
  burned_in: mask
  mask: [[0, 0, 1, {mask}]]
  review_frames: {review_frames}
audit:
  prior_margin: {prior_margin}
  sibling_margin: {sibling_margin}
  length_margin: {length_margin}
  letter_band: {letter_band}
  constant_letter_grounding: {constant_letter_grounding}
export:
  max_side: {max_side}
"""

# (YAML 1.1 reads "1e400" as a string; "1.0e+400" is the float that overflows to infinity)
_NONFINITE = st.sampled_from([".nan", ".NaN", ".inf", "-.inf", "+.inf", "1.0e+400", "-1.0e+400"])
# below every key's minimum (constant_letter_grounding is a correlation: -1 is its floor)
_NEGATIVE = st.one_of(st.integers(min_value=-10**9, max_value=-2).map(str),
                      st.floats(min_value=-1e9, max_value=-1.001).map(lambda v: f"{v:.6f}"))


def _write(tmp: Path, **bad: str) -> Path:
    (tmp / "dicom").mkdir(exist_ok=True)
    values = {name: good for name, (good, _) in NUMBERS.items()} | bad
    path = tmp / "recipe.yaml"
    path.write_text(RECIPE.format(**values), encoding="utf-8")
    return path


def test_the_recipe_with_good_numbers_loads(tmp_path: Path) -> None:
    recipe = load_recipe(_write(tmp_path))
    assert recipe.per_cell == 3 and recipe.options == 4 and recipe.export.max_side == 512
    assert recipe.review is not None and recipe.review.params == {"temperature": 0, "max_tokens": 16}
    assert recipe.privacy.mask == ((0.0, 0.0, 1.0, 0.1),) and recipe.audit.letter_band == 0.99


@pytest.mark.parametrize("name", sorted(NUMBERS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(_NONFINITE, _NEGATIVE))
def test_every_recipe_number_refuses_nan_inf_and_negatives(tmp_path: Path, name: str, value: str) -> None:
    path = _write(tmp_path, **{name: value})
    with pytest.raises(RecipeError) as exc:
        load_recipe(path)
    message = str(exc.value)
    key = NUMBERS[name][1]
    assert "\n" not in message and "Traceback" not in message, message
    assert message.startswith(f"{path}: ") and repr(key) in message, (key, message)
    assert "; " in message.split(repr(key), 1)[1], message  # the problem, then the fix


def test_a_negative_penalty_for_the_reviewer_is_a_value_not_a_mistake(tmp_path: Path) -> None:
    path = _write(tmp_path)
    path.write_text(path.read_text(encoding="utf-8").replace("max_tokens: 16}", "max_tokens: 16, frequency_penalty: -0.5}"),
                    encoding="utf-8")
    review = load_recipe(path).review
    assert review is not None and review.params["frequency_penalty"] == -0.5


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corner=st.integers(min_value=0, max_value=3), value=st.one_of(_NONFINITE, _NEGATIVE))
def test_a_region_rule_zone_refuses_nan_inf_and_negatives(tmp_path: Path, corner: int, value: str) -> None:
    """The recipe's own region-rule table (`privacy.region_rules: FILE`): its zones are numbers too."""
    from medrcube.construction.privacy.regions import RegionRuleError, load_table

    zone = ["0", "0", "1", "0.1"]
    zone[corner] = value
    path = tmp_path / "regions.yaml"
    path.write_text(f"version: 1\nrules:\n  - modality: US\n    zones: [[{', '.join(zone)}]]\n    why: the banner\n",
                    encoding="utf-8")
    with pytest.raises(RegionRuleError) as exc:
        load_table(path)
    message = str(exc.value)
    assert "\n" not in message and message.startswith(f"{path}: rules[0]: zone "), message
    assert "give fractions of the width and height" in message, message
