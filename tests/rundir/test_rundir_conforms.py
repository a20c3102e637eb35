"""The fast schema check behind gate.json's and run.json's writing (rundir/conforms.py):
whatever it accepts, jsonschema accepts, and a written document takes no jsonschema."""

from __future__ import annotations

import copy
import enum
import json
import subprocess
import sys
from importlib.resources import files
from typing import Any

import jsonschema
import pytest

from medrcube.rundir.conforms import conforms

PROBES: tuple[Any, ...] = (None, True, False, 0, 1, 2, 1.0, 2.0, -1, 2.5, float("nan"), "", "x", "QUALIFIED", "pass",
                           "sha256:" + "0" * 64, "sha256:" + "A" * 64, [], [1], [None], ["a"], {}, {"a": 1},
                           {"verdict": "pass"}, (1,))


def _schema(name: str) -> dict[str, Any]:
    return json.loads(files("medrcube.rundir").joinpath("schemas", f"{name}.schema.json").read_text("utf-8"))


def _gate_doc() -> dict[str, Any]:
    from medrcube.plugin.summary import gate_typed

    worst = [{"item_id": "i1", "cell": "Chest/X-Ray/Disease Diagnosis", "outcome": "wrong", "question": "q"}]
    entries = [
        {"id": "overall", "kind": "overall", "verdict": "pass", "required": True, "bound": 0.5, "observed": 0.8,
         "interval": [0.7, 0.9], "n": 100, "message": "ok", "rule": "lower_bound", "worst": worst,
         "details": {"images": 90}},
        {"id": "cell/a", "kind": "cell", "verdict": "undecided", "required": False, "bound": 0.6, "observed": None,
         "interval": None, "n": 0, "message": None, "rule": None, "worst": [], "details": None},
    ]
    policy = {"file": "thresholds.yaml", "digest": "sha256:" + "ab" * 32, "profile": None, "default_digest": None,
              "differs": True, "summary": "1 bound", "at_chance": ["cell/a"],
              "differences": [{"change": "bound", "check": "overall", "kind": "overall", "default": 0.5, "value": 0.6}]}
    meta = {"run_id": "r", "model": "openai:m", "model_fingerprint": None, "served_model": "m", "profile": None,
            "thresholds": "thresholds.yaml", "cube": {"source": "c", "fingerprint": "f", "items": 100},
            "provenance": {"run": "t", "signed": False, "live": 99, "stored": 1, "stored_unsigned": 1,
                           "from_runs": {"older": 1}},
            "policy": policy, "variants": "standard"}
    return dict(gate_typed(entries, meta).to_json())


def _run_doc() -> dict[str, Any]:
    from medrcube.rundir.documents import RunDocument

    return RunDocument.from_mapping({
        "records_digest": "0" * 64, "run_id": "r", "model_spec": "openai:m", "model_fingerprint": "fp",
        "cube_source": "c", "cube_fingerprint": "f", "variants": ["standard"], "template": "default", "run_token": "t",
        "provenance": {"run": "t", "signed": True, "live": 3, "stored": 0, "stored_unsigned": 0, "from_runs": {}},
        "versions": {"python": "3.11"}, "timings": {"wall_s": 1.5}, "aborted": None,
        "counts": {"records": 3, "requests_sent": 3, "cache_hits": 0},
    }).to_json()


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


def _mutations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every value of the document replaced by every probe, and every key removed."""
    out = []
    for path in _paths(doc)[1:]:
        *head, last = path
        for probe in (*PROBES, KeyError):
            mutated = copy.deepcopy(doc)
            parent = mutated
            for key in head:
                parent = parent[key]
            if probe is KeyError:
                if not isinstance(parent, dict):
                    continue
                del parent[last]
            else:
                parent[last] = probe
            out.append(mutated)
    return out


@pytest.mark.parametrize(("name", "build"), [("gate", _gate_doc), ("run", _run_doc)])
def test_what_the_fast_check_accepts_jsonschema_accepts(name, build) -> None:
    schema = _schema(name)
    validator = jsonschema.Draft202012Validator(schema)
    doc = build()
    assert conforms(doc, schema) and validator.is_valid(doc)  # a written document takes the fast path
    mutated = _mutations(doc)
    accepted = [m for m in mutated if conforms(m, schema)]
    assert all(validator.is_valid(m) for m in accepted)
    # The probes reach both sides: some mutations are refused, others still conform.
    assert len(accepted) < len(mutated) and accepted


def test_a_keyword_it_does_not_know_is_left_to_jsonschema() -> None:
    assert conforms({"a": 1}, {"type": "object", "properties": {"a": {"type": "integer"}}})
    assert not conforms({"a": 1}, {"type": "object", "properties": {"a": {"oneOf": [{"type": "integer"}]}}})
    assert not conforms({"a": 1}, {"$ref": "#/$defs/x"})
    assert not conforms(1, {"type": "decimal"})
    # JSON's equality and types, not Python's: true is not 1, a tuple is no array.
    assert not conforms(True, {"enum": [1]}) and not conforms(1, {"const": True})
    assert not conforms((1,), {"type": "array"}) and conforms(2.0, {"type": "integer"})
    # A bound applies to every number jsonschema counts as one (an IntEnum too).
    class Level(enum.IntEnum):
        LOW = -1

    assert not conforms(Level.LOW, {"type": "integer", "minimum": 0})
    assert not jsonschema.Draft202012Validator({"type": "integer", "minimum": 0}).is_valid(Level.LOW)


def test_writing_a_conforming_document_does_not_import_jsonschema() -> None:
    code = (
        "import sys\n"
        "from medrcube.rundir.documents import validate\n"
        "doc = {'records_digest': '0' * 64, 'counts': {'records': 1}, 'schema_version': 1}\n"
        "validate(doc, 'run', 'run.json')\n"
        "assert 'jsonschema' not in sys.modules, 'jsonschema imported'\n"
        "try:\n"
        "    validate({**doc, 'schema_version': 0}, 'run', 'run.json')\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # A refusal still goes through jsonschema, worded as before.
    assert "run.json: schema_version: 0 is less than the minimum of 1" in out
