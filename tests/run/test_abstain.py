"""The abstention variant end to end (issue 16): an added last option, whose choice is a
deferral, through the real openai client and the scripted server; the deferrals are
never errors and the utility matches a hand computation. Also the stated-confidence
template, graded with its confidence recorded as `verbal`."""

from __future__ import annotations

import hashlib
import io

import pytest
from PIL import Image

from medrcube.cube.item import Cube, Item
from medrcube.metrics.accuracy import accuracy
from medrcube.metrics.selective import DeferralCosts, utility
from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.records import Outcome
from medrcube.run.runner import run_cube
from medrcube.run.variants import ABSTAIN_OPTION, parse_variants


def _png(shade: int) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (16, 16), shade).save(buf, "PNG")
    return buf.getvalue()


def _cube(n: int) -> Cube:
    images = {f"img{i}.png": _png(10 * i) for i in range(n)}
    items = tuple(
        Item(id=f"q{i}", dataset="d", image=f"img{i}.png", question=f"What is the diagnosis of case {i}?",
             options=("Normal", "Pneumonia", "Effusion"), answer=1, task="Disease Diagnosis", modality="X-Ray",
             part="Chest")
        for i in range(n)
    )
    return Cube(items=items, source="memory", fingerprint="f", read_image=lambda k: images[k],
                digests={k: hashlib.sha256(v).hexdigest() for k, v in images.items()})


def test_variant_parses_and_adds_the_last_option() -> None:
    (v,) = parse_variants("abstain")
    assert v.spec == "abstain" and v.instances(3) == [("abstain", 0)]
    with pytest.raises(ValueError, match="abstain"):
        parse_variants("abstain:2")


def test_deferrals_are_never_errors_and_utility_matches_hand(scripted_server) -> None:
    # case 0..3: deferred; 4..7: right (B); 8, 9: wrong (C); standard: always B except case 9.
    def reply(prompt: str, body: object) -> str:
        case = int(prompt.split("case ")[1].split("?")[0])
        if ABSTAIN_OPTION in prompt:
            assert "D. " + ABSTAIN_OPTION in prompt  # offered last, lettered after the item's own
            return "D" if case < 4 else ("B" if case < 8 else "C")
        return "C" if case == 9 else "B"

    scripted_server.set_script({}, reply=reply)
    adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, max_retries=0)
    result = run_cube(_cube(10), adapter, variants="standard,abstain", close_adapters=True)
    by_variant = {v: [r for r in result.records if r.variant == v] for v in ("standard", "abstain")}
    abstain = by_variant["abstain"]
    assert [r.outcome for r in abstain] == [Outcome.DEFERRED] * 4 + [Outcome.CORRECT] * 4 + [Outcome.WRONG] * 2
    assert all(r.n_options == 4 and r.options[-1] == ABSTAIN_OPTION for r in abstain)
    assert all(not r.graded for r in abstain[:4])  # not in any accuracy denominator
    a = accuracy(abstain)
    assert (a.n, a.correct) == (6, 4)  # the 4 deferrals are neither wrong nor refused
    assert a.refused == 0 and a.unparsed == 0

    u = utility(abstain, DeferralCosts(error=1.0, deferral=0.1))
    # By hand: cost = (2 errors x 1 + 4 deferrals x 0.1) / 10 = 0.24; utility = 0.76.
    assert (u.correct, u.errors, u.deferred, u.n) == (4, 2, 4, 10)
    assert u.mean_cost == pytest.approx(0.24) and u.utility == pytest.approx(0.76)
    assert u.accuracy_answered == pytest.approx(4 / 6) and u.deferral_rate == pytest.approx(0.4)
    # The standard variant of the same items: 9 right, 1 wrong, utility 0.9.
    assert utility(by_variant["standard"]).utility == pytest.approx(0.9)


def test_verbal_template_records_a_stated_confidence(scripted_server) -> None:
    scripted_server.set_script({"default": "B\nCONFIDENCE: 70%"})
    adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, max_retries=0)
    verbal = run_cube(_cube(2), adapter, template="verbal", close_adapters=True).records
    assert [r.outcome for r in verbal] == [Outcome.CORRECT] * 2
    assert all(r.confidence == {"source": "verbal", "value": pytest.approx(0.7), "probs": None, "mass": None}
               for r in verbal)
    # Not asked for: a stated number in the default template is not recorded.
    scripted_server.set_script({"default": "B\nCONFIDENCE: 70%"})
    adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, max_retries=0)
    plain = run_cube(_cube(2), adapter, close_adapters=True).records
    assert all(r.confidence is None for r in plain)


def test_logprobs_reach_the_graded_record(scripted_server) -> None:
    scripted_server.set_script({"default": "B", "logprobs": {"diagnosis": {"A": 0.2, "B": 0.7, "C": 0.1}}})
    adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, max_retries=0)
    records = run_cube(_cube(3), adapter, params={"logprobs": True, "top_logprobs": 5}, close_adapters=True).records
    for r in records:
        assert r.confidence is not None and r.confidence["source"] == "logprobs"
        assert r.confidence_value == pytest.approx(0.7)
        assert r.confidence["probs"] == pytest.approx([0.2, 0.7, 0.1])
    # and survive the results.jsonl round trip
    from medrcube.records import GradedRecord

    back = GradedRecord.from_dict(records[0].to_dict())
    assert back == records[0]
