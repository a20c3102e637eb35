"""Stage I, competency mapping: what the metadata of each demo source supports, the protocol
rules, and what is reported as unmapped instead of guessed."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from medrcube.construction.observation import ROI, Hint, SourceImage
from medrcube.construction.pipeline import _readers
from medrcube.construction.privacy.safeguards import Manifest
from medrcube.construction.readers.tabular import SourceLog
from medrcube.construction.recipe import load_recipe
from medrcube.construction.stages.mapping import Mapper
from medrcube.construction.stages.ontology import load_ontology
from medrcube.construction.stages.protocol import mr_protocol_from_parameters
from medrcube.construction.stages.vocabulary import load_vocabulary
from medrcube.taxonomy import TASK_NAMES


def _mapper(tasks=TASK_NAMES, **kw) -> Mapper:
    return Mapper(load_vocabulary(), load_ontology(), tasks=tasks, **kw)


@pytest.fixture(scope="module")
def mapped(demo_root: Path, site_recipe):
    """dataset -> list of (image ref, {(task, kind): answer}) for every demo image, and the mapper."""
    r = load_recipe(site_recipe(demo_root, "site-mapping"))
    mapper = _mapper(diagnosis_values=r.diagnosis_values, severity_scale=r.severity.scale, severity_values=r.severity.values)
    out: dict[str, list] = defaultdict(list)
    log = SourceLog()
    for spec in r.sources:
        for img in _readers()[spec.kind](spec, r.privacy, Manifest(), {}, log):
            m = mapper.map(img)
            comps = {} if m is None else {(c.task, c.kind, c.roi): c.answer for c in m.competencies}
            out[spec.dataset].append((img.ref, comps, m))
    return out, mapper, log


def _find(rows, **answers):
    return [(ref, c) for ref, c, _ in rows if all(any(k[1] == kind and v == want for k, v in c.items()) for kind, want in answers.items())]


def test_dicom_series_yield_the_tasks_their_tags_support(mapped) -> None:
    rows = mapped[0]["demo-dicom"]
    assert len(rows) == 17  # every slice of the multi-slice series (4, 3, 3, 2, 2), 1 of the single-image ones
    t2 = _find(rows, mr_protocol="t2w", plane="Axial", organ="Brain", diagnosis="glioma")
    t1 = _find(rows, mr_protocol="t1w", plane="Sagittal", diagnosis="meningioma")
    assert len(t2) == 5 and len(t1) == 3  # series 2, and series 7 (its pixels name the patient)
    assert all(c[("Severity Grading", "severity", None)] == "Severe" for _, c in t2)
    liver = _find(rows, ct_protocol="contrast_ct", organ="Upper abdomen", diagnosis="hepatocellular_carcinoma")
    assert len(liver) == 2
    chest_ct = _find(rows, modality="CT", organ="Chest", diagnosis="pneumonia")
    assert len(chest_ct) == 4 and all(not any(k[1] == "ct_protocol" for k in c) for _, c in chest_ct)  # no evidence, no item
    cr = _find(rows, modality="X-ray radiography", projection="Posteroanterior (PA)", finding="pleural_effusion")
    assert len(cr) == 1 and cr[0][1][("Abnormality Diagnosis", "abnormality", None)] == "Yes"
    us = _find(rows, modality="Ultrasound", us_mode="b_mode", organ="Heart")
    assert len(us) == 1 and not any(k[0] == "View Recognition" for k in us[0][1])  # an ultrasound frame has no plane


def test_nifti_cuts_only_true_planes_and_reads_the_bids_suffix(mapped) -> None:
    rows = mapped[0]["demo-mri"]
    t1 = _find(rows, mr_protocol="t1w")
    flair = _find(rows, mr_protocol="flair")
    assert sorted(c[("View Recognition", "plane", None)] for _, c in t1) == ["Axial"] * 8 + ["Coronal"] * 8 + ["Sagittal"] * 8
    assert [c[("View Recognition", "plane", None)] for _, c in flair] == ["Sagittal"] * 8  # tilted 35 degrees
    assert all(c[("Disease Diagnosis", "diagnosis", None)] == "multiple_sclerosis" for _, c in flair)
    assert mapped[2].counts["no true axial plane (oblique affine)"] == 1


def test_labels_boxes_and_masks_of_the_csv_images(mapped) -> None:
    rows = mapped[0]["demo-cxr"]
    assert len(rows) == 13
    normal = _find(rows, abnormality="No")
    assert len(normal) == 3 and all(not any(k[0] == "Disease Diagnosis" for k in c) for _, c in normal)
    masked = [m for _, _, m in rows if m is not None and any(r.source == "mask" for r in m.image.rois)]
    assert len(masked) == 1
    comps = {(c.kind, c.answer): c for c in masked[0].competencies if c.task == "ROI Grounding"}
    assert comps[("roi_identify", "consolidation")].marked and comps[("roi_locate", "Upper left")].finding == "Consolidation"
    views = {c[("View Recognition", "projection", None)] for _, c, _ in rows if ("View Recognition", "projection", None) in c}
    assert views == {"Posteroanterior (PA)", "Anteroposterior (AP)", "Lateral"}
    bronch = [c for _, c, m in rows if m is not None and "bronchiectasis" in str(m.image.labels.get("diagnosis"))]
    assert bronch and not any(k[0] in ("Disease Diagnosis", "Abnormality Diagnosis") for k in bronch[0])
    report = mapped[1].report.to_dict()
    assert {"field": "diagnosis", "value": "bronchiectasis", "why": "no concept named 'bronchiectasis' in " + load_ontology().source,
            "images": 1} in report["unmapped"]  # fmt: skip


@pytest.mark.parametrize(
    "meta, expected",
    [
        ({"ScanningSequence": "SE", "RepetitionTime": 500, "EchoTime": 15}, "t1w"),
        ({"ScanningSequence": ["SE"], "RepetitionTime": 4500, "EchoTime": 95}, "t2w"),
        ({"ScanningSequence": "SE", "RepetitionTime": 3000, "EchoTime": 20}, "pdw"),
        ({"ScanningSequence": "SE", "RepetitionTime": 1500, "EchoTime": 50}, None),  # intermediate
        ({"ScanningSequence": ["SE", "IR"], "RepetitionTime": 9000, "EchoTime": 120, "InversionTime": 2500}, "flair"),
        ({"ScanningSequence": "IR", "RepetitionTime": 4000, "EchoTime": 40, "InversionTime": 150}, "stir"),
        ({"ScanningSequence": "EP", "DiffusionBValue": 1000}, "dwi"),
        ({"ImageType": ["DERIVED", "PRIMARY", "DIFFUSION", "TRACEW"]}, "dwi"),
        ({"ScanningSequence": "GR", "RepetitionTime": 20, "EchoTime": 4}, None),  # depends on the flip angle
    ],
)
def test_mri_weighting_rules(meta, expected) -> None:
    got, why = mr_protocol_from_parameters(meta)
    assert got == expected, why
    assert why


def _image(**kw) -> SourceImage:
    base = dict(dataset="t", ref="x", pixels=np.zeros((40, 40)), origin="dicom")
    base.update(kw)
    return SourceImage(**base)


def test_conflicting_protocol_evidence_gives_no_item_and_is_a_picks_the_specific() -> None:
    m = _mapper()
    conflict = _image(meta={"Modality": "MR", "BodyPartExamined": "BRAIN", "ScanningSequence": "SE", "RepetitionTime": 500,
                            "EchoTime": 15, "ProtocolName": "t2_tse_tra"})  # fmt: skip
    mapped = m.map(conflict)
    assert not any(c.task == "Imaging Protocol Recognition" for c in mapped.competencies)
    assert m.report.not_derived[("Imaging Protocol Recognition", "conflicting evidence: t1w, t2w")] == 1
    specific = _image(meta={"Modality": "MR", "BodyPartExamined": "BRAIN", "ScanningSequence": "SE", "RepetitionTime": 500,
                            "EchoTime": 15, "ProtocolName": "t1ce_se_tra"})  # fmt: skip
    ipr = next(c for c in m.map(specific).competencies if c.task == "Imaging Protocol Recognition")
    assert ipr.answer == "t1w_contrast" and "ProtocolName (0018,1030) names 't1ce'" in ipr.derivation and "se_tra" not in ipr.derivation


def test_oblique_slices_unknown_terms_and_contradictions_are_reported_not_guessed() -> None:
    m = _mapper()
    oblique = _image(meta={"Modality": "CT", "BodyPartExamined": "CHEST", "ImageOrientationPatient": [1, 0, 0, 0, 0.7071, 0.7071]})
    assert not any(c.task == "View Recognition" for c in m.map(oblique).competencies)
    assert m.report.not_derived[("View Recognition", "oblique ImageOrientationPatient")] == 1
    assert m.map(_image(meta={"Modality": "PT", "BodyPartExamined": "CHEST"})) is None
    assert m.report.unmapped[("modality", "PT", "not in the vocabulary's modality table")] == 1
    assert m.map(_image(meta={"Modality": "CT"})) is None  # no part anywhere
    assert m.report.skipped["part not mapped (no BodyPartExamined, label or recipe part)"] == 1
    contradiction = _image(meta={"Modality": "CT", "BodyPartExamined": "CHEST"},
                           labels={"diagnosis": Hint("pneumonia", "dx", "labels"), "abnormality": Hint("normal", "status", "labels")})  # fmt: skip
    comps = m.map(contradiction).competencies
    assert not any(c.kind == "abnormality" for c in comps) and any(c.kind == "diagnosis" for c in comps)
    breast = _image(origin="image", hints={"modality": Hint("US", "d", "d"), "part": Hint("Breast", "d", "d")},
                    labels={"diagnosis": Hint("mass", "dx", "labels")})  # fmt: skip
    assert not any(c.task == "Disease Diagnosis" for c in m.map(breast).competencies)
    assert m.report.unmapped[("diagnosis", "mass", "'mass' names pulmonary_mass, none of category disease/finding/lesion_class in region 'Breast'")] == 1


def test_severity_needs_a_scale_and_regions_a_clear_quadrant() -> None:
    m = _mapper(severity_scale=("Mild", "Moderate", "Severe"), severity_values={"2": "Moderate"})
    img = _image(meta={"Modality": "CT", "BodyPartExamined": "CHEST"},
                 labels={"diagnosis": Hint("pneumonia", "dx", "labels"), "severity": Hint("2", "grade", "labels")},
                 rois=[ROI((2, 2, 12, 12), "consolidation"), ROI((15, 5, 30, 15), "pleural effusion"), ROI((5, 30, 12, 38), "consolidation")])  # fmt: skip
    comps = m.map(img).competencies
    sg = next(c for c in comps if c.task == "Severity Grading")
    assert sg.answer == "Moderate" and sg.pool == ("Mild", "Severe") and sg.finding == "Pneumonia"
    rg = [c for c in comps if c.task == "ROI Grounding"]
    # Consolidation is marked twice (ambiguous): only the effusion gets items; its box crosses the midline.
    assert [(c.kind, c.answer) for c in rg] == [("roi_identify", "pleural_effusion")]
    assert m.report.not_derived[("ROI Grounding", "the same finding is marked more than once")] == 2
    assert m.report.not_derived[("ROI Grounding", "region crosses an image midline (no quadrant item)")] == 1
    no_scale = _mapper()
    no_scale.map(img)
    assert no_scale.report.unmapped[("severity", "2", "the recipe names no severity scale (labels.severity.scale)")] == 1


def test_damaged_dicom_files_are_skipped_and_named_on_the_console(demo_root: Path, tmp_path: Path) -> None:
    from medrcube.construction.readers.dicom_folder import read_dicom_folder
    from medrcube.construction.recipe import PrivacySpec, SourceSpec

    good = sorted((demo_root / "build" / "demo-site" / "dicom" / "study-b" / "series-2").glob("*.dcm"))
    folder = tmp_path / "archive"
    folder.mkdir()
    for i, p in enumerate(good):
        data = p.read_bytes()
        (folder / f"{i}.dcm").write_bytes(data if i == 0 else data[: len(data) - 500] if i == 1 else data[:200])
    log = SourceLog()
    images = list(read_dicom_folder(SourceSpec("dicom-folder", "t", path=folder, slices=3), PrivacySpec(), Manifest(), {}, log))
    assert len(images) == 1  # the intact file; the one cut in its pixels and the one cut in its header are skipped
    assert sum(log.counts.values()) == 2
    assert all(str(folder) in m for m in log.messages)
