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


def test_a_json_sidecar_states_them_for_a_nifti_volume_or_a_plain_image(tmp_path: Path) -> None:
    import json

    from medrcube.construction.privacy.coarse import from_sidecar, sidecar_of

    spec = AttributesSpec(keep=("sex", "age_band", "manufacturer", "model", "site"), models={"Prisma": "PRISMA"})
    vol, png = tmp_path / "sub-01_T1w.nii.gz", tmp_path / "case7.png"
    assert (sidecar_of(vol).name, sidecar_of(png).name) == ("sub-01_T1w.json", "case7.json")
    # BIDS spellings and plain keys; a free-text field beside them is never read.
    sidecar_of(vol).write_text(json.dumps({"PatientSex": "F", "PatientAge": "067Y", "Manufacturer": "Siemens Healthineers",
                                           "ManufacturersModelName": "Prisma", "PatientName": "Doe^Jane"}), "utf-8")
    sidecar_of(png).write_text(json.dumps({"sex": "male", "age": 94.5, "manufacturer": "Acme"}), "utf-8")
    assert from_sidecar(vol, spec, "NORTH") == {"sex": "female", "age_band": "60-69", "manufacturer": "Siemens",
                                                "model": "PRISMA", "site": "NORTH"}
    assert from_sidecar(png, spec, None) == {"sex": "male", "age_band": "90+", "manufacturer": "unknown",
                                             "model": "unknown", "site": "unknown"}
    assert from_sidecar(tmp_path / "none.png", spec, "NORTH") == {"site": "NORTH"}  # no sidecar: the source's own
    sidecar_of(png).write_text("[1, 2]", "utf-8")
    with pytest.raises(ValueError, match=r"case7\.json: a sidecar must be a JSON object"):
        from_sidecar(png, spec, None)


def test_the_nifti_reader_carries_the_sidecars_attributes_into_every_slice(tmp_path: Path) -> None:
    import json

    import nibabel as nib
    import numpy as np

    from medrcube.construction.privacy.safeguards import Manifest
    from medrcube.construction.readers.nifti_folder import read_nifti_folder
    from medrcube.construction.readers.tabular import SourceLog

    folder = tmp_path / "mri"
    folder.mkdir()
    vol = np.random.default_rng(0).integers(1, 200, size=(8, 8, 8)).astype(np.int16)
    for name in ("sub-01_T1w", "sub-02_T1w", "sub-03_T1w"):
        nib.save(nib.Nifti1Image(vol, np.eye(4)), folder / f"{name}.nii.gz")
    (folder / "sub-01_T1w.json").write_text(json.dumps({"PatientSex": "M", "PatientAge": "045Y"}), "utf-8")
    (folder / "sub-03_T1w.json").write_text("{not json", "utf-8")
    data = {"version": 1, "name": "site", "attributes": {"keep": ["sex", "age_band", "site"]},
            "sources": [{"kind": "nifti-folder", "path": "mri", "modality": "MRI", "part": "Brain", "site": "WEST",
                         "planes": ["axial"]}]}
    r = parse_recipe(data, tmp_path / "recipe.yaml")
    log = SourceLog()
    images = list(read_nifti_folder(r.sources[0], r.privacy, Manifest(), {}, log))
    # sub-02 has no sidecar and sub-03 an unreadable one: the source's own (site), named on the log.
    assert [i.attributes for i in images] == [{"sex": "male", "age_band": "40-49", "site": "WEST"},
                                              {"site": "WEST"}, {"site": "WEST"}]
    assert log.counts["unreadable attributes sidecar"] == 1
