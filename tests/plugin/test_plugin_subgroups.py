"""Subgroup checks through the whole gate: a JSON Lines cube mapping its own columns to
attributes (attributes.yaml), a simulated model 0.25 worse on one manufacturer's images
NOT QUALIFIED with that stratum named in the summary, gate.json and report.html (a forest
plot per attribute), and an even model QUALIFIED."""

from __future__ import annotations

import hashlib
import json

import pytest

from medrcube.report.after_exit import wait_drawn

VENDORS = ("GE HEALTHCARE", "SIEMENS", "Philips")
POLICY = """\
version: 1
defaults: {rule: lower_bound, confidence: 0.95}
overall: {bound: 0.6}
subgroups: {by: [manufacturer, sex], min_accuracy: 0.6, max_gap: 0.1, min_images: 30}
"""


@pytest.fixture
def subgroup_ws(gate_ws):
    """gate_ws with its cube replaced: 300 images of three vendors, two questions each, the
    cube's own columns `vendor` and `patient_sex` mapped by attributes.yaml."""
    from PIL import Image

    cube = gate_ws.path / "cube"
    items = []
    for img in range(300):
        Image.new("L", (6, 6), img % 250).save(cube / "img" / f"s{img}.png")
        for k, (task, options, answer) in enumerate((("Modality Recognition", ["CT", "MRI", "X-Ray", "US"], 2),
                                                     ("Organ Recognition", ["Lung", "Brain", "Heart", "Liver"], 0))):
            items.append({"id": f"s{img}-{k}", "dataset": "site", "image": f"img/s{img}.png",
                          "question": f"Question {k} about image {img}?", "options": options, "answer": answer,
                          "task": task, "modality": "X-Ray", "part": "Chest", "vendor": VENDORS[img % 3],
                          "patient_sex": "F" if img % 2 else "M"})
    (cube / "cube.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
    (cube / "attributes.yaml").write_text("manufacturer: vendor\nsex: patient_sex\n", encoding="utf-8")
    (gate_ws.path / "thresholds.yaml").write_text(POLICY, encoding="utf-8")
    return gate_ws


def test_a_model_worse_on_one_manufacturer_is_not_qualified_and_named(subgroup_ws, monkeypatch) -> None:
    monkeypatch.setenv("MEDRCUBE_REPORT_HTML", "now")
    result = subgroup_ws.run(model="simulate:accuracy=0.92,manufacturer.Siemens=-0.25,seed=4")
    assert result.ret == 10, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["FAILED *::test_subgroup_gap?subgroup_gap/manufacturer/Siemens?*"])
    result.stdout.fnmatch_lines(["*gap of a subgroup to the rest (gap;*manufacturer/Siemens 0.3* n=200 fail*"])
    doc = subgroup_ws.gate_json()
    by = {c["id"]: c for c in doc["checks"]}
    siemens = by["subgroup_gap/manufacturer/Siemens"]
    assert (siemens["kind"], siemens["verdict"]) == ("subgroup_gap", "fail")
    assert "manufacturer = Siemens" in siemens["message"]
    # A harm detector (subgroups.gap: detect): reported, not required to pass, and its decided failure fails the gate.
    assert siemens["required"] is False and siemens["details"]["not_required"].startswith("harm detector")
    assert "subgroup_gap/manufacturer/Siemens" in doc["gate"]["failed"] and "harm detectors" in doc["gate"]["guarantee"]
    result.stdout.fnmatch_lines(["*reported-only: its failure fails the gate*"])
    assert by["subgroup_gap/manufacturer/GE"]["verdict"] == "pass"
    assert {by[f"subgroup/sex/{s}"]["verdict"] for s in ("female", "male")} == {"pass"}
    html = (subgroup_ws.run_dirs()[-1] / "report.html").read_text(encoding="utf-8")
    assert 'id="kind-subgroup"' in html and 'aria-label="accuracy per manufacturer"' in html
    assert "(harm detector: a decided failure fails the gate; never required to pass)" in html
    assert 'aria-label="accuracy per sex"' in html
    assert wait_drawn(subgroup_ws.run_dirs()[-1]) == "drawn"


def test_an_even_model_is_qualified_under_the_subgroup_policy(subgroup_ws) -> None:
    result = subgroup_ws.run(model="simulate:accuracy=0.92,seed=4")
    assert result.ret == 0, result.stdout.str()[-3000:]
    kinds = {c["kind"] for c in subgroup_ws.gate_json()["checks"]}
    assert {"subgroup", "subgroup_gap"} <= kinds


# -- a site cube built from a generated DICOM archive: two sites, three vendors -----------------


@pytest.fixture(scope="module")
def site_build(tmp_path_factory):
    """The generated archive (150 single-slice CT series) built with every attribute kept."""
    from medrcube.construction.pipeline import build
    from medrcube.testing.subgroup_archive import recipe_text, write_archive

    root = tmp_path_factory.mktemp("subgroup-site")
    archive = write_archive(root / "archive", images=150, seed=5, vendor_weights=(0.35, 0.4, 0.25))
    recipe = root / "recipe.yaml"
    recipe.write_text(recipe_text(archive, root / "out"), encoding="utf-8")
    return archive, build(recipe)


def test_a_dicom_build_carries_the_attributes_without_an_identifier(site_build, capsys) -> None:
    from medrcube.cli import main
    from medrcube.cube import load_cube

    archive, result = site_build
    cube = load_cube(result.release)
    assert len({it.image for it in cube.items}) == 150
    for it in cube.items:
        site = it.dataset.removesuffix("-ct")
        series = int(it.meta["source"]["ref"].split()[1])  # "series 7 image 1 of 1": the 7th file of its folder
        files = sorted(k for k in archive.truth if k.startswith(site + "/"))
        want = {**archive.truth[files[series - 1]], "protocol": "unknown"}
        assert it.attributes is not None and it.attributes.to_dict() == want, it.id
    ages = {it.attributes.age_band for it in cube.items if it.attributes}
    assert "90+" in ages and not ages & {"90-99", "100-109"}  # over 89: one band
    manifest = json.loads((result.release / "deid_manifest.json").read_text(encoding="utf-8"))
    kept = manifest["subgroup_attributes"]
    assert kept["kept"] == ["sex", "age_band", "manufacturer", "model", "site", "protocol"]
    assert sum(kept["images_per_value"]["manufacturer"].values()) == 150 and set(kept["rules"]) == set(kept["kept"])
    assert {r["attribute"] for r in manifest["removed_attributes"]} >= {"PatientSex", "PatientAge", "PatientBirthDate",
                                                                        "PatientName", "PatientID"}
    # The header bar still holds: no identifying value (names, IDs, birth dates, exact ages) in any exported file.
    exported = b"".join(p.read_bytes() for p in result.release.rglob("*") if p.is_file())
    assert not [v for v in archive.identifying if v.encode() in exported]
    assert manifest["leak_scan"]["found"] == 0 and manifest["leak_scan"]["pixels"]["found"] == 0
    assert main(["cube", "stats", str(result.release)]) == 0
    out = capsys.readouterr().out
    by_vendor = kept["images_per_value"]["manufacturer"]
    assert f"images by manufacturer: GE {by_vendor['GE']}, Philips {by_vendor['Philips']}" in out
    assert "images by site: NORTH" in out


def test_the_gate_names_a_manufacturer_the_model_is_worse_on_in_the_built_cube(site_build, gate_ws) -> None:
    _, result = site_build
    policy = POLICY.replace("[manufacturer, sex]", "[manufacturer, site]")
    (gate_ws.path / "thresholds.yaml").write_text(policy, encoding="utf-8")
    run = gate_ws.run(f"--cube={result.release}", model="simulate:accuracy=0.95,manufacturer.Siemens=-0.25,seed=2")
    assert run.ret == 10, run.stdout.str()[-3000:]
    by = {c["id"]: c for c in gate_ws.gate_json()["checks"]}
    assert by["subgroup_gap/manufacturer/Siemens"]["verdict"] == "fail"
    assert {by[f"subgroup_gap/manufacturer/{v}"]["verdict"] for v in ("GE", "Philips")} == {"pass"}
    assert {"subgroup/site/NORTH", "subgroup/site/SOUTH"} <= set(by)
    # (An even model on strata of about 50 images: how often it qualifies is measured in benchmarks/subgroups.py.)


# -- the dossier of a sealed run, and the sample-size plan ---------------------------------------


def test_the_dossier_is_written_from_a_sealed_run_and_refused_for_an_edited_one(subgroup_ws, capsys) -> None:
    from importlib.resources import files

    import jsonschema

    from medrcube.cli import main

    subgroup_ws.run(model="simulate:accuracy=0.92,manufacturer.Siemens=-0.25,seed=4")
    run_dir = subgroup_ws.run_dirs()[-1]
    assert main(["dossier", str(run_dir)]) == 0
    doc = json.loads((run_dir / "dossier" / "dossier.json").read_text(encoding="utf-8"))
    schema = json.loads(files("medrcube.report").joinpath("dossier.schema.json").read_text("utf-8"))
    jsonschema.Draft202012Validator(schema).validate(doc)  # the schema shipped in the package
    items = {i["id"]: i for s in doc["sections"] for i in s["items"]}
    gate = subgroup_ws.gate_json()
    overall = next(c for c in gate["checks"] if c["id"] == "overall")
    assert items["overall"]["value"]["observed"] == overall["observed"]  # the sealed number, as written
    assert items["overall"]["value"]["interval"] == overall["interval"]
    siemens = next(s for s in items["per_subgroup"]["value"] if s["value"] == "Siemens")
    assert siemens["gap_check"] == "fail" and items["subgroup_gaps"]["value"][0]["value"] == "Siemens"
    assert siemens["gap_role"].startswith("harm detector: a gap shown above max_gap fails the gate")
    rule = items["subgroup_rule"]["value"]  # the rule the verdict was decided under, from gate.json
    assert (rule["gap_rule"], rule["min_accuracy"], rule["max_gap"]) == ("detect", 0.6, 0.1)
    assert rule["gap_checks"].startswith("harm detectors") and "QUALIFIED does not prove" in rule["gap_checks"]
    assert doc["run"]["verdict"] == "NOT QUALIFIED" and items["verdict"]["source"] == "gate.json gate"
    assert {"developer", "regulatory", "independence"} <= set(doc["to_fill"])
    assert items["developer"]["status"] == "to_fill" and items["developer"]["value"] is None
    assert items["ledger"]["value"] == gate["attempt"] and items["ledger"]["value"]["number"] >= 1  # the sealed attempt
    seal = hashlib.sha256((run_dir / "manifest.json").read_bytes()).hexdigest()
    assert items["seal"]["value"]["manifest_sha256"] == seal
    html = (run_dir / "dossier" / "dossier.html").read_text(encoding="utf-8")
    assert "NOT QUALIFIED" in html and "<b>to fill</b>" in html and seal in html
    assert main(["verify", str(run_dir)]) == 0  # the dossier is not sealed, and is the one the sealed files give
    written = run_dir / "dossier" / "dossier.json"
    written.write_text(written.read_text(encoding="utf-8").replace('"NOT QUALIFIED"', '"QUALIFIED"', 1), encoding="utf-8")
    capsys.readouterr()
    assert main(["verify", str(run_dir)]) == 1
    assert "dossier/dossier.json: differs from the dossier of the sealed files" in capsys.readouterr().out
    gate_file = run_dir / "gate.json"
    gate_file.write_text(gate_file.read_text(encoding="utf-8").replace('"fail"', '"pass"'), encoding="utf-8")
    assert main(["dossier", str(run_dir)]) == 1
    err = capsys.readouterr().err
    assert "refused" in err and "gate.json: changed after sealing" in err


def test_plan_says_per_stratum_what_to_collect(subgroup_ws, capsys) -> None:
    from medrcube.cli import main

    mix = subgroup_ws.path / "archive.csv"
    mix.write_text("manufacturer,sex,count\nGE,female,400\nGE,male,380\nSiemens,female,150\nSiemens,male,140\n"
                   "Philips,female,60\nPhilips,male,70\n", encoding="utf-8")
    args = ["plan", "--thresholds", str(subgroup_ws.path / "thresholds.yaml"), "--cube", str(subgroup_ws.path / "cube" / "cube.jsonl")]
    assert main([*args, "--mix", str(mix), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["subgroups"]
    by = {(s["attribute"], s["value"]): s for s in plan["strata"]}
    philips = by[("manufacturer", "Philips")]
    assert philips["have"] == 100 and philips["need"] >= philips["need_gap"] > 0
    assert philips["lacking"] == max(0, philips["need"] - 100)
    assert abs(philips["share"] - 130 / 1200) < 1e-9
    assert plan["total_images"] == max(-(-s["need"] // s["share"]) for s in plan["strata"])
    assert main([*args, "--mix", str(mix)]) == 0
    out = capsys.readouterr().out
    assert "collect " in out and "manufacturer = Philips" in out
    # The gap checks are planned as what they are under the policy's rule: harm detectors.
    assert plan["gap_rule"] == "detect" and plan["family_size"] > 10
    assert "gap checks are harm detectors (subgroups.gap: detect): planned to show a gap 0.1 above max_gap" in out
    assert main(["plan", "--thresholds", str(subgroup_ws.path / "thresholds.yaml"), "--cube", "nowhere.jsonl"]) == 2
