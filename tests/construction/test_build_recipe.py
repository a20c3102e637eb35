"""The recipe schema: the bundled recipes load, and every mistake names the file, the key, the value and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from medrcube.construction.recipe import RecipeError, load_recipe, parse_recipe
from medrcube.taxonomy import TASK_NAMES

REPO = Path(__file__).resolve().parents[2]


def test_the_bundled_recipes_load(demo_root: Path, site_recipe) -> None:
    mini = load_recipe(REPO / "recipes" / "mini.yaml")
    assert mini.package_only and mini.sources[0].builder == "mini" and mini.export.release == "." and mini.export.hf is None
    assert mini.out == REPO / "fixtures" / "mini"
    site = load_recipe(site_recipe(demo_root, "site-load"))
    assert [s.kind for s in site.sources] == ["dicom-folder", "images-csv", "nifti-folder"]
    assert site.tasks == TASK_NAMES and site.per_cell == 24 and site.cell_targets == {("Chest", "X-Ray", "Disease Diagnosis"): 30}
    cxr = site.sources[1]
    assert cxr.modality == "X-Ray" and cxr.labels.private == ("patient_id", "patient_name")
    assert cxr.labels.columns["diagnosis"] == "dx" and cxr.labels.columns["path"] == "file"
    assert site.severity.scale == ("Mild", "Moderate", "Severe") and site.privacy.mask == ((0.0, 0.0, 1.0, 0.1),)
    assert site.sources[0].path == demo_root / "build" / "demo-site" / "dicom"  # relative to the recipe, normalised


def test_the_site_example_asks_enough_items_per_cell_for_the_default_policy(demo_root: Path, site_recipe) -> None:
    """Issue 12: a site cube needs enough items per cell for the gate to decide. The example's
    per-cell target is at least every per-cell min_n of thresholds.yaml, and at least 24
    (where 24 all-wrong answers already put the Wilson upper bound at 0.14)."""
    import yaml

    policy = yaml.safe_load((REPO / "thresholds.yaml").read_text(encoding="utf-8"))
    cell_min_n = [policy["min_n"]] if isinstance(policy.get("min_n"), int) else []
    # Since issue 12 the cells inherit min_n from `defaults` (it only binds the point rule).
    defaults = policy.get("defaults") or {}
    cell_min_n += [defaults["min_n"]] if isinstance(defaults.get("min_n"), int) else []
    cell_min_n += [e["min_n"] for e in policy.get("cells") or [] if isinstance(e, dict) and isinstance(e.get("min_n"), int)]
    assert cell_min_n, "thresholds.yaml names no per-cell min_n: update this test to the policy's layout"
    site = load_recipe(site_recipe(demo_root, "site-policy"))
    assert site.per_cell is not None and site.per_cell >= max(24, *cell_min_n)
    assert all(n >= site.per_cell for n in site.cell_targets.values())


def _errors(demo_root: Path, site_recipe, change) -> str:
    path = site_recipe(demo_root, "site-bad")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    with pytest.raises(RecipeError) as exc:
        parse_recipe(data, path)
    text = str(exc.value)
    assert text.startswith(str(path)), text
    return text


def _set(path: str, value):
    def change(data):
        node = data
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value

    return change


_DELETE = object()


@pytest.mark.parametrize(
    "path, value, expected",
    [
        ("version", 2, "key 'version' must be 1"),
        ("sources.0.kind", "dicom", "key 'sources[0].kind' is not one of dicom-folder, nifti-folder, images-csv, package-images (did you mean 'dicom-folder'?)"),
        ("sources.0.sliecs", 2, "unknown key 'sources[0].sliecs' (did you mean 'slices'"),
        ("sources.0.path", "no/such/dir", "key 'sources[0].path' names no folder"),
        ("sources.0.slices", 0, "key 'sources[0].slices' must be an integer 1..64"),
        ("sources.1.modality", "Xray-ish", "is not a known modality"),
        ("sources.1.labels.columns.diagnosis", "diagnosis_code", "column 'diagnosis_code' is not in"),
        ("sources.1.labels.columns.diagnosys", "dx", "maps an unknown label field (did you mean 'diagnosis'?)"),
        ("sources.1.labels.private", ["dx"], "is also read as a label; a private column is never read"),
        ("sources.1.labels", _DELETE, "an images-csv source needs a labels CSV"),
        ("tasks", ["Disease Diagnosis", "Organ Recogniton"], "names an unknown task (did you mean 'Organ Recognition'"),
        ("targets.per_cell", -3, "key 'targets.per_cell' must be an integer at least 1"),
        ("targets.cells", {"Chest/X-Ray": 3}, "is not PART/MODALITY/TASK"),
        ("labels.severity.scale", "three_grades", "is not a bundled scale (did you mean 'three_grade'?)"),
        ("labels.severity.values", {"mild": "Light"}, "maps 'mild' to a grade not on the scale"),
        ("items.options", 9, "key 'items.options' must be an integer 2..6"),
        ("items.similar_fraction", 1.5, "must be a number in [0.0, 1.0]"),
        ("templates", {"diagnosis": "What is the {answer}?"}, "template 'diagnosis' uses {answer}; allowed placeholders: {image}, {region}"),
        ("templates", {"diagnoses": "Which?"}, "unknown template 'diagnoses' (did you mean 'diagnosis'?)"),
        ("privacy.burned_in", "blur", "is not one of refuse, mask"),
        ("privacy.mask", [[0, 0, 2, 0.1]], "has a box that is not [x0, y0, x1, y1]"),
        ("export.release", "../elsewhere", "must be a folder inside the output directory"),
        ("export.formats", ["hf"], "unknown key 'export.formats'"),
        ("review", {"model": "openai:m", "retry": 3}, "unknown key 'review.retry' (did you mean 'retries'?)"),
        ("reveiw", {"model": "openai:m"}, "unknown key 'reveiw' (did you mean 'review'?)"),
    ],
)
def test_mistakes_are_named_with_their_fix(demo_root: Path, site_recipe, path: str, value, expected: str) -> None:
    text = _errors(demo_root, site_recipe, _set(path, value))
    assert expected in text, text


def test_package_images_cannot_be_mixed_or_configured(tmp_path: Path) -> None:
    base = {"version": 1, "name": "mini", "sources": [{"kind": "package-images", "builder": "mini"}]}
    with pytest.raises(RecipeError, match="key 'targets' does not apply to a package-images source"):
        parse_recipe({**base, "targets": {"per_cell": 3}}, tmp_path / "r.yaml")
    with pytest.raises(RecipeError, match=r"is not one of mini \(did you mean 'mini'\?\)"):
        parse_recipe({**base, "sources": [{"kind": "package-images", "builder": "mimi"}]}, tmp_path / "r.yaml")
    with pytest.raises(RecipeError, match="cannot be combined with other sources"):
        parse_recipe({**base, "sources": [base["sources"][0], {"kind": "images-csv", "path": "."}]}, tmp_path / "r.yaml")


def test_unreadable_recipes(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="recipe file not found"):
        load_recipe(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: [unclosed\n", encoding="utf-8")
    with pytest.raises(RecipeError, match="not valid YAML"):
        load_recipe(bad)
    bad.write_text("version: 1\nname: a\nname: b\n", encoding="utf-8")
    with pytest.raises(RecipeError, match="duplicate key 'name'"):
        load_recipe(bad)
    bad.write_text("- a list\n", encoding="utf-8")
    with pytest.raises(RecipeError, match="the recipe is list"):
        load_recipe(bad)


def test_the_site_example_cube_raises_no_unknown_part_warning(demo_build) -> None:
    """Issue 13: the parts a built site cube uses (Abdomen here, besides Brain, Chest, Heart)
    are known to the taxonomy; only a genuinely unknown value warns."""
    from medrcube.cube import load_cube

    cube = load_cube(demo_build.release, strict=True)
    assert "Abdomen" in {i.part for i in cube}
    assert [p.message for p in cube.problems if p.reason == "unknown_part"] == []
