"""The judge's prompt and the strict reading of its verdict."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from medrcube.run.judge import judge_prompt, judge_verdict, parse_judge

CXR = ("Normal", "Pneumonia", "Pneumothorax", "Pleural effusion")


def test_prompt_holds_question_options_response_and_the_reply_format() -> None:
    response = "It could be pneumonia, though effusion is possible. Hmm."
    p = judge_prompt("What is the most likely diagnosis?", CXR, response)
    assert "Question: What is the most likely diagnosis?" in p
    assert "A. Normal\nB. Pneumonia\nC. Pneumothorax\nD. Pleural effusion" in p
    assert f"<<<RESPONSE\n{response}\nRESPONSE>>>" in p
    assert "(A, B, C or D) or the word NONE" in p
    assert "Do not solve" in p  # the judge reports the choice, it does not answer
    assert p.rstrip().endswith("and nothing else.")


def test_prompt_letter_range_follows_the_option_count() -> None:
    assert "(A or B) or the word NONE" in judge_prompt("Fracture?", ("Yes", "No"), "yes")
    with pytest.raises(ValueError, match="options"):
        judge_prompt("q", (), "x")


def test_long_responses_keep_head_and_tail() -> None:
    response = "START " + "x" * 50_000 + " FINAL ANSWER: C"
    p = judge_prompt("q", CXR, response, max_response_chars=1_000)
    assert "START" in p and "FINAL ANSWER: C" in p
    assert "characters omitted" in p
    assert len(p) < 3_000


@pytest.mark.parametrize(
    ("reply", "n", "expected", "status"),
    [
        ("B", 4, 1, "choice"),
        ("b", 4, 1, "choice"),
        (" C\n", 4, 2, "choice"),
        ("**D**", 4, 3, "choice"),
        ("A.", 4, 0, "choice"),
        ('"B"', 4, 1, "choice"),
        ("<think>The response says B, maybe C.</think>\nB", 4, 1, "choice"),
        ("NONE", 4, None, "none"),
        ("none", 4, None, "none"),
        ("None.", 4, None, "none"),
        ("E", 4, None, "invalid"),
        ("C", 2, None, "invalid"),
        ("B. Pneumonia", 4, None, "invalid"),
        ("The response chose B", 4, None, "invalid"),
        ("A or B", 4, None, "invalid"),
        ("AB", 4, None, "invalid"),
        ("", 4, None, "invalid"),
        (None, 4, None, "invalid"),
        ("(B)", 4, None, "invalid"),
    ],
)
def test_verdicts_are_read_strictly(reply: str | None, n: int, expected: int | None, status: str) -> None:
    assert parse_judge(reply, n) == expected
    assert judge_verdict(reply, n) == (expected, status)


@given(st.integers(1, 26), st.data())
def test_every_valid_letter_round_trips(n: int, data) -> None:
    i = data.draw(st.integers(0, n - 1))
    assert parse_judge(string.ascii_uppercase[i], n) == i
    assert parse_judge(string.ascii_lowercase[i] + "\n", n) == i


@given(st.text(max_size=200), st.integers(1, 26))
def test_never_raises_and_stays_in_range(text: str, n: int) -> None:
    got = parse_judge(text, n)
    assert got is None or 0 <= got < n
