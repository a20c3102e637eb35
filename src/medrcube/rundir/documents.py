"""The run directory's typed documents: gate.json (`GateDocument`) and run.json (`RunDocument`).

Each is a frozen, versioned value with a JSON Schema shipped in the package
(`medrcube/rundir/schemas/gate.schema.json`, `run.schema.json`): the schema is the
documentation of the file and is checked both when a document is written (`to_json`
validates, so no writer can put out a document its readers would refuse) and when one is
read (rundir/reading.py, the one strict reader behind `medrcube report`, `--baseline` and
`medrcube verify`).

The keys this room owns are fields; the blocks other rooms own (a check's payload, the
usage, a sequential run's sampling) stay JSON objects inside them, and keys a newer
writer adds are kept in `extra` (a reader of an older version ignores nothing silently:
they are written back as they were).

Versions: gate.json 2 adds the provenance of the answers and the policy on record
(digest, profile, differences from the shipped default); version 1 documents
are read, without those blocks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from importlib.resources import files
from typing import Any

GATE_SCHEMA_VERSION = 2
RUN_SCHEMA_VERSION = 1


class DocumentError(ValueError):
    """A document that does not match its schema: names the file, the key path and the fix."""


@cache
def _schema(name: str) -> Any:
    return json.loads(files("medrcube.rundir").joinpath("schemas", f"{name}.schema.json").read_text("utf-8"))


@cache
def _validator(name: str) -> Any:
    import jsonschema

    schema = _schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate(doc: Mapping[str, Any], name: str, where: str) -> None:
    """Check `doc` against the shipped schema `name` ("gate" or "run"); DocumentError
    naming `where` (the file), the key path of the first problem and the fix.

    A document the fast check (rundir/conforms.py) accepts is one jsonschema accepts, so
    jsonschema (its import and its validators: ~0.06 s of CPU, in the gate's time after
    its last answer) is only loaded for a document the fast check cannot vouch for, and
    then decides and words the problem exactly as before."""
    from medrcube.rundir.conforms import conforms

    if conforms(doc, _schema(name)):
        return
    errors = sorted(_validator(name).iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        path = ".".join(str(p) for p in e.absolute_path) or "(top level)"
        raise DocumentError(
            f"{where}: {path}: {e.message} ({len(errors)} problem(s) against medrcube/rundir/schemas/{name}.schema.json); "
            "the file was edited or written by another tool: write it again with the run that made it"
        )


def _split(doc: Mapping[str, Any], cls: type) -> tuple[dict[str, Any], dict[str, Any]]:
    names = {f.name for f in fields(cls)} - {"extra"}
    known = {k: v for k, v in doc.items() if k in names}
    return known, {k: v for k, v in doc.items() if k not in names}


@dataclass(frozen=True)
class GateDocument:
    """gate.json: every decided check in a stable order, the gate's verdict, the run's
    identity, where its answers came from and the policy it was decided under."""

    run_id: str
    verdict: str  # QUALIFIED, NOT QUALIFIED, UNDECIDED
    passed: bool  # QUALIFIED only
    gate: Mapping[str, Any]  # GateVerdict.to_dict()
    counts: Mapping[str, int]  # checks per status
    checks: tuple[Mapping[str, Any], ...]  # the payloads (plugin/summary.verdict_payload)
    schema_version: int = GATE_SCHEMA_VERSION
    model: str | None = None
    model_fingerprint: str | None = None
    served_model: str | None = None
    cube: Mapping[str, Any] = field(default_factory=dict)  # source, fingerprint, items
    thresholds: str | None = None  # the policy file given
    profile: str | None = None
    # Answers asked live in this run vs taken from the store, and from which runs
    # (run/provenance.py); None when no inference ran.
    provenance: Mapping[str, Any] | None = None
    # The policy on record: its digest, profile, and how it differs from the
    # shipped default (gate/record.py); None in documents put together by hand.
    policy: Mapping[str, Any] | None = None
    # This run's attempt on its cube, from the ledger of attempts (plugin/ledger.py): its
    # number, the earlier attempts' verdicts, its pass level and the bound across attempts.
    attempt: Mapping[str, Any] | None = None
    # The run's account (gate/account.Account.to_dict()): the verdict, the required checks'
    # counts, the coverage per part, modality and task, the failed checks first; what
    # the terminal, JUnit, Allure and report.html render. None in older documents.
    account: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # the run's other keys (variants, usage, ...)

    @classmethod
    def build(
        cls, checks: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], gate: Any, counts: Mapping[str, int],
        account: Any = None,
    ) -> GateDocument:
        """From the ordered check payloads, the run's meta (plugin/run_meta.run_meta and
        gate_meta), the gate's verdict (gate.verdict.GateVerdict) and the run's account
        (gate.account.Account)."""
        known, extra = _split(meta, cls)
        for name in ("verdict", "passed", "gate", "counts", "checks", "schema_version", "account"):
            known.pop(name, None)
        return cls(
            run_id=str(known.pop("run_id", "")),
            verdict=gate.status.value,
            passed=gate.exit_code == 0,
            gate=gate.to_dict(),
            counts=dict(counts),
            checks=tuple({k: v for k, v in e.items() if k not in ("order", "nodeid")} for e in checks),
            account=account.to_dict() if account is not None else None,
            extra=extra,
            **known,
        )

    def to_json(self, *, where: str = "gate.json") -> dict[str, Any]:
        """The JSON object written to gate.json, checked against its schema first."""
        doc: dict[str, Any] = {"schema_version": self.schema_version, "run_id": self.run_id}
        for name in ("model", "model_fingerprint", "served_model", "cube", "thresholds", "profile"):
            doc[name] = _plain(getattr(self, name))
        doc.update(_plain(self.extra))
        if self.account is not None:
            doc["account"] = _plain(self.account)
        doc.update({"provenance": _plain(self.provenance), "policy": _plain(self.policy),
                    "attempt": _plain(self.attempt), "gate": _plain(self.gate),
                    "verdict": self.verdict, "passed": self.passed, "counts": dict(self.counts),
                    "checks": [_plain(c) for c in self.checks]})
        validate(doc, "gate", where)
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], *, where: str = "gate.json") -> GateDocument:
        """A gate.json object read back (rundir/reading.py checks its version first)."""
        validate(doc, "gate", where)
        known, extra = _split(doc, cls)
        known["checks"] = tuple(known.get("checks") or ())
        known.setdefault("run_id", "")  # version 1 documents put together by hand may lack it
        return cls(extra=extra, **known)


@dataclass(frozen=True)
class RunDocument:
    """run.json: what ran (model spec, never a key; fingerprints; variants), when, with
    which versions, the counts, and the digest of the records' identities."""

    records_digest: str
    counts: Mapping[str, Any]
    schema_version: int = RUN_SCHEMA_VERSION
    run_id: str | None = None
    model_spec: str | None = None
    model_fingerprint: str | None = None
    cube_source: str | None = None
    cube_fingerprint: str | None = None
    variants: tuple[str, ...] = ()
    template: str | None = None
    run_token: str | None = None  # the run's name in the provenance of the answers it stored
    provenance: Mapping[str, Any] | None = None
    versions: Mapping[str, Any] = field(default_factory=dict)
    timings: Mapping[str, Any] = field(default_factory=dict)
    aborted: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, doc: Mapping[str, Any]) -> RunDocument:
        """A run.json object (as rundir/files.run_document assembles it, or as read back)."""
        known, extra = _split(doc, cls)
        variants = known.get("variants") or ()
        # The gate hands over its --variants option as written ("standard,blind"): a string
        # is a comma-separated list of names, never a sequence of letters.
        if isinstance(variants, str):
            variants = [v.strip() for v in variants.split(",") if v.strip()]
        known["variants"] = tuple(variants)
        return cls(extra=extra, **known)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], *, where: str = "run.json") -> RunDocument:
        validate(doc, "run", where)
        return cls.from_mapping(doc)

    def to_json(self, *, where: str = "run.json") -> dict[str, Any]:
        doc: dict[str, Any] = {"schema_version": self.schema_version}
        for f in fields(self):
            if f.name not in ("schema_version", "extra"):
                doc[f.name] = _plain(getattr(self, f.name))
        doc.update(_plain(self.extra))
        validate(doc, "run", where)
        return doc

    def get(self, key: str, default: Any = None) -> Any:
        """A key of the document by its JSON name (for readers that take either kind)."""
        if key in self.extra:
            return self.extra[key]
        return getattr(self, key, default) if key in {f.name for f in fields(self)} else default


def _plain(value: Any) -> Any:
    """JSON-ready: tuples as lists, mappings as dicts (frozen fields hold either)."""
    kind = type(value)  # the plain types by their exact type: the abstract Mapping's check is slow
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
