"""Grading: a planned ask plus what came back -> one GradedRecord.

The rules that keep a gate honest live here:
- an adapter error is ERROR (never WRONG) and carries the error text; one never sent (the
  run stopped first: `Response.not_sent`) says so in `how` (tally.NOT_ASKED);
- a provider refusal (content filter, refusal field) or a refusal recognised in the text
  is REFUSED;
- an answer cut off at the token limit (finish_reason length) is TRUNCATED: kept as
  evidence, never read for a letter (the cut may fall before the model's real answer),
  and counted against the error bound like an error;
- a response that names no single option is UNPARSED, never a guess; an optional judge
  model may resolve it later (`apply_judge`), and the record then says how="judge";
- in the `abstain` variant, choosing the added last option ("Cannot be determined from
  this image") is DEFERRED: never WRONG, never REFUSED;
- the model's confidence (models/confidence.py) goes on the record as measured: from the
  response (logprobs, hf logits), else a stated one only when the prompt asked for it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from medrcube.models.base import Response
from medrcube.models.confidence import VERBAL_INSTRUCTION, verbal_confidence, without_verbal
from medrcube.records import GradedRecord, Outcome
from medrcube.run.extract import extract
from medrcube.run.plan import PlannedAsk
from medrcube.run.variants import ABSTAIN
from medrcube.tally import NOT_ASKED


def _record(ask: PlannedAsk, **kw: Any) -> GradedRecord:  # kw: the remaining GradedRecord fields
    item = ask.item
    return GradedRecord(
        item_id=item.id,
        dataset=item.dataset,
        task=item.task,
        modality=item.modality,
        part=item.part,
        image=ask.image_key if ask.image_key is not None else item.image,
        image_digest=ask.image_digest,
        variant=ask.variant,
        rotation=ask.rotation,
        answer=ask.answer,
        n_options=len(ask.options),
        prompt_hash=ask.prompt_hash,
        options=tuple(ask.options),
        attributes=item.attributes,
        **kw,
    )


def unavailable(ask: PlannedAsk) -> GradedRecord:
    """The record of an image variant whose image is unavailable: not asked, not graded."""
    return _record(
        ask,
        response=None,
        extracted=None,
        how="unavailable",
        outcome=Outcome.UNAVAILABLE,
        error=None,
    )


def grade(ask: PlannedAsk, response: Response, *, cached: bool = False) -> GradedRecord:
    """Grade one response to one planned ask."""
    if not ask.available:
        return unavailable(ask)
    common: dict[str, object] = {"latency_s": float(response.latency_s), "cached": cached}
    if not response.ok:
        kind = f"{response.error_kind}: " if response.error_kind is not None else ""
        return _record(
            ask,
            response=response.text,
            extracted=None,
            how=NOT_ASKED if response.not_sent else "error",  # never sent: the run stopped first
            outcome=Outcome.ERROR,
            error=f"{kind}{response.error}",
            **common,
        )
    text = response.text or ""
    if response.refused:
        # The provider itself says it refused (content filter, refusal field): trust that
        # over whatever partial text came with it.
        return _record(
            ask, response=response.text, extracted=None, how="provider_refusal", outcome=Outcome.REFUSED, **common
        )
    if response.truncated:
        return _record(
            ask, response=response.text, extracted=None, how="truncated", outcome=Outcome.TRUNCATED,
            error="truncated: the answer was cut off at the token limit (finish_reason length); raise "
                  "max_completion_tokens (or max_tokens) in models.yaml's params",
            **common,
        )
    verbal = VERBAL_INSTRUCTION in ask.prompt  # the user asked for a stated confidence
    ext = extract(without_verbal(text) if verbal else text, ask.options)
    conf = response.confidence if response.confidence is not None else (verbal_confidence(text) if verbal else None)
    if conf is not None:
        common["confidence"] = conf.for_choice(ext.choice)
    if ext.choice is not None and ask.variant == ABSTAIN and ext.choice == len(ask.options) - 1:
        outcome = Outcome.DEFERRED
    elif ext.choice is not None:
        outcome = Outcome.CORRECT if ext.choice == ask.answer else Outcome.WRONG
    elif ext.refused:
        outcome = Outcome.REFUSED
    else:
        outcome = Outcome.UNPARSED
    return _record(ask, response=response.text, extracted=ext.choice, how=ext.how, outcome=outcome, **common)


def apply_judge(record: GradedRecord, judge_response: Response) -> GradedRecord:
    """Resolve an UNPARSED record with a judge model's verdict.

    A choice from the judge grades the record (how="judge"); a judge that cannot decide
    or fails leaves it unparsed, saying so in `how` ("judge_undecided", "judge_error").
    """
    from medrcube.run.judge import parse_judge  # only a run with a judge needs it

    if record.outcome is not Outcome.UNPARSED:
        return record
    if not judge_response.ok or judge_response.refused:
        return replace(record, how="judge_error")
    choice = parse_judge(judge_response.text or "", record.n_options)
    if choice is None:
        return replace(record, how="judge_undecided")
    if record.variant == ABSTAIN and choice == record.n_options - 1:
        outcome = Outcome.DEFERRED
    else:
        outcome = Outcome.CORRECT if choice == record.answer else Outcome.WRONG
    return replace(record, extracted=choice, how="judge", outcome=outcome)
