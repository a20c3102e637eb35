"""Builders for the report tests (imported as `report_builders`): graded records and run directories written by the real
writer (`medrcube.rundir.files.write_run_dir`), with structure chosen by each test."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from medrcube.records import GradedRecord, Outcome
from medrcube.run.runner import RunResult
from medrcube.rundir.files import write_run_dir


def rec(
    item_id: str,
    cell: tuple[str, str, str],
    *,
    correct: bool = True,
    image: str | None = None,
    variant: str = "standard",
    outcome: Outcome | None = None,
    n_options: int = 4,
    dataset: str = "DS",
) -> GradedRecord:
    """One graded record; `outcome` overrides `correct` (errors, unavailable...)."""
    part, modality, task = cell
    out = outcome or (Outcome.CORRECT if correct else Outcome.WRONG)
    answer = 0
    extracted = None if out in (Outcome.ERROR, Outcome.UNAVAILABLE, Outcome.UNPARSED) else (0 if out is Outcome.CORRECT else 1)
    return GradedRecord(
        item_id=item_id, dataset=dataset, task=task, modality=modality, part=part,
        image=image if image is not None else f"img/{item_id}.png", image_digest=None,
        variant=variant, rotation=0, answer=answer, n_options=n_options, prompt_hash="h",
        response=None if extracted is None else "AB"[extracted], extracted=extracted, how="bare_letter",
        outcome=out,
    )


def write_run(
    root: Path,
    name: str,
    records: Sequence[GradedRecord],
    *,
    model: str | None = None,
    cube_fingerprint: str = "cube-A",
    template: str = "default",
    fingerprint: str | None = None,
) -> Path:
    """A run directory as `medrcube run` writes it (results.jsonl, metrics_summary.json, run.json)."""
    model = model or name
    variants = list(dict.fromkeys(r.variant for r in records))
    result = RunResult(
        records=list(records),
        info={
            "model_spec": model,
            "model_fingerprint": fingerprint or f"fp:{model}",
            "cube_source": "synthetic",
            "cube_fingerprint": cube_fingerprint,
            "variants": variants,
            "template": template,
        },
    )
    return write_run_dir(root / name, result, {"run_id": name})


def counts_records(
    prefix: str, cell: tuple[str, str, str], n: int, correct: int, *, images: Iterable[str] | None = None
) -> list[GradedRecord]:
    """n records of one cell, the first `correct` of them right."""
    imgs = list(images) if images is not None else [None] * n
    return [rec(f"{prefix}-{i:03d}", cell, correct=i < correct, image=imgs[i]) for i in range(n)]
