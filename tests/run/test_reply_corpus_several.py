"""Replies that commit to more than one option, or mark options yes/no (data/several.jsonl).

86 replies in the styles of chat models: lists of letters and of option texts ("Answer:
B, C", "B, C", "Correct answers: B, D", "Answer: pneumonia, cardiomegaly", "答案：B、D"),
another option said to be right as well ("The answer is B. C is also correct.", "B (also
D)", "D ist auch richtig"), per-option yes/no ("Pneumothorax (no) / Pneumonia (yes)"),
hedges ("I'd go with B, but C is also plausible") and controls that do commit to one
option. The first 62 were written before the rules: on first reading 30 were read as an
option they do not commit to (the first of a list, as the trial found) and 7 clear
answers were left unread. The last 24 (`several-after-*`) were written after mending and
read first as they are now, but 2 (a hedge "one could argue for D as well", and "B
(Pneumonia). Cardiomegaly is also present."), since mended. A reply that gives several
options is read as none of them (`ambiguous`), never as its first; `expected` is the
option a reply commits to, null when it commits to none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.records import Outcome
from medrcube.run.extract import extract
from medrcube.run.runner import run_cube
from medrcube.run.store import ResponseStore

DATA = Path(__file__).parent / "data"
FAMILIES = {"list", "text_list", "also", "per_option", "hedge", "control"}
ROWS = [json.loads(line) for line in (DATA / "several.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_families_are_all_there() -> None:
    assert len(ROWS) == 86 and len({r["id"] for r in ROWS}) == len(ROWS)
    assert {r["kind"] for r in ROWS} == FAMILIES
    assert all(sum(r["kind"] == f for r in ROWS) >= 5 for f in FAMILIES)
    assert sum(r["expected"] is None for r in ROWS) >= 50  # most commit to several options


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_each_reply_reads_as_committed(row: dict[str, Any]) -> None:
    got = extract(row["reply"], row["options"])
    assert got.choice == row["expected"], got
    assert got.how  # the rule that decided, recorded with the reply


def test_a_list_is_never_graded_as_its_first_letter() -> None:
    options = ["Normal", "Pneumonia", "Pneumothorax", "Cardiomegaly"]
    for reply in ("Answer: B, C", "B, C", "Correct answers: B, D", "Answer: pneumonia, cardiomegaly",
                  "The answer is B. C is also correct."):
        assert extract(reply, options).choice is None, reply
    assert extract("Pneumothorax (no) / Pneumonia (yes)", options).choice == 1


def test_the_replies_through_a_local_endpoint(tmp_path: Path, scripted_server, monkeypatch) -> None:
    """The real openai client asks the scripted server, which answers each item with its
    reply; the real runner grades: a list is unparsed, never correct."""
    from PIL import Image

    from medrcube.cube import load_cube, write_jsonl
    from medrcube.cube.item import Item

    monkeypatch.setenv("MEDRCUBE_TEST_KEY", "sk-test-not-a-real-key")
    Image.new("L", (16, 16), 80).save(tmp_path / "xray.png")
    items = [Item(id=r["id"], dataset="several", image="xray.png", question=f"Which finding? [{r['id']}]",
                  options=tuple(r["options"]), answer=r["key"], task="Disease Diagnosis", modality="X-Ray", part="Chest")
             for r in ROWS]
    write_jsonl(items, tmp_path / "cube.jsonl")
    cube = load_cube(tmp_path / "cube.jsonl")
    scripted_server.set_script({"answers": {f"Which finding? [{r['id']}]": r["reply"] for r in ROWS}})
    adapter = OpenAIAdapter("several", base_url=scripted_server.base_url, api_key_env="MEDRCUBE_TEST_KEY")
    result = run_cube(cube, adapter, store=ResponseStore(tmp_path / "store"))
    by_id = {r["id"]: r for r in ROWS}
    records = [rec for rec in result.records if rec.variant == "standard"]
    assert len(records) == len(ROWS)
    for rec in records:
        row = by_id[rec.item_id]
        assert rec.extracted == row["expected"], (row, rec.how)
        if row["expected"] is None:
            assert rec.outcome is Outcome.UNPARSED, (row, rec.outcome)
