"""The recipe's `attributes` section and a source's `site`: codes only, never free text, and
the coarse attributes generalised from a raw header (privacy/coarse.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from medrcube.construction.privacy.coarse import from_header
from medrcube.construction.recipe import AttributesSpec, RecipeError, parse_recipe


def _recipe(tmp_path: Path, attributes: object, site: object = "NORTH") -> object:
    (tmp_path / "dicom").mkdir(exist_ok=True)
    data = {"version": 1, "name": "site", "sources": [{"kind": "dicom-folder", "path": "dicom", "site": site}],
            "attributes": attributes}
    return parse_recipe(data, tmp_path / "recipe.yaml")


def test_the_section_reaches_every_source_with_its_site(tmp_path: Path) -> None:
    r = _recipe(tmp_path, {"keep": ["sex", "site"], "site": "MAIN", "models": {"Ingenuity CT": "INGENUITY"}})
    src = r.sources[0]
    assert src.site == "NORTH" and src.attributes == AttributesSpec(("sex", "site"), "MAIN", {"Ingenuity CT": "INGENUITY"})


@pytest.mark.parametrize(("attributes", "site", "key"), [
    ({"keep": ["ethnicity"]}, "NORTH", "attributes.keep"),
    ({"site": "Saint Elsewhere Memorial Hospital"}, "NORTH", "attributes.site"),
    ({"models": {"Discovery CT750 HD": "a model name that is far too long to be a short code"}}, "NORTH",
     "attributes.models"),
    ({}, "North Campus, 42 Magrathea Way", "sources[0].site"),
])
def test_free_text_is_refused_naming_the_key(tmp_path: Path, attributes: object, site: object, key: str) -> None:
    with pytest.raises(RecipeError, match=key.replace(".", r"\.").replace("[", r"\[").replace("]", r"\]")):
        _recipe(tmp_path, attributes, site)


def test_a_raw_header_is_generalised_to_the_vocabulary() -> None:
    spec = AttributesSpec(models={"SOMATOM Definition AS": "DEF-AS"})
    header = {"PatientSex": "F", "PatientAge": "093Y", "Manufacturer": "SIEMENS", "ManufacturerModelName":
              "SOMATOM Definition AS", "PatientBirthDate": "19300101", "StudyDate": "20230714"}
    assert from_header(header, spec, "NORTH") == {"sex": "female", "age_band": "90+", "manufacturer": "Siemens",
                                                  "model": "DEF-AS", "site": "NORTH", "protocol": "unknown"}
    no_age = {"PatientSex": "M", "PatientBirthDate": "19610523", "StudyDate": "20230714",
              "Manufacturer": "Acme", "ManufacturerModelName": "X1"}
    assert from_header(no_age, spec, None) == {"sex": "male", "age_band": "60-69", "manufacturer": "unknown",
                                               "model": "unknown", "site": "unknown", "protocol": "unknown"}
    assert from_header(header, AttributesSpec(keep=("sex",)), "NORTH") == {"sex": "female"}
