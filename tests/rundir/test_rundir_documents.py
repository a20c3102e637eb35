"""gate.json and run.json: typed, versioned documents with JSON Schemas shipped in the
package, and the one strict reader (rundir/documents.py, rundir/reading.py)."""

from __future__ import annotations

import json
import re
from importlib.resources import files
from pathlib import Path

import pytest

from medrcube.rundir.documents import GATE_SCHEMA_VERSION, DocumentError, GateDocument, RunDocument, validate
from medrcube.rundir.reading import RunDirError, read_gate_document, read_json_object, read_results


def _gate(**meta):
    from medrcube.plugin.summary import gate_typed

    entry = {"id": "overall", "kind": "overall", "verdict": "pass", "required": True, "bound": 0.5,
             "observed": 0.8, "interval": [0.7, 0.9], "n": 100, "message": "ok"}
    return gate_typed([entry], {"run_id": "r", "cube": {"source": "c", "fingerprint": "f", "items": 100},
                                "provenance": {"run": "t", "signed": False, "live": 100, "stored": 0,
                                               "stored_unsigned": 0, "from_runs": {}},
                                "policy": None, **meta})


def test_the_schemas_ship_in_the_package_and_are_valid_json_schema() -> None:
    import jsonschema

    for name in ("gate", "run"):
        schema = json.loads(files("medrcube.rundir").joinpath("schemas", f"{name}.schema.json").read_text("utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["title"] == f"medrcube {name}.json"


def test_a_gate_document_round_trips_through_its_schema() -> None:
    doc = _gate(variants="standard", usage={})
    data = doc.to_json()
    assert data["schema_version"] == GATE_SCHEMA_VERSION == 2 and data["verdict"] == "QUALIFIED"
    assert data["provenance"]["live"] == 100 and data["variants"] == "standard"  # other keys kept
    assert GateDocument.from_json(data) == doc


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d.update(verdict="PASSED"), "verdict"),
        (lambda d: d["provenance"].update(live=-1), "provenance.live"),
        (lambda d: d.pop("provenance"), "(top level)"),  # version 2 requires it
        (lambda d: d["checks"][0].update(verdict="ok"), "checks.0.verdict"),
        (lambda d: d.update(policy={"digest": "md5:x", "profile": None, "differs": False, "differences": []}),
         "policy.digest"),
    ],
)
def test_a_document_off_its_schema_is_refused_naming_the_key(change, where) -> None:
    data = _gate().to_json()
    change(data)
    with pytest.raises(DocumentError, match=rf"gate.json: {re.escape(where)}: .*schemas/gate.schema.json"):
        validate(data, "gate", "gate.json")


def test_the_strict_reader_refuses_duplicates_bad_bytes_and_newer_versions(tmp_path: Path) -> None:
    path = tmp_path / "gate.json"
    path.write_text('{"schema_version": 2, "verdict": "NOT QUALIFIED", "verdict": "QUALIFIED"}', encoding="utf-8")
    with pytest.raises(RunDirError, match="the key 'verdict' appears twice"):
        read_json_object(path)
    path.write_bytes(b'{"run_id": "\xff"}')
    with pytest.raises(RunDirError, match="not UTF-8"):
        read_json_object(path)
    data = _gate().to_json()
    data["schema_version"] = GATE_SCHEMA_VERSION + 1
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RunDirError, match="newer than this medrcube reads"):
        read_gate_document(path)
    data["schema_version"] = 1  # an older document is read, without the blocks of version 2
    del data["provenance"], data["policy"]
    path.write_text(json.dumps(data), encoding="utf-8")
    assert read_gate_document(path).provenance is None


def test_results_jsonl_newer_version_and_duplicates_are_refused(tmp_path: Path, rec) -> None:
    from medrcube.rundir.files import result_row

    row = result_row(rec("a"))
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(RunDirError, match="recorded twice"):
        read_results(path)
    row["schema_version"] = 99
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(RunDirError, match="newer than this medrcube reads"):
        read_results(path)


def test_a_variants_option_as_written_becomes_a_list_of_names() -> None:
    """The gate hands run.json its --variants option as written; it must not become letters."""
    doc = RunDocument.from_mapping({"records_digest": "0" * 64, "counts": {}, "variants": "standard, blind,shuffled:2"})
    assert doc.variants == ("standard", "blind", "shuffled:2")
    assert RunDocument.from_mapping({"records_digest": "0" * 64, "counts": {}, "variants": ["standard"]}).variants == ("standard",)
