"""Answer extraction read as a radiologist would read it (issue 25).

Two data files beside this one, each line a reply with the option it commits to
(`expected`, null when it commits to none) and the item's answer key (`key`):

- `data/replies.jsonl`: 492 realistic replies: short, reasoning, negated findings,
  retractions and self-corrections, labelled wrong answers, per-option verdict lists,
  yes/no, statements in German, French, Spanish, Portuguese and Chinese, JSON and
  tool-call shaped output, refusals and hedges. Where a reply could be misread, its key
  is the misreading (the negated finding, the retracted letter, the first letter of a
  verdict list), so that a misread would be graded as a right answer. The last 40
  (`holdout-*`) were written after the rules, as a held-out check: on first reading they
  gave 29 right, 9 unreadable and 2 misreads graded right ("Answer: A\n\nEdit: ignore
  that, the answer is C.", "Maybe yes, maybe no."), since mended; four stay unreadable
  (KNOWN_UNREAD). A second held-out batch of 35 (`holdout2-*`), written after that,
  gave 31 right and 4 misreads, 3 of them graded right ("Pneumonia? Unlikely.", "B —
  sorry, typo. I meant D.", a tool call answering A beside "content": "Answer: C") and
  one graded wrong ("Heart size within normal limits; ..." read as Normal), since mended.
  A third batch of 30 (`holdout3-*`, longer replies in the styles of chat models) gave
  27 right, 2 unreadable and 1 misread graded wrong ("There is no evidence of
  pneumothorax or pneumonia. Heart size is normal." read as Normal: "normal" now answers
  only when said of the study); one of its labels was wrong when written ("Based on the
  image, yes." answers yes) and is corrected. A fourth batch of 35 (`holdout4-*`, written
  in the next session before reading) gave 30 right, 4 unreadable (KNOWN_UNREAD) and 1
  misread graded right ("A: ✗ B: ✗ C: ✓ D: ✗", a verdict list on one line, read as A):
  mended (a line of three labels or more is a list; a cross after a letter or an option
  text rejects it), with 11 one-line list forms written while mending (`verdicts-inline-*`).
  A fifth batch of 35 (`holdout5-*`, half of it in Spanish, Portuguese, Chinese, German
  and French) gave 27 right, 8 unreadable (KNOWN_UNREAD) and no misread.
- `data/adversarial.jsonl`: the 34 adversarial replies of the issue's trial, the 12 it
  misread (`from_issue`) among them.

benchmarks/extract_readings.py counts the same files under this extraction and under the
reference evaluator's and VLMEvalKit's rules (benchmarks/RESULTS.md, section 6).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from medrcube.cube import load_cube, write_jsonl
from medrcube.cube.item import Item
from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.records import Outcome
from medrcube.run.extract import extract
from medrcube.run.runner import run_cube
from medrcube.run.store import ResponseStore

DATA = Path(__file__).parent / "data"
KINDS = {"short", "reasoning", "negated", "retracted", "labelled_wrong", "verdicts", "yes_no", "multilingual",
         "json", "tool_call", "refusal_hedge"}
LANGUAGES = {"en", "de", "fr", "es", "pt", "zh"}


def _rows(name: str) -> list[dict[str, Any]]:
    with open(DATA / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


CORPUS = _rows("replies.jsonl")
ADVERSARIAL = _rows("adversarial.jsonl")


def test_the_corpus_covers_what_the_issue_asks() -> None:
    assert len(CORPUS) >= 300 and sum(r["id"].startswith("holdout-") for r in CORPUS) == 40
    assert sum(r["id"].startswith("holdout2-") for r in CORPUS) == 35
    assert sum(r["id"].startswith("holdout3-") for r in CORPUS) == 30
    assert sum(r["id"].startswith("holdout4-") for r in CORPUS) == 35
    assert sum(r["id"].startswith("holdout5-") for r in CORPUS) == 35
    assert len({r["id"] for r in CORPUS}) == len(CORPUS)
    assert {r["kind"] for r in CORPUS} == KINDS
    assert {r["lang"] for r in CORPUS} == LANGUAGES
    assert all(sum(r["lang"] == lang for r in CORPUS) >= 15 for lang in LANGUAGES)
    # every reply has a reading to check: a letter, or none, within the item's options
    for r in CORPUS + ADVERSARIAL:
        assert 0 <= r["key"] < len(r["options"]) and (r["expected"] is None or 0 <= r["expected"] < len(r["options"]))
    assert len(ADVERSARIAL) == 34 and sum(r["from_issue"] for r in ADVERSARIAL) == 12


# Replies that commit to an option this extraction leaves unread (never misreads): an
# answer after a retraction with no marker, a bare "réponse D", "答案不是A，是C", a
# rejection and a choice each naming its option in brackets; "Ich würde C sagen", "La
# réponse n'est pas B, c'est D", a double negation ("Pneumothorax is not excluded") and a
# choice after a negation in one clause ("Definitely not pneumonia — this is a pneumothorax");
# in the fifth batch, answers after "no es C; es B", "nicht A, sondern C", "Non, pardon,
# C", "me quedo con la C", "a letra A", "最可能是B", and two verdicts in one sentence each
# ("选项C错误，选项B正确", "l'option B est fausse ; l'option D est correcte").
KNOWN_UNREAD = {"holdout-08", "holdout-25", "holdout-29", "holdout3-13",
                "holdout4-26", "holdout4-27", "holdout4-28", "holdout4-33",
                "holdout5-01", "holdout5-03", "holdout5-06", "holdout5-08", "holdout5-09", "holdout5-12",
                "holdout5-14", "holdout5-15"}


@pytest.mark.parametrize("row", CORPUS + ADVERSARIAL, ids=[r["id"] for r in CORPUS + ADVERSARIAL])
def test_each_reply_reads_as_expected(row: dict[str, Any]) -> None:
    got = extract(row["reply"], row["options"])
    if row["id"] in KNOWN_UNREAD:
        assert got.choice is None, got
    else:
        assert got.choice == row["expected"], got
    assert got.how  # every reading names the rule that made it


def _misreads(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(misreads that the key grades right, misreads graded wrong), by id."""
    right, wrong = [], []
    for r in rows:
        got = extract(r["reply"], r["options"]).choice
        if got is not None and got != r["expected"]:
            (right if got == r["key"] else wrong).append(r["id"])
    return right, wrong


def test_no_misread_is_graded_as_right() -> None:
    assert _misreads(CORPUS) == ([], [])
    assert _misreads(ADVERSARIAL) == ([], [])


def test_negations_and_retractions_read_right_or_not_at_all() -> None:
    rows = [r for r in CORPUS if r["kind"] in ("negated", "retracted", "labelled_wrong")]
    rows += [r for r in ADVERSARIAL if r["from_issue"]]
    for r in rows:
        got = extract(r["reply"], r["options"]).choice
        assert got in (None, r["expected"]), r


def _cube(tmp_path: Path, rows: list[dict[str, Any]]) -> Any:
    Image.new("L", (16, 16), 80).save(tmp_path / "xray.png")
    items = [
        Item(id=r["id"], dataset="adversarial", image="xray.png", question=f"Which finding? [{r['id']}]",
             options=tuple(r["options"]), answer=r["key"], task="Disease Diagnosis", modality="X-Ray", part="Chest")
        for r in rows
    ]
    write_jsonl(items, tmp_path / "cube.jsonl")
    return load_cube(tmp_path / "cube.jsonl")


def test_the_adversarial_replies_through_a_local_endpoint(tmp_path: Path, scripted_server, monkeypatch) -> None:
    """As the trial did: the real openai client asks a local server that answers each item
    with its adversarial reply; the real runner grades. No misread is graded correct."""
    monkeypatch.setenv("MEDRCUBE_TEST_KEY", "sk-test-not-a-real-key")
    cube = _cube(tmp_path, ADVERSARIAL)
    scripted_server.set_script({"answers": {f"Which finding? [{r['id']}]": r["reply"] for r in ADVERSARIAL}})
    adapter = OpenAIAdapter("adversarial", base_url=scripted_server.base_url, api_key_env="MEDRCUBE_TEST_KEY")
    result = run_cube(cube, adapter, store=ResponseStore(tmp_path / "store"))
    by_id = {r["id"]: r for r in ADVERSARIAL}
    records = [rec for rec in result.records if rec.variant == "standard"]
    assert len(records) == len(ADVERSARIAL)
    for rec in records:
        row = by_id[rec.item_id]
        assert rec.extracted == row["expected"], (row, rec.how)
        assert rec.outcome is not Outcome.ERROR, rec.error
        if rec.outcome is Outcome.CORRECT:
            assert row["expected"] == row["key"], row
    graded_right = {rec.item_id for rec in records if rec.outcome is Outcome.CORRECT}
    assert not graded_right & {r["id"] for r in ADVERSARIAL if r["from_issue"]}
