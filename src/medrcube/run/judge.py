"""The judge: a second model that reads an unparsed response and says which option it chose.

Extraction (`medrcube.run.extract`) never guesses; a response it cannot read is
unparsed. With `--judge SPEC` the runner asks a judge model, through any adapter, the
question built by `judge_prompt`, and reads the verdict with `parse_judge`. The judge
is asked what the response *chose*, never what the right answer is: it must not solve
the question, and a hedge, a refusal or no answer is NONE. Its verdict is strict: one
valid letter or NONE, anything else is treated as no verdict (None), so a chatty or
confused judge cannot turn an unparsed response into a graded one by accident.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

LETTERS = string.ascii_uppercase

# A response longer than this is shown as its head and tail: the answer of a long
# reasoning response is at its end, and its beginning shows how it started.
MAX_RESPONSE_CHARS = 12_000

_THINK_BLOCK = re.compile(r"^\s*<\s*think(?:ing)?\s*>.*?<\s*/\s*think(?:ing)?\s*>", re.I | re.S | re.A)
_VERDICT = re.compile(r"[\s*_`\"'“”]*([A-Za-z]+)[\s*_`\"'“”.]*")


def _shorten(response: str, limit: int) -> str:
    if len(response) <= limit:
        return response
    head = limit // 3
    tail = limit - head
    cut = len(response) - head - tail
    return f"{response[:head]}\n[... {cut} characters omitted ...]\n{response[-tail:]}"


def judge_prompt(
    question: str,
    options: Sequence[str],
    response: str,
    *,
    max_response_chars: int = MAX_RESPONSE_CHARS,
) -> str:
    """The prompt asking a judge model which option `response` chose (a letter or NONE)."""
    n = len(options)
    if not 1 <= n <= len(LETTERS):
        raise ValueError(f"judge_prompt needs 1 to {len(LETTERS)} options, got {n}")
    letters = LETTERS[:n]
    allowed = f"{letters[0]}" if n == 1 else f"{', '.join(letters[:-1])} or {letters[-1]}"
    listing = "\n".join(f"{letters[i]}. {text}" for i, text in enumerate(options))
    shown = _shorten(response or "", max_response_chars)
    return (
        "You are checking how a model answered a multiple-choice question. Do not solve "
        "the question yourself and do not judge whether the answer is correct: report only "
        "which option the model's response chose as its final answer.\n\n"
        f"Question: {question}\n"
        f"Options:\n{listing}\n\n"
        "Model response (between the markers):\n"
        "<<<RESPONSE\n"
        f"{shown}\n"
        "RESPONSE>>>\n\n"
        "Rules:\n"
        "- If the response commits to exactly one option as its final answer, by letter or "
        "by the option's text, reply with that option's letter.\n"
        "- If it names several options without settling on one, hedges, contradicts itself, "
        "refuses, or chooses no listed option, reply NONE.\n"
        f"Reply with a single letter ({allowed}) or the word NONE, and nothing else."
    )


def judge_verdict(text: str | None, n_options: int) -> tuple[int | None, str]:
    """(choice, status) of a judge's reply; status is "choice", "none" or "invalid".

    Accepted: one letter valid for `n_options` or NONE, in any case, optionally wrapped
    in whitespace, Markdown emphasis, quotes or a final period, optionally after a
    leading think block (reasoning judges). Everything else is "invalid".
    """
    if not text:
        return None, "invalid"
    body = _THINK_BLOCK.sub("", text, count=1)
    m = _VERDICT.fullmatch(body)
    if m is None:
        return None, "invalid"
    word = m.group(1)
    if word.upper() == "NONE":
        return None, "none"
    if len(word) == 1 and word.upper() in LETTERS[:n_options]:
        return LETTERS.index(word.upper()), "choice"
    return None, "invalid"


def parse_judge(text: str | None, n_options: int) -> int | None:
    """The option index the judge reported, or None (NONE, or anything not a valid letter)."""
    return judge_verdict(text, n_options)[0]
