"""GradedRecord.to_dict is written field by field (speed, issue 29): it must stay equal to
what dataclasses.asdict gave, for every outcome and with or without nested confidence."""

from __future__ import annotations

import json
from dataclasses import asdict, fields

from medrcube.records import GradedRecord, Outcome


def _reference(rec: GradedRecord) -> dict:
    d = asdict(rec)
    d["outcome"] = rec.outcome.value
    return d


def _records() -> list[GradedRecord]:
    base = dict(item_id="i1", dataset="ds", task="t", modality="CT", part="Brain", image="img/1.png",
                image_digest="sha256:ab", variant="standard", rotation=0, answer=1, n_options=4,
                prompt_hash="ph", response="B", extracted=1, how="bare_letter")
    out = []
    for o in Outcome:
        out.append(GradedRecord(**base, outcome=o))
    conf = {"source": "logprobs", "value": 0.7, "probs": [0.1, 0.7, 0.1, 0.1], "mass": 0.99}
    out.append(GradedRecord(**{**base, "image": None, "image_digest": None, "response": None, "extracted": None},
                            outcome=Outcome.UNPARSED, latency_s=0.25, cached=True, error="e",
                            confidence=conf, options=("a", "b", "c", "d")))
    return out


def test_to_dict_equals_asdict_for_every_outcome_and_nesting() -> None:
    for rec in _records():
        got, want = rec.to_dict(), _reference(rec)
        assert got == want
        assert list(got) == list(want) == [f.name for f in fields(GradedRecord)]  # same key order
        assert json.dumps(got) == json.dumps(want)  # results.jsonl bytes
        assert GradedRecord.from_dict(json.loads(json.dumps(got))) == rec


def test_to_dict_copies_the_nested_confidence() -> None:
    rec = _records()[-1]
    d = rec.to_dict()
    d["confidence"]["probs"].append(9.0)
    assert rec.confidence is not None and rec.confidence["probs"] == [0.1, 0.7, 0.1, 0.1]


def test_from_dict_reads_every_record_back_and_a_dict_without_a_field_takes_its_default() -> None:
    """from_dict reads a full dict by one lookup of every field (speed, issue 46): the same record as
    the constructor given the fields by name, for every outcome and nesting; a dict written before a
    field existed takes that field's default; a missing required field or outcome, or an unknown
    outcome, is refused as the constructor and the enum refuse it."""
    import pytest

    from medrcube.records import Attributes

    for rec in [*_records(), GradedRecord(**{**_reference(_records()[0]), "outcome": Outcome.CORRECT,
                                             "attributes": Attributes.from_dict({"sex": "F"})})]:
        d = json.loads(json.dumps(rec.to_dict()))
        d["schema_version"] = 1  # results.jsonl's other keys are ignored
        assert GradedRecord.from_dict(d) == rec
        for optional in ("latency_s", "cached", "error", "confidence", "options", "attributes"):
            older = {k: v for k, v in d.items() if k != optional}
            back = GradedRecord.from_dict(older)
            assert getattr(back, optional) == next(f.default for f in fields(GradedRecord) if f.name == optional)
            assert {f.name: getattr(back, f.name) for f in fields(GradedRecord) if f.name != optional} == \
                   {f.name: getattr(rec, f.name) for f in fields(GradedRecord) if f.name != optional}
    d = _records()[0].to_dict()
    with pytest.raises(TypeError, match="item_id"):
        GradedRecord.from_dict({k: v for k, v in d.items() if k != "item_id"})
    with pytest.raises(KeyError):
        GradedRecord.from_dict({k: v for k, v in d.items() if k != "outcome"})
    with pytest.raises(ValueError):
        GradedRecord.from_dict({**d, "outcome": "bogus"})
    with pytest.raises(ValueError):
        GradedRecord.from_dict({**d, "outcome": ["correct"]})
