"""Prompt templates: how an item's question and options become the text sent to a model.

The `default` template reproduces the MedRCube reference evaluator's wording character
for character, so accuracies measured with it compare with the published tables:

    Question: <question>
    Options:
    A. <option 1>
    B. <option 2>
    Answer with the option's letter from the given choices directly.

The `reasoning` template asks for step-by-step reasoning that ends with a line
`ANSWER: X`, the form `medrcube.run.extract` reads first after a reasoning block.

Templates are looked up by name in `TEMPLATES`; an unknown name is a ValueError that
lists the choices and suggests the closest one, as every registry of this project does.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Sequence
from dataclasses import dataclass

from medrcube.models.confidence import VERBAL_INSTRUCTION
from medrcube.taxonomy import did_you_mean

LETTERS = string.ascii_uppercase

# The reference evaluator's closing instruction, verbatim (scripts/eval.py, _build_prompt).
DIRECT_INSTRUCTION = "Answer with the option's letter from the given choices directly."

REASONING_INSTRUCTION = (
    "Think through the question step by step, considering each option. "
    "Then give your final answer on the last line, in exactly this form:\n"
    "ANSWER: X\n"
    "where X is the letter of the single option you choose."
)


@dataclass(frozen=True, slots=True)
class Template:
    """A prompt template: the question and lettered options, then `instruction`.

    Every template shares the reference evaluator's question/options layout so that the
    only difference between two templates' prompts is the closing instruction.
    """

    name: str
    instruction: str
    description: str

    def render(self, question: str, options: Sequence[str]) -> str:
        lines = [f"Question: {question}", "Options:"]
        lines.extend(f"{LETTERS[i]}. {text}" for i, text in enumerate(options))
        lines.append(self.instruction)
        return "\n".join(lines)


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template(
            "default",
            DIRECT_INSTRUCTION,
            "the MedRCube reference evaluator's prompt: answer with the letter directly",
        ),
        Template(
            "reasoning",
            REASONING_INSTRUCTION,
            "step-by-step reasoning ending with a final 'ANSWER: X' line",
        ),
        # A stated confidence, for endpoints that give no logprobs: asked for only when
        # this template is chosen, and recorded as `verbal` (models/confidence.py).
        Template(
            "verbal",
            f"{DIRECT_INSTRUCTION}\n{VERBAL_INSTRUCTION}",
            "the default prompt, then a stated confidence line 'CONFIDENCE: NN%'",
        ),
    )
}


def get_template(name: str) -> Template:
    """The template called `name`; ValueError naming the choices when there is none."""
    try:
        return TEMPLATES[name]
    except (KeyError, TypeError):
        choices = sorted(TEMPLATES)
        hint = did_you_mean(str(name), choices)
        raise ValueError(
            f"unknown prompt template {name!r}{hint}; choices: {', '.join(choices)}"
        ) from None


def render_prompt(question: str, options: Sequence[str], template: str = "default") -> str:
    """The prompt text for one multiple-choice question.

    `options` are shown in the given order, lettered A, B, C, ...; a rotated (shuffled)
    variant passes its rotated options here. Raises ValueError for an unknown template,
    fewer than two options or more options than there are letters.
    """
    tpl = get_template(template)
    if isinstance(options, str):
        # A bare string is a sequence too; lettering its characters would be silent nonsense.
        raise ValueError(f"options must be a sequence of option texts, not the string {options!r}")
    n = len(options)
    if n < 2:
        raise ValueError(f"a multiple-choice prompt needs at least 2 options, got {n}: {list(options)!r}")
    if n > len(LETTERS):
        raise ValueError(f"at most {len(LETTERS)} options can be lettered, got {n}")
    return tpl.render(question, options)


def prompt_hash(text: str) -> str:
    """The full sha256 hex digest of a prompt (64 characters).

    Records keep the full digest; displays may shorten it with `short_hash`.
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def short_hash(text: str, length: int = 12) -> str:
    """A display prefix of `prompt_hash(text)`."""
    return prompt_hash(text)[:length]
