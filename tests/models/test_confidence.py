"""Confidence per answer (issue 16): logprobs through the real openai client from the
scripted server, option logits of a tiny hf model against a direct forward pass, the
stated (verbal) fallback, and the response store keeping it."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from medrcube.models.base import Request, Response
from medrcube.models.confidence import (
    LOGPROBS,
    VERBAL,
    OptionConfidence,
    from_logprobs,
    letter_index,
    verbal_confidence,
)
from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.run.store import ResponseStore

OPTIONS = ("Normal", "Pneumonia", "Effusion", "Cardiomegaly")
PROMPT = ("Question: What is the most likely diagnosis?\nOptions:\nA. Normal\nB. Pneumonia\nC. Effusion\n"
          "D. Cardiomegaly\nAnswer with the option's letter from the given choices directly.")


def _ask(adapter: OpenAIAdapter, params: dict) -> Response:
    req = Request(key="k", item_id="i1", prompt=PROMPT, params=params, options=OPTIONS)

    async def go() -> Response:
        try:
            return (await adapter.generate([req]))[0]
        finally:
            await adapter.aclose()

    return asyncio.run(go())


def test_letter_tokens() -> None:
    assert [letter_index(t, 4) for t in ("A", " B", "(C", "D.", " E", "AB", "a", "**B**")] == [0, 1, 2, 3, None,
                                                                                           None, None, 1]


def test_logprobs_through_the_real_openai_client(scripted_server) -> None:
    dist = {"B": 0.6, "C": 0.25, "A": 0.1, "X": 0.05}  # X: a non-option letter, left out
    scripted_server.set_script({"answers": {"What is the most likely diagnosis?": "The answer is B"},
                                "logprobs": {"What is the most likely diagnosis?": dist}})
    adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, max_retries=0)
    r = _ask(adapter, {"logprobs": True, "top_logprobs": 5})
    assert r.ok and r.text == "The answer is B"
    assert r.confidence is not None and r.confidence.source == LOGPROBS
    (cand,) = r.confidence.candidates
    assert cand.letter == 1
    total = 0.6 + 0.25 + 0.1  # D is not in the table: probability 0
    assert cand.probs == pytest.approx((0.1 / total, 0.6 / total, 0.25 / total, 0.0))
    assert cand.mass == pytest.approx(total)
    assert r.confidence.for_choice(1)["value"] == pytest.approx(0.6 / total)
    # The request really asked for them: the server saw both parameters.
    params = scripted_server.stats()["requests"][-1]["params"]
    assert params["logprobs"] is True and params["top_logprobs"] == 5


def test_top_k_cuts_the_tail_and_the_emitted_letter_always_counts(scripted_server) -> None:
    scripted_server.set_script({"default": "C", "logprobs": {"most likely": {"A": 0.5, "B": 0.3, "C": 0.2}}})
    adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, max_retries=0)
    r = _ask(adapter, {"logprobs": True, "top_logprobs": 2})  # C (emitted) is outside the top 2
    assert r.confidence is not None
    (cand,) = r.confidence.candidates
    assert cand.letter == 2
    assert cand.probs == pytest.approx((0.5, 0.3, 0.2, 0.0))


def test_no_logprobs_asked_means_no_confidence(scripted_server) -> None:
    scripted_server.set_script({"default": "B", "logprobs": {"most likely": {"B": 0.9, "A": 0.1}}})
    adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, max_retries=0)
    assert _ask(adapter, {}).confidence is None


def test_several_letter_positions_pick_the_extracted_one() -> None:
    lp = {"content": [
        {"token": "A", "logprob": math.log(0.5), "top_logprobs": [{"token": "A", "logprob": math.log(0.5)},
                                                               {"token": "B", "logprob": math.log(0.5)}]},
        {"token": " or", "logprob": 0.0, "top_logprobs": []},
        {"token": " B", "logprob": math.log(0.8), "top_logprobs": [{"token": " B", "logprob": math.log(0.8)},
                                                                {"token": " A", "logprob": math.log(0.2)}]},
    ]}
    conf = from_logprobs(lp, 2)
    assert conf is not None and len(conf.candidates) == 2
    assert conf.for_choice(1)["value"] == pytest.approx(0.8)
    assert conf.for_choice(0)["value"] == pytest.approx(0.5)
    assert conf.for_choice(None)["value"] is None
    assert from_logprobs({"content": [{"token": "Hello", "logprob": 0.0}]}, 4) is None
    assert from_logprobs(None, 4) is None


def test_verbal_confidence_is_recorded_as_such() -> None:
    c = verbal_confidence("B\nCONFIDENCE: 85%")
    assert c is not None and c.source == VERBAL and c.stated == pytest.approx(0.85)
    assert verbal_confidence("Confidence: 0.7")
    assert verbal_confidence("Confidence: 0.7").stated == pytest.approx(0.7)  # type: ignore[union-attr]
    assert verbal_confidence("no number here") is None
    assert verbal_confidence("confidence: 250%") is None
    assert c.for_choice(1) == {"source": "verbal", "value": pytest.approx(0.85), "probs": None, "mass": None}


def test_the_store_keeps_the_confidence(tmp_path: Path) -> None:
    conf = from_logprobs({"content": [{"token": "B", "logprob": math.log(0.7),
                                       "top_logprobs": [{"token": "A", "logprob": math.log(0.3)}]}]}, 3)
    assert conf is not None
    with ResponseStore(tmp_path) as store:
        store.put("k1", Response(text="B", confidence=conf))
        store.put("k2", Response(text="A"))
    with ResponseStore(tmp_path) as store:
        got = store.get_many(["k1", "k2"])
    assert got["k1"].confidence == conf
    assert got["k2"].confidence is None


def test_a_version_1_store_gains_the_column_and_keeps_its_rows(tmp_path: Path) -> None:
    import sqlite3

    from medrcube.run import store as store_mod

    with ResponseStore(tmp_path) as store:
        store.put("old", Response(text="C"))
    conn = sqlite3.connect(tmp_path / store_mod.DB_NAME)
    conn.execute("ALTER TABLE responses DROP COLUMN confidence")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with ResponseStore(tmp_path) as store:
        assert store.get("old") == Response(text="C")
        store.put("new", Response(text="A", confidence=OptionConfidence(VERBAL, (), 0.4)))
        assert store.get("new").confidence.stated == pytest.approx(0.4)  # type: ignore[union-attr]


# -- hf: option logits -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_adapter(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from medrcube.models.registry import load_adapter
    from medrcube.testing.tiny_vlm import build_tiny_vlm

    return load_adapter(f"hf:{build_tiny_vlm(tmp_path_factory.mktemp('tiny-vlm-conf') / 'model')}")


def test_hf_option_scores_equal_a_direct_forward_pass(tiny_adapter) -> None:
    import io

    import torch
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (120, 30, 200)).save(buf, "PNG")
    data = buf.getvalue()
    from medrcube.models.base import ImageInput

    req = Request(key="k", item_id="i", prompt=PROMPT, images=(ImageInput("d", lambda: data),),
                  params={"max_new_tokens": 3}, options=OPTIONS)
    (r,) = asyncio.run(tiny_adapter.generate([req]))
    assert r.ok and r.confidence is not None and r.confidence.source == "logits"
    (cand,) = r.confidence.candidates

    # The same input, one plain forward pass, softmax at the last position.
    proc, model = tiny_adapter.processor, tiny_adapter.network
    text = proc.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPT}]}],
                                    add_generation_prompt=True, tokenize=False)
    inputs = proc(text=[text], images=[Image.open(io.BytesIO(data)).convert("RGB")], return_tensors="pt")
    with torch.inference_mode():
        probs = torch.softmax(model(**inputs).logits[0, -1].float(), dim=-1)
    ids = tiny_adapter.letter_token_ids(4)
    assert all(ids), "every letter has a single-token spelling in the tiny tokenizer"
    masses = [float(probs[i].sum()) for i in ids]
    total = sum(masses)
    assert cand.probs == pytest.approx([m / total for m in masses], abs=1e-5)
    assert cand.mass == pytest.approx(total, abs=1e-6)


def test_hf_option_scores_can_be_turned_off(tiny_adapter) -> None:
    req = Request(key="k", item_id="i", prompt=PROMPT, params={"max_new_tokens": 2, "option_scores": False},
                  options=OPTIONS)
    (r,) = asyncio.run(tiny_adapter.generate([req]))
    assert r.ok and r.confidence is None


def test_a_stated_confidence_on_the_answer_line_keeps_the_answer() -> None:
    from medrcube.models.confidence import without_verbal
    from medrcube.run.extract import extract

    assert extract(without_verbal("B (confidence: 80%)"), OPTIONS).choice == 1
    assert extract(without_verbal("B\nCONFIDENCE: 80%"), OPTIONS).choice == 1
