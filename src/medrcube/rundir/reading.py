"""The one strict reader of a run directory: results.jsonl, run.json and gate.json.

`medrcube report` (report/readers.py), `--baseline` (plugin/session.py) and `medrcube
verify` read through here, so that a file one of them refuses is refused by all:
- text that is not UTF-8, JSON that does not parse, and a JSON object with a key written
  twice (the second would silently win) are refused;
- a `schema_version` newer than this medrcube reads is refused (upgrade), an older one is
  read as it was written;
- a record of results.jsonl whose (item, variant, rotation) occurs twice is refused (the
  file was put together from several runs);
- gate.json and run.json are checked against their shipped schemas (rundir/documents.py).
Every error names the file (and line), what is wrong and the fix.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from medrcube.models.strict_json import loads_strict
from medrcube.records import GradedRecord
from medrcube.rundir.documents import (
    GATE_SCHEMA_VERSION,
    RUN_SCHEMA_VERSION,
    DocumentError,
    GateDocument,
    RunDocument,
)

RESULTS_SCHEMA_VERSION = 1
REWRITE = "run the same `medrcube run` command again to rewrite it"
Doc = TypeVar("Doc", GateDocument, RunDocument)  # the typed documents read strictly


class RunDirError(ValueError):
    """A run directory's file cannot be read. The message names the file, what is wrong and the fix."""


def _parse(text: str) -> Any:
    return loads_strict(text)  # a key written twice is an error (models/strict_json.py), never a choice


def _version(doc: Mapping[str, Any], newest: int, where: str) -> int:
    version = doc.get("schema_version", 1)  # files written before the field are version 1
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RunDirError(f"{where}: schema_version {version!r} is not a version number; {REWRITE}")
    if version > newest:
        raise RunDirError(f"{where}: schema_version {version} is newer than this medrcube reads ({newest}); "
                          "upgrade medrcube to read it")
    return version


def read_json_object(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON object from a file, strictly: UTF-8, parseable, no key written twice."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except OSError as e:
        raise RunDirError(f"{p}: cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise RunDirError(f"{p}: not UTF-8 text (byte {e.start}: {e.reason}); the file is damaged") from None
    try:
        doc = _parse(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as e:
        raise RunDirError(f"{p}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except (ValueError, RecursionError) as e:
        raise RunDirError(f"{p}: not a readable JSON object ({e})") from None
    if not isinstance(doc, dict):
        raise RunDirError(f"{p}: expected a JSON object, found {type(doc).__name__}")
    return doc


def _read_document(path: str | os.PathLike[str], version: int, kind: type[Doc]) -> Doc:
    """A typed document read strictly: its version checked, then its schema, as RunDirError."""
    doc = read_json_object(path)
    _version(doc, version, str(path))
    try:
        return kind.from_json(doc, where=str(path))
    except (DocumentError, TypeError) as e:
        raise RunDirError(str(e)) from None


def read_gate_document(path: str | os.PathLike[str]) -> GateDocument:
    return _read_document(path, GATE_SCHEMA_VERSION, GateDocument)


def read_run_document(path: str | os.PathLike[str]) -> RunDocument:
    return _read_document(path, RUN_SCHEMA_VERSION, RunDocument)


def read_results(path: str | os.PathLike[str]) -> list[GradedRecord]:
    """The records of a results.jsonl (module docstring for what is refused)."""
    out: list[GradedRecord] = []
    seen: dict[tuple[str, str, int], int] = {}
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise RunDirError(f"{path}: cannot be read ({e.strerror or e})") from None
    with fh:
        for n, raw in enumerate(fh, 1):
            where = f"{path}:{n}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise RunDirError(f"{where}: not UTF-8 text (byte {e.start}: {e.reason}); the file is damaged: "
                                  f"{REWRITE}") from None
            if not line.strip():
                continue
            try:
                row = _parse(line)
            except json.JSONDecodeError as e:
                raise RunDirError(f"{where}: not a JSON object ({e.msg}); the file may have been cut short: "
                                  f"{REWRITE}") from None
            except (RecursionError, ValueError) as e:
                raise RunDirError(f"{where}: not a readable JSON object ({e})") from None
            if not isinstance(row, dict):
                raise RunDirError(f"{where}: expected a JSON object per line, found {type(row).__name__}")
            _version(row, RESULTS_SCHEMA_VERSION, where)
            if "item_id" not in row and "schema_version" in row:
                continue  # a header line
            try:
                rec = GradedRecord.from_dict(row)
            except KeyError as e:
                raise RunDirError(f"{where}: missing field {e.args[0]!r} (written by another tool?)") from None
            except (TypeError, ValueError, AttributeError) as e:
                raise RunDirError(f"{where}: bad record ({e})") from None
            key = (rec.item_id, rec.variant, rec.rotation)
            if key in seen:
                raise RunDirError(
                    f"{where}: item {rec.item_id!r} ({rec.variant}, rotation {rec.rotation}) is recorded twice "
                    f"(first at line {seen[key]}); the file holds more than one run: rerun `medrcube run` to write "
                    "it afresh"
                )
            seen[key] = n
            out.append(rec)
    return out
