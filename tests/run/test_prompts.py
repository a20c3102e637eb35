"""Prompt templates: the reference wording, the reasoning template, the registry."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from medrcube.run.prompts import (
    TEMPLATES,
    get_template,
    prompt_hash,
    render_prompt,
    short_hash,
)


def test_default_template_is_the_reference_wording() -> None:
    # The MedRCube reference evaluator builds exactly this text (scripts/eval.py).
    got = render_prompt(
        "What is the imaging modality of this image?", ["CT", "MRI", "X-Ray", "US"]
    )
    assert got == (
        "Question: What is the imaging modality of this image?\n"
        "Options:\n"
        "A. CT\n"
        "B. MRI\n"
        "C. X-Ray\n"
        "D. US\n"
        "Answer with the option's letter from the given choices directly."
    )


def test_two_options_and_many_options_are_lettered_in_order() -> None:
    two = render_prompt("Is there a fracture?", ["Yes", "No"])
    assert two.splitlines()[2:4] == ["A. Yes", "B. No"]
    many = render_prompt("q", [f"opt{i}" for i in range(8)])
    assert [ln[:2] for ln in many.splitlines()[2:10]] == [f"{c}." for c in "ABCDEFGH"]


def test_reasoning_template_asks_for_a_final_answer_line() -> None:
    got = render_prompt("Which finding?", ["Normal", "Pneumonia"], template="reasoning")
    assert got.startswith("Question: Which finding?\nOptions:\nA. Normal\nB. Pneumonia\n")
    assert "step by step" in got
    assert "ANSWER: X" in got
    assert "Answer with the option's letter from the given choices directly." not in got


def test_registry_lists_both_templates() -> None:
    assert {"default", "reasoning"} <= set(TEMPLATES)
    for name, tpl in TEMPLATES.items():
        assert tpl.name == name and tpl.description


def test_unknown_template_suggests_the_closest() -> None:
    with pytest.raises(ValueError) as e:
        render_prompt("q", ["a", "b"], template="reasonig")
    msg = str(e.value)
    assert "'reasonig'" in msg and "did you mean 'reasoning'" in msg
    assert "default" in msg and "reasoning" in msg
    with pytest.raises(ValueError, match="choices: default, reasoning"):
        get_template("zzzzzz")


@pytest.mark.parametrize("options", [[], ["only"], [str(i) for i in range(27)]])
def test_bad_option_counts_are_rejected(options: list[str]) -> None:
    with pytest.raises(ValueError, match=str(len(options))):
        render_prompt("q", options)


def test_a_bare_string_is_not_an_option_list() -> None:
    with pytest.raises(ValueError, match="sequence of option texts"):
        render_prompt("q", "ABCD")


def test_prompt_hash_is_full_sha256_and_short_hash_its_prefix() -> None:
    p = render_prompt("q", ["a", "b"])
    h = prompt_hash(p)
    assert re.fullmatch(r"[0-9a-f]{64}", h)
    assert short_hash(p) == h[:12]
    assert prompt_hash(p + " ") != h


@given(
    st.text(min_size=0, max_size=200),
    st.lists(st.text(min_size=0, max_size=50), min_size=2, max_size=10),
)
def test_rendered_prompt_round_trips_its_parts(question: str, options: list[str]) -> None:
    p = render_prompt(question, options)
    assert p.startswith(f"Question: {question}\nOptions:\n")
    assert p.endswith("\nAnswer with the option's letter from the given choices directly.")
    for i, text in enumerate(options):
        assert f"\n{'ABCDEFGHIJ'[i]}. {text}\n" in p
    assert prompt_hash(p) == prompt_hash(render_prompt(question, list(options)))
