"""Record factory for the gate tests: real GradedRecords, built field by field."""

from __future__ import annotations

import pytest

from medrcube.run.records import GradedRecord, Outcome


def make_record(
    item_id: str,
    outcome: Outcome | str = Outcome.CORRECT,
    *,
    task: str = "Disease Diagnosis",
    modality: str = "X-Ray",
    part: str = "Chest",
    image: str | None = None,
    variant: str = "standard",
    rotation: int = 0,
    answer: int = 0,
    n_options: int = 4,
    extracted: int | None = None,
    response: str | None = None,
) -> GradedRecord:
    outcome = Outcome(outcome)
    if extracted is None and outcome in (Outcome.CORRECT, Outcome.WRONG):
        extracted = answer if outcome is Outcome.CORRECT else (answer + 1) % n_options
    return GradedRecord(
        item_id=item_id,
        dataset="test",
        task=task,
        modality=modality,
        part=part,
        image=image if image is not None else f"img/{item_id}.png",
        image_digest=None,
        variant=variant,
        rotation=rotation,
        answer=answer,
        n_options=n_options,
        prompt_hash="h",
        response=response if response is not None else f"answer for {item_id}",
        extracted=extracted,
        how="bare_letter",
        outcome=outcome,
        error="boom" if outcome is Outcome.ERROR else None,
    )


@pytest.fixture(scope="session")
def rec():
    """The record factory (session-scoped so that hypothesis tests may use it)."""
    return make_record
