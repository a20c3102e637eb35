"""Runs as the report reads them: medrcube run directories and the reference evaluator's files.

Three inputs are accepted, each a directory or the file itself:

- a medrcube run directory (`results.jsonl`, and usually `run.json`,
  `metrics_summary.json`, `gate.json`, all written by `medrcube run` or the pytest gate);
- the MedRCube reference evaluator's output: `results.json` (a list of per-sample
  records with `id`, `task`, `modality`, `parts`, `dataset`, `image_path`, `correct`,
  `model_response`) with or without its `metrics_summary.json`;
- a reference `metrics_summary.json` alone (`global` / `slice_results` /
  `voxel_results`): accuracies only, so no credibility and no worst items.

Reference records become `GradedRecord`s of the standard variant whose outcome is the
file's own `correct` flag (correct or wrong: the reference grades an API error as
wrong, and nothing in its file tells the two apart). Their axes are mapped through the
taxonomy, so `Abnormity Diagnosis`, `X-ray` and `Lung` line up with our names, and
their `image_path` groups the items of one image for credibility, as the reference
analysis does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrcube.records import GradedRecord, Outcome
from medrcube.rundir.files import records_digest
from medrcube.rundir.reading import RunDirError, read_gate_document, read_results, read_run_document
from medrcube.taxonomy import canonical_modality, canonical_part, canonical_task

MEDRCUBE = "medrcube"
REFERENCE = "reference"  # the reference evaluator's results.json (per-sample records)
REFERENCE_SUMMARY = "reference-summary"  # a metrics_summary.json without records

# The reference evaluator's grading rule (its scripts/eval.py): the first standalone
# letter A-D of the upper-cased response. Used only to show which letter it read.
_REFERENCE_LETTER = re.compile(r"\b([A-D])\b")
_OPTION_KEY = re.compile(r"^option_([A-Z])$")


# An input cannot be read as a run; the message names the file, what is wrong and the fix.
# One error for the report and the strict reader of run directories (rundir/reading.py).
RunReadError = RunDirError


@dataclass
class RunData:
    """One input run: its records (standard, blind, shuffled...) and what it says about itself.

    `summary` is the run's metrics_summary.json as found on disk (None when absent); the
    report recomputes every number from `records` with the metrics package, and uses
    `summary` only for an input that has no records (`kind == REFERENCE_SUMMARY`).
    """

    path: Path  # the directory (or file) given
    kind: str  # MEDRCUBE, REFERENCE or REFERENCE_SUMMARY
    records: list[GradedRecord]
    meta: dict[str, Any] = field(default_factory=dict)  # run.json ({} when absent)
    summary: dict[str, Any] | None = None
    gate: dict[str, Any] | None = None
    questions: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # reference records only
    notes: list[str] = field(default_factory=list)
    seal: str | None = None  # how the run directory verified (rundir/seal.py); None: not a sealed kind of input

    @property
    def run_dir(self) -> Path:
        return self.path if self.path.is_dir() else self.path.parent

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.run_dir.name)

    @property
    def model_spec(self) -> str | None:
        spec = self.meta.get("model") or self.meta.get("model_spec")
        return str(spec) if spec else None

    @property
    def model_fingerprint(self) -> str | None:
        fp = self.meta.get("model_fingerprint")
        return str(fp) if fp else None

    @property
    def cube_fingerprint(self) -> str | None:
        fp = self.meta.get("cube_fingerprint") or (self.meta.get("cube") or {}).get("fingerprint")
        if not fp and self.gate:
            fp = (self.gate.get("cube") or {}).get("fingerprint")
        return str(fp) if fp else None

    @property
    def cube_source(self) -> str | None:
        src = self.meta.get("cube_spec") or self.meta.get("cube_source") or (self.meta.get("cube") or {}).get("source")
        return str(src) if src else None

    @property
    def template(self) -> str | None:
        """The prompt template. The reference evaluator's wording is our `default` template."""
        if self.kind != MEDRCUBE:
            return "default"
        t = self.meta.get("template")
        return str(t) if t else None

    @property
    def variants(self) -> tuple[str, ...]:
        """Variant names present in the records (run order), e.g. ("standard", "blind")."""
        return tuple(dict.fromkeys(r.variant for r in self.records))

    @property
    def label(self) -> str:
        """A short row label: the model spec with paths cut to their last component
        (replay:/a/b/strong.jsonl -> replay:strong.jsonl), else the directory name."""
        spec = self.model_spec
        if not spec:
            return self.run_dir.name if self.kind == MEDRCUBE else f"{self.run_dir.name} (reference)"
        head, sep, rest = spec.partition(":")
        if sep and ("/" in rest or os.sep in rest):
            base, at, url = rest.partition("@")
            short = Path(base.rstrip("/")).name or base
            return f"{head}:{short}" + (f"@{url}" if at and "/" not in url else "")
        return spec

    def of_variant(self, variant: str) -> list[GradedRecord]:
        return [r for r in self.records if r.variant == variant]


# -- dispatch ---------------------------------------------------------------------------------


def read_run(path: str | os.PathLike[str]) -> RunData:
    """Read one input run (see the module doc). Raises RunReadError naming the file and the fix."""
    p = Path(path)
    if not p.exists():
        raise RunReadError(f"{p}: no such file or directory; pass a run directory (reports/<run-id>) "
                           "or the reference evaluator's results.json / metrics_summary.json")
    if p.is_dir():
        if (p / "results.jsonl").is_file():
            return _read_medrcube(p)
        if (p / "results.json").is_file():
            return _read_reference(p / "results.json", p)
        if (p / "metrics_summary.json").is_file():
            return _read_summary_only(p / "metrics_summary.json", p)
        if (p / "gate.json").is_file():
            # The gate leaves only gate.json when inference failed: its verdict still reads.
            return _read_gate_only(p)
        raise RunReadError(
            f"{p}: holds neither results.jsonl (a medrcube run directory) nor results.json or "
            "metrics_summary.json (the reference evaluator's output); pass a run directory such as "
            "reports/<run-id>"
        )
    if p.name.endswith(".jsonl"):
        return _read_medrcube(p.parent, results=p)
    doc = _load_json(p)
    if isinstance(doc, list):
        return _read_reference(p, p, doc=doc)
    if isinstance(doc, Mapping) and "global" in doc:
        return _read_summary_only(p, p, doc=doc)
    raise RunReadError(
        f"{p}: neither a results.json (a JSON list of per-sample records) nor a metrics_summary.json "
        "(an object with 'global', 'slice_results' and 'voxel_results')"
    )


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as e:
        raise RunReadError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RunReadError(f"{path}: cannot be read ({e})") from None


def _optional_json(path: Path, notes: list[str]) -> dict[str, Any] | None:
    """An optional side file (run.json, gate.json, metrics_summary.json): a broken one is a
    note in the report, never a reason to refuse the run."""
    if not path.is_file():
        return None
    try:
        doc = _load_json(path)
    except RunReadError as e:
        notes.append(f"{e}; ignored")
        return None
    if not isinstance(doc, dict):
        notes.append(f"{path}: expected a JSON object; ignored")
        return None
    return doc


# -- medrcube run directories ------------------------------------------------------------------


def read_results_jsonl(path: Path) -> list[GradedRecord]:
    """The records of a results.jsonl, through the one strict reader (rundir/reading.py):
    an error names the line and field; text that is not UTF-8, a newer schema_version and
    a record whose (item, variant, rotation) occurs twice are refused."""
    return read_results(path)


def check_belongs(records: list[GradedRecord], meta: Mapping[str, Any], run_dir: Path) -> None:
    """Refuse records that are not the ones run.json describes: another count, or (when
    run.json carries it) another digest of the records' identities (`records_digest`)."""
    counts = meta.get("counts")
    expected = counts.get("records") if isinstance(counts, Mapping) else None
    if isinstance(expected, int) and expected != len(records):
        raise RunReadError(
            f"{run_dir}: results.jsonl holds {len(records)} records but run.json describes {expected}: the two "
            "files belong to different runs (or cubes); rerun `medrcube run` to write the directory afresh"
        )
    digest = meta.get("records_digest")
    if isinstance(digest, str) and digest != records_digest(records):
        raise RunReadError(
            f"{run_dir}: the records in results.jsonl are not those of run.json (cube "
            f"{meta.get('cube_source')!r}, fingerprint {meta.get('cube_fingerprint')!r}): the files belong to "
            "different runs or cubes; rerun `medrcube run` to write the directory afresh"
        )


def _strict_gate(run_dir: Path) -> dict[str, Any] | None:
    """gate.json through the strict reader (a broken one refuses the run), or None."""
    path = run_dir / "gate.json"
    return read_gate_document(path).to_json(where=str(path)) if path.is_file() else None


def _verified(run_dir: Path, notes: list[str]) -> str:
    """Verify a run directory before reading it: a sealed one that fails is refused; one
    without a seal (written before medrcube sealed runs) is read with a note saying so."""
    from medrcube.rundir.seal import MANIFEST, verify_run_dir

    check = verify_run_dir(run_dir, page=False)  # the data; the page is drawn from it
    if not (run_dir / MANIFEST).is_file():
        notes.append(f"{run_dir}: NOT SEALED (no {MANIFEST}): its files cannot be verified")
        return "not sealed"
    if not check.ok:
        raise RunReadError(f"{run_dir} fails verification, so it is not read: " + "; ".join(check.problems)
                           + f". `medrcube verify {run_dir}` lists what changed; report an untouched run directory")
    return "verified, " + ("signed with the site key" if check.signed else "UNSIGNED (plain SHA-256)")


def _read_medrcube(run_dir: Path, results: Path | None = None) -> RunData:
    notes: list[str] = []
    seal = _verified(run_dir, notes)
    records = read_results_jsonl(results or run_dir / "results.jsonl")
    meta: dict[str, Any] | None = None
    if (run_dir / "run.json").is_file():
        meta = read_run_document(run_dir / "run.json").to_json(where=str(run_dir / "run.json"))
        check_belongs(records, meta, run_dir)
    else:
        notes.append(f"{run_dir}: no run.json; the model, cube and template of this run are unknown")
    return RunData(
        path=run_dir,
        kind=MEDRCUBE,
        records=records,
        meta=meta or {},
        summary=_optional_json(run_dir / "metrics_summary.json", notes),
        gate=_strict_gate(run_dir),
        notes=notes,
        seal=seal,
    )


def _read_gate_only(run_dir: Path) -> RunData:
    notes: list[str] = []
    seal = _verified(run_dir, notes)
    gate = _strict_gate(run_dir)
    meta = dict(gate or {})
    meta.pop("checks", None)
    notes.append(f"{run_dir}: no results.jsonl (inference did not complete): only the gate's verdict is shown")
    return RunData(path=run_dir, kind=MEDRCUBE, records=[], meta=meta, gate=gate, notes=notes, seal=seal)


# -- the reference evaluator ------------------------------------------------------------------


def _axis(value: Any, canon: Any) -> str:
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return canon(str(value)).value if value not in (None, "") else "unknown"


def reference_record(rec: Mapping[str, Any], where: str) -> tuple[GradedRecord, str, tuple[str, ...]]:
    """One reference results.json entry as a standard-variant GradedRecord, plus its question
    and options (for the worst-items table)."""
    if not isinstance(rec, Mapping):
        raise RunReadError(f"{where}: expected an object (a per-sample record), got {type(rec).__name__}")
    for key in ("id", "task", "correct"):
        if key not in rec:
            raise RunReadError(
                f"{where}: missing field {key!r}; a reference results.json record carries id, task, modality, "
                "parts, dataset, image_path, correct and model_response"
            )
    letters = sorted(m.group(1) for k in rec if (m := _OPTION_KEY.match(str(k))))
    options = tuple(str(rec[f"option_{L}"]) for L in letters)
    gt = rec.get("_gt_letter") or next((L for L in letters if rec.get(f"option_{L}") == rec.get("gt_answer")), "")
    answer = letters.index(gt) if gt in letters else -1
    response = rec.get("model_response")
    response = None if response is None else str(response)
    m = _REFERENCE_LETTER.search(str(response or "").upper())
    extracted = letters.index(m.group(1)) if m and m.group(1) in letters else None
    correct = rec["correct"]
    if not isinstance(correct, bool):
        raise RunReadError(f"{where}: field 'correct' must be true or false, got {correct!r}")
    image = rec.get("image_path")
    prompt = str(rec.get("_prompt") or "")
    record = GradedRecord(
        item_id=str(rec["id"]),
        dataset=str(rec.get("dataset") or "unknown"),
        task=_axis(rec.get("task"), canonical_task),
        modality=_axis(rec.get("modality"), canonical_modality),
        part=_axis(rec.get("parts", rec.get("part")), canonical_part),
        image=str(image) if image else None,
        image_digest=None,
        variant="standard",
        rotation=0,
        answer=answer,
        n_options=len(letters),
        prompt_hash=hashlib.sha256(prompt.encode("utf-8")).hexdigest() if prompt else "",
        response=response,
        extracted=extracted,
        how="reference",
        outcome=Outcome.CORRECT if correct else Outcome.WRONG,
    )
    return record, str(rec.get("question") or ""), options


def _read_reference(results: Path, given: Path, doc: Any = None) -> RunData:
    doc = _load_json(results) if doc is None else doc
    if not isinstance(doc, list):
        raise RunReadError(f"{results}: a reference results.json is a JSON list of per-sample records")
    records: list[GradedRecord] = []
    questions: dict[str, tuple[str, tuple[str, ...]]] = {}
    seen: set[str] = set()
    for i, rec in enumerate(doc):
        record, question, options = reference_record(rec, f"{results} entry {i}")
        if record.item_id in seen:
            raise RunReadError(f"{results} entry {i}: a second record for id {record.item_id!r}; "
                               "one record per sample is expected")
        seen.add(record.item_id)
        records.append(record)
        questions[record.item_id] = (question, options)
    notes: list[str] = []
    summary = _optional_json(results.parent / "metrics_summary.json", notes)
    return RunData(path=given, kind=REFERENCE, records=records, summary=summary, questions=questions, notes=notes)


def _read_summary_only(path: Path, given: Path, doc: Any = None) -> RunData:
    doc = _load_json(path) if doc is None else doc
    if not isinstance(doc, Mapping) or not isinstance(doc.get("global"), Mapping):
        raise RunReadError(f"{path}: a metrics_summary.json is an object with 'global', 'slice_results' "
                           "and 'voxel_results'")
    return RunData(
        path=given,
        kind=REFERENCE_SUMMARY,
        records=[],
        summary=canonical_summary(doc, str(path)),
        notes=[f"{path}: accuracies only (no per-sample results.json): no credibility, no worst items"],
    )


# -- summaries --------------------------------------------------------------------------------


_AXES = {"task": canonical_task, "modality": canonical_modality, "parts": canonical_part}


def _canonical_key(gid: str, where: str) -> str:
    pieces = []
    for piece in gid.split("|"):
        k, eq, v = piece.partition("=")
        if not eq:
            raise RunReadError(f"{where}: group key {gid!r} is not of the form 'task=...|modality=...'")
        canon = _AXES.get(k)
        pieces.append(f"{k}={canon(v).value if canon else v}")
    return "|".join(pieces)


def _group(stats: Mapping[str, Any], where: str) -> tuple[int, int]:
    try:
        n, correct = int(stats["n"]), int(stats["correct"])
    except (KeyError, TypeError, ValueError):
        raise RunReadError(f"{where}: each group needs integer 'n' and 'correct'") from None
    if n < 0 or not 0 <= correct <= n:
        raise RunReadError(f"{where}: needs 0 <= correct <= n, got correct={correct}, n={n}")
    return n, correct


def canonical_summary(doc: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A metrics_summary.json with its group keys mapped to canonical axis names, groups that
    map to one name merged (n and correct added), and only n / correct / acc kept."""

    def merged(groups: Mapping[str, Any], section: str) -> dict[str, Any]:
        acc: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for gid, stats in groups.items():
            n, c = _group(stats, f"{where} {section} {gid!r}")
            key = _canonical_key(gid, f"{where} {section}")
            acc[key][0] += n
            acc[key][1] += c
        return {k: {"n": n, "correct": c, "acc": c / n if n else None} for k, (n, c) in sorted(acc.items())}

    n, c = _group(doc["global"], f"{where} global")
    slices = doc.get("slice_results") or {}
    voxels = doc.get("voxel_results") or {}
    return {
        "global": {"n": n, "correct": c, "acc": c / n if n else None},
        "slice_results": {name: merged(groups, f"slice_results.{name}") for name, groups in slices.items()},
        "voxel_results": {name: merged(groups, f"voxel_results.{name}") for name, groups in voxels.items()},
    }
