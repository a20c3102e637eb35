"""The validation dossier of a sealed run: what a hospital's review board files.

`build_dossier(run_dir)` reads the sealed files of a verified run (gate.json, run.json,
metrics_summary.json, results.jsonl, manifest.json) and returns the dossier as data, in
the shape of the Coalition for Health AI's Applied Model Card (its sections: the model's
identity, uses and directions, warnings, trust ingredients, key metrics, resources) and
of the reporting items of TRIPOD+AI (BMJ 2024) and CLAIM that a run can answer. Every
item says where its value comes from (`source`: a sealed file and the key in it), or
that a person must fill it (`status: to_fill`): the developer, the regulatory status,
the clinical workflow, how the test data are independent of the model's development.

Numbers are taken from the sealed files as they are written there: the gate's checks
with their intervals and verdicts, metrics_summary.json's accuracies per axis, and the
accuracy per subgroup attribute and, in the diagnosis cells, the sensitivity per finding
and subgroup, from results.jsonl (clustered by image, as the gate's intervals are), and
the rule the subgroup checks were decided under (from gate.json's entries: which were
required, which were harm detectors). The cube's build manifest (deid_manifest.json beside a release cube) is
outside the seal: when present it is quoted with its SHA-256.

The dossier is deterministic (no clock): `medrcube verify` rebuilds it from the sealed
files and says when a dossier/dossier.json beside them differs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from medrcube.gate.kinds import kinds_in_dossier

DOSSIER_DIR = "dossier"
SCHEMA_VERSION = 1
TO_FILL = "to_fill"
ANSWERED = "answered"
NOT_IN_RUN = "not_in_run"


def _item(id_: str, label: str, value: Any = None, source: str = "", *, fill: str = "") -> dict[str, Any]:
    """One dossier item: answered from the run (`source` says where), or to be filled by a person."""
    if fill:
        return {"id": id_, "label": label, "status": TO_FILL, "value": None, "source": "", "guidance": fill}
    if value is None or value == [] or value == {}:
        return {"id": id_, "label": label, "status": NOT_IN_RUN, "value": None, "source": source, "guidance": ""}
    return {"id": id_, "label": label, "status": ANSWERED, "value": value, "source": source, "guidance": ""}


def _check_row(c: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": c.get("id"), "kind": c.get("kind"), "verdict": c.get("verdict"), "required": c.get("required", True),
            "observed": c.get("observed"), "interval": c.get("interval"), "bound": c.get("bound"), "n": c.get("n"),
            "method": c.get("method") or ""}


def _checks(gate: Mapping[str, Any], kinds: Sequence[str]) -> list[dict[str, Any]]:
    return [_check_row(c) for c in gate.get("checks") or [] if c.get("kind") in kinds]


def _of(gate: Mapping[str, Any], item: str) -> list[Mapping[str, Any]]:
    """gate.json's check entries of the kinds the dossier lists under `item` (gate/kinds.py)."""
    kinds = kinds_in_dossier(item)
    return [c for c in gate.get("checks") or [] if c.get("kind") in kinds]


def _stat(d: Mapping[str, Any]) -> dict[str, Any]:
    iv = d.get("ci95_clustered") or d.get("ci95")
    return {"n": d.get("n"), "correct": d.get("correct"), "accuracy": d.get("acc"), "interval": list(iv) if iv else None,
            "images": d.get("images")}


def per_axis(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Accuracy per part, modality and task (metrics_summary.json's slices, clustered intervals)."""
    out = []
    for group, rows in (summary.get("slice_results") or {}).items():
        for key, d in sorted(rows.items()):
            axis, _, value = key.partition("=")
            out.append({"axis": axis, "value": value, **_stat(d), "source": f"metrics_summary.json slice_results.{group}"})
    return out


def per_subgroup(records: Sequence[Any], gate: Mapping[str, Any], confidence: float = 0.95) -> list[dict[str, Any]]:
    """Accuracy per value of each subgroup attribute (results.jsonl, standard answers, clustered by
    image), with the gate's verdicts of the subgroup checks of that stratum when it has any."""
    from medrcube.metrics.clustered import clustered_accuracy

    std = [r for r in records if r.variant == "standard" and r.attributes is not None]
    entries = {str(c.get("id")): c for c in (*_of(gate, "subgroup"), *_of(gate, "subgroup_gap"))}
    verdicts = {k: c.get("verdict") for k, c in entries.items()}
    out = []
    for name, v, mine in _strata(std):
        ci = clustered_accuracy(mine, confidence)
        out.append({"attribute": name, "value": v, "n": ci.n, "images": ci.clusters, "accuracy": ci.estimate,
                    "interval": [ci.lo, ci.hi], "check": verdicts.get(f"subgroup/{name}/{v}"),
                    "gap_check": verdicts.get(f"subgroup_gap/{name}/{v}"),
                    "gap_role": _gap_role(entries.get(f"subgroup_gap/{name}/{v}")),
                    "source": "results.jsonl (standard answers, clustered by image)"})
    return out


def per_subgroup_sensitivity(records: Sequence[Any], confidence: float = 0.95) -> list[dict[str, Any]]:
    """Per stratum of each subgroup attribute, per diagnosis cell and finding that occurs as a truth
    there: the sensitivity with its image-clustered interval (metrics/findings.py), as measured
    on results.jsonl's standard answers. Estimates for the board, not checks of the gate."""
    from medrcube.metrics.findings import findings_by_cell, is_diagnosis_task

    std = [r for r in records if r.variant == "standard" and r.attributes is not None and is_diagnosis_task(r.task)]
    out = []
    for name, v, mine in _strata(std):
        for cell, cf in findings_by_cell(mine, None, confidence).items():
            for finding, st in sorted(cf.findings.items()):
                se = st.sensitivity
                if se.n:
                    out.append({"attribute": name, "value": v, "cell": "/".join(cell), "finding": finding,
                                "sensitivity": se.value, "interval": [se.lo, se.hi], "positives": se.n,
                                "images": se.clusters})
    return out


def _strata(records: Sequence[Any]) -> Iterator[tuple[str, str, list[Any]]]:
    """(attribute, value, its records) for every stratum of every subgroup attribute, in
    ATTRIBUTE_NAMES order and by value; an attribute known for no record is left out."""
    from medrcube.records import ATTRIBUTE_NAMES

    for name in ATTRIBUTE_NAMES:
        values = sorted({r.attributes.get(name) for r in records})
        if values == ["unknown"]:
            continue
        for v in values:
            yield name, v, [r for r in records if r.attributes.get(name) == v]


def _gap_role(entry: Mapping[str, Any] | None) -> str | None:
    """How a stratum's gap check counts in the verdict, as gate.json records it."""
    if entry is None:
        return None
    if entry.get("required", True):
        return "required: QUALIFIED needs the gap shown below max_gap"
    if (entry.get("params") or {}).get("detector"):
        return "harm detector: a gap shown above max_gap fails the gate; not required to pass"
    return "reported, not required: " + str((entry.get("details") or {}).get("not_required") or "")


def subgroup_rule(gate: Mapping[str, Any]) -> dict[str, Any] | None:
    """How the run's subgroup checks decided the verdict (the policy's rule, from gate.json's
    check entries): the bounds, which checks QUALIFIED required, and what a failure does."""
    acc = _of(gate, "subgroup")
    gap = _of(gate, "subgroup_gap")
    if not acc and not gap:
        return None
    rules = sorted({str((c.get("params") or {}).get("gap_rule") or "prove") for c in gap})
    detect = rules == ["detect"]
    return {
        "min_accuracy": next((c.get("bound") for c in acc), None),
        "max_gap": next((c.get("bound") for c in gap), None),
        "gap_rule": ", ".join(rules) or None,
        "accuracy_checks": f"each stratum's accuracy shown at least min_accuracy (a pass claim at the check's level); "
                           f"required: {sum(bool(c.get('required', True)) for c in acc)} of {len(acc)} strata (the "
                           "others too small to decide or of unknown value, reported)",
        "gap_checks": ("harm detectors: a gap shown above max_gap (Holm over every check) makes the gate NOT "
                       "QUALIFIED, naming the stratum; QUALIFIED does not prove every gap below max_gap: a gap "
                       "above it is caught with the power the strata's sizes give (`medrcube plan` sizes them for "
                       "a gap max_gap + 0.1 at 80%; docs/guarantees.md)") if detect else
                      ("required: QUALIFIED needs every gap shown below max_gap (a pass claim at the check's level)"
                       if gap else None),
        "not_required": {str(c.get("id")): (c.get("details") or {}).get("not_required") for c in acc + gap
                         if not c.get("required", True) and not (c.get("params") or {}).get("detector")} or None,
    }


def failure_modes(gate: Mapping[str, Any], summary: Mapping[str, Any], k: int = 5) -> dict[str, Any]:
    """The weakest cells (metrics_summary.json) and the worst items the gate named."""
    cells = [{"cell": key, **_stat(d)} for group in (summary.get("voxel_results") or {}).values()
             if isinstance(group, Mapping) for key, d in group.items()
             if isinstance(d, Mapping) and d.get("acc") is not None]
    cells.sort(key=lambda c: (c["accuracy"], str(c["cell"])))
    items = []
    for c in gate.get("checks") or []:
        if c.get("verdict") in ("fail", "undecided"):
            for w in c.get("worst") or []:
                items.append({"check": c.get("id"), "item": w.get("item_id"), "cell": w.get("cell"),
                              "expected": w.get("expected"), "given": w.get("given"), "outcome": w.get("outcome")})
    return {"weakest_cells": cells[:k], "worst_items": items[: 3 * k]}


def _build_manifest(cube_source: str | None) -> tuple[dict[str, Any] | None, str]:
    """The cube's de-identification manifest beside a release cube (outside the seal), and its sha256."""
    if not cube_source:
        return None, ""
    p = Path(cube_source)
    folder = p if p.is_dir() else p.parent
    path = folder / "deid_manifest.json"
    if not path.is_file():
        return None, ""
    data = path.read_bytes()
    try:
        return json.loads(data), f"{path} (sha256 {hashlib.sha256(data).hexdigest()}, outside the run's seal)"
    except ValueError:
        return None, ""


def build_dossier(run_dir: str | Path, seal: Any) -> dict[str, Any]:
    """The dossier of a run directory that verified (`seal`: its rundir.seal.SealCheck)."""
    from medrcube.rundir.reading import read_json_object, read_results

    run_dir = Path(run_dir)
    gate = read_json_object(run_dir / "gate.json") if (run_dir / "gate.json").is_file() else {}
    run = read_json_object(run_dir / "run.json")
    summary = read_json_object(run_dir / "metrics_summary.json") if (run_dir / "metrics_summary.json").is_file() else {}
    records = read_results(run_dir / "results.jsonl")
    manifest_bytes = (run_dir / "manifest.json").read_bytes()
    verdict = gate.get("gate") or {}
    policy = gate.get("policy") or run.get("policy") or {}
    cube = gate.get("cube") or {"source": run.get("cube_source"), "fingerprint": run.get("cube_fingerprint")}
    deid, deid_source = _build_manifest(cube.get("source") or run.get("cube_source"))
    overall = next((_check_row(c) for c in gate.get("checks") or [] if c.get("id") == "overall"), None)
    subgroups = per_subgroup(records, gate)
    axis = per_axis(summary)
    fails = failure_modes(gate, summary)
    images = len({r.image or r.item_id for r in records if r.variant == "standard"})
    counts = (run.get("counts") or {}).get("outcomes") or {}
    served = run.get("served_models") or ({"": gate.get("served_model")} if gate.get("served_model") else {})

    identity = [
        _item("model_name", "Model (as asked)", gate.get("model") or run.get("model_spec"), "gate.json model"),
        _item("served_model", "Model the endpoint said answered", served or None, "run.json served_models"),
        _item("model_fingerprint", "Model fingerprint", run.get("model_fingerprint"), "run.json model_fingerprint"),
        _item("developer", "Developer and contact", fill="who built the model and whom to ask"),
        _item("release_stage", "Release stage, version and date", fill="the model's release as its developer states it"),
        _item("regulatory", "Regulatory approval or clearance", fill="e.g. FDA 510(k) number, CE mark, or none"),
    ]
    uses = [
        _item("intended_use_scope", "Intended use: the scope the gate decided on", gate.get("scope"), "gate.json scope"),
        _item("intended_use_workflow", "Intended use and clinical workflow", fill="the clinical question, who uses the "
              "answers and how they enter care"),
        _item("target_population", "Target patient population", fill="patients the model is meant for; compare with the "
              "subgroups measured below"),
        _item("out_of_scope", "Cautioned out-of-scope uses", fill="parts, modalities, tasks and settings not validated "
              "(what lies outside the scope above)"),
    ]
    warnings = [
        _item("failure_modes", "Known failure modes (weakest cells, worst items)", fails,
              "metrics_summary.json voxel_results; gate.json checks[].worst"),
        _item("subgroup_gaps", "Known biases: subgroups below the bound or the rest", [
            s for s in subgroups if "fail" in (s["check"], s["gap_check"])], "gate.json subgroup checks"),
        _item("clinical_risk", "Clinical risk level", fill="the site's risk assessment of a wrong answer"),
    ]
    data = [
        _item("test_data", "Test data (the cube)", {"source": cube.get("source"), "fingerprint": cube.get("fingerprint"),
              "items": cube.get("items") or len(records), "images": images}, "gate.json cube; results.jsonl"),
        _item("deidentification", "Data provenance and de-identification (build manifest)", deid, deid_source or
              "no deid_manifest.json beside the cube (a cube not built by `medrcube build`)"),
        _item("reference_standard", "Reference standard", "each item's answer key in the cube (for a built cube, its "
              "derivation from the source's metadata and labels, meta.derivation)", "the cube's items"),
        _item("reference_standard_people", "Who established the reference standard, and how",
              fill="readers, their qualifications, adjudication"),
        _item("independence", "Independence of the test data from the model's development",
              fill="how the cube's images are known to be absent from the model's training data"),
        _item("missing_data", "Missing data: answers not graded", counts or None, "run.json counts.outcomes"),
        _item("software", "Software versions", run.get("versions"), "run.json versions"),
    ]
    metrics = [
        _item("overall", "Overall accuracy (usefulness)", overall, "gate.json checks[id=overall]"),
        _item("per_axis", "Accuracy per part, modality and task", axis, "metrics_summary.json slice_results"),
        _item("per_subgroup", "Accuracy per subgroup (fairness)", subgroups, "results.jsonl; gate.json subgroup checks"),
        _item("subgroup_rule", "How the subgroup checks decide the verdict", subgroup_rule(gate),
              "gate.json subgroup checks (bound, required, params)"),
        _item("per_subgroup_sensitivity", "Sensitivity per finding and subgroup (diagnosis tasks)",
              per_subgroup_sensitivity(records), "results.jsonl (standard answers of the diagnosis cells, clustered by "
              "image; estimates, not checks of the gate)"),
        _item("calibration", "Calibration", _checks(gate, kinds_in_dossier("calibration")) or summary.get("calibration"),
              "gate.json calibration checks; metrics_summary.json calibration"),
        _item("credibility", "Credibility (diagnoses resting on perception)", _checks(gate, kinds_in_dossier("credibility")),
              "gate.json credibility checks"),
        _item("robustness", "Robustness (perturbations, option order, image dependence, regression)",
              _checks(gate, kinds_in_dossier("robustness")), "gate.json checks of those kinds"),
        _item("all_checks", "Every check of the gate, as decided", [_check_row(c) for c in gate.get("checks") or []],
              "gate.json checks"),
    ]
    governance = [
        _item("verdict", "The gate's verdict and its guarantee", {"verdict": gate.get("verdict"),
              "guarantee": verdict.get("guarantee"), "counts": gate.get("counts")}, "gate.json gate"),
        _item("policy", "The policy and its differences from the shipped default", {
            "file": policy.get("file"), "digest": policy.get("digest"), "profile": policy.get("profile"),
            "differs": policy.get("differs"), "summary": policy.get("summary")} if policy else None, "gate.json policy"),
        _item("ledger", "Attempt ledger: this run's attempt on its cube and the guarantee over the attempts",
              gate.get("attempt"), "gate.json attempt"),
        _item("seal", "The run's seal", {"manifest_sha256": hashlib.sha256(manifest_bytes).hexdigest(),
              "method": seal.method, "signed": bool(seal.signed), "files": seal.files}, "manifest.json"),
        _item("maintenance", "Ongoing monitoring and revalidation", fill="how often the gate is re-run and by whom"),
    ]
    tripod = [
        _item("tripod_source_of_data", "TRIPOD+AI 5 / CLAIM: source of data", cube.get("source"), "gate.json cube"),
        _item("tripod_participants", "TRIPOD+AI 6 / CLAIM: eligibility of patients and images",
              fill="inclusion and exclusion criteria of the images in the cube"),
        _item("tripod_outcome", "TRIPOD+AI 7 / CLAIM: outcome and reference standard", "multiple-choice answer keys "
              "per item; see reference standard", "the cube's items"),
        _item("tripod_sample_size", "TRIPOD+AI 9: sample size", {"items": len(records), "images": images},
              "results.jsonl"),
        _item("tripod_missing", "TRIPOD+AI 10: missing data", counts or None, "run.json counts.outcomes"),
        _item("tripod_performance", "TRIPOD+AI 12 / CLAIM: performance measures with intervals",
              sorted({c.get("method") or "" for c in gate.get("checks") or []} - {""}), "gate.json checks[].method"),
        _item("tripod_fairness", "TRIPOD+AI 14 / CLAIM: performance across subgroups", subgroups,
              "results.jsonl; gate.json"),
        _item("claim_deidentification", "CLAIM: de-identification methods", deid.get("profile") if deid else None,
              deid_source or "no build manifest"),
        _item("claim_failure_analysis", "CLAIM: failure analysis", fails, "gate.json; metrics_summary.json"),
        _item("tripod_registration", "TRIPOD+AI 18-19: registration, protocol, funding, conflicts of interest",
              fill="as the site's governance records them"),
    ]
    sections: list[dict[str, Any]] = [
        {"id": "identity", "title": "Model identity (Applied Model Card: basic information)", "items": identity},
        {"id": "uses", "title": "Uses and directions", "items": uses},
        {"id": "warnings", "title": "Warnings: risks, limitations, biases", "items": warnings},
        {"id": "data", "title": "Trust ingredients: data, reference standard, de-identification", "items": data},
        {"id": "metrics", "title": "Key metrics: usefulness, fairness, safety and reliability", "items": metrics},
        {"id": "governance", "title": "Verdict, policy and evidence on record", "items": governance},
        {"id": "reporting", "title": "TRIPOD+AI and CLAIM items the run answers", "items": tripod},
    ]
    return {
        "schema": "medrcube-validation-dossier", "schema_version": SCHEMA_VERSION,
        "run": {"run_id": run.get("run_id") or gate.get("run_id"), "verdict": gate.get("verdict"),
                "medrcube_version": gate.get("medrcube_version") or (run.get("versions") or {}).get("medrcube")},
        "sections": sections,
        "to_fill": [i["id"] for s in sections for i in s["items"] if i["status"] == TO_FILL],
    }


def validate_dossier(doc: Mapping[str, Any]) -> None:
    """Check a dossier against the JSON Schema shipped in the package (jsonschema raises)."""
    from importlib.resources import files

    import jsonschema

    schema = json.loads(files("medrcube.report").joinpath("dossier.schema.json").read_text("utf-8"))
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)


def to_json(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=False, allow_nan=False) + "\n"
