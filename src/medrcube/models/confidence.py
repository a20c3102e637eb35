"""How sure a model is of its answer: per-option probabilities from what the model gives.

Three sources, each recorded as such on the response and the graded record:

- `logprobs`: an OpenAI-compatible endpoint (OpenAI, vLLM, SGLang) asked with the
  generation options `logprobs: true, top_logprobs: K` returns, per generated token, the
  K most likely tokens with their log-probabilities. At a position where the model
  writes an option letter, the probability mass of each letter is the sum of exp(logprob)
  over the tokens that spell it (" A", "A", "(A" ...). Those masses, normalised over the
  options, are the per-option probabilities; `mass` keeps how much of the distribution
  the option letters held before normalising (a low mass means the position was not
  really a choice among the letters). A letter outside the top K counts as 0.
- `logits`: an in-process `hf:` model is scored at the first answer position, in the
  same forward pass that generates the answer: the softmax over the vocabulary, summed
  over each letter's token spellings, normalised over the options (models/hf_adapter.py).
- `verbal`: the model states a confidence ("CONFIDENCE: 80%") because the prompt asked
  for it (the `verbal` template). A stated number is not a probability the model's
  weights give; it is recorded as `verbal` so that it is never mistaken for one, and
  only when the user chose that template.

A response may name a letter at several positions ("B. Effusion ... so B"): every
position whose emitted token is an option letter is kept as a candidate, and grading
takes the candidate whose letter is the option it extracted (else the first).

This module is pure (standard library only) and imports nothing from run/.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LOGPROBS = "logprobs"
LOGITS = "logits"
VERBAL = "verbal"
SOURCES = (LOGPROBS, LOGITS, VERBAL)

# What the `verbal` prompt template appends to the reference instruction (run/prompts.py).
VERBAL_INSTRUCTION = (
    "Then, on a new line, state how confident you are that your answer is correct, "
    "as a percentage, in exactly this form:\nCONFIDENCE: NN%"
)
_VERBAL = re.compile(r"[(\[]?\s*confidence\s*[:=]\s*(\d{1,3}(?:\.\d+)?)\s*(%?)\s*[)\]]?", re.I)
# Characters around a letter that still spell that letter as a choice: "(B", "B.", " B)".
_LETTER_PUNCT = " \t\n()[]{}*:.,\"'`"
LETTERS = string.ascii_uppercase


@dataclass(frozen=True, slots=True)
class Candidate:
    """One position where the model wrote an option letter."""

    letter: int | None  # index of the letter emitted there (None: the argmax of logits)
    probs: tuple[float, ...]  # per option as shown, summing to 1
    mass: float  # probability mass the option letters held before normalising


@dataclass(frozen=True, slots=True)
class OptionConfidence:
    """What a response says about the model's confidence (see the module doc)."""

    source: str
    candidates: tuple[Candidate, ...] = ()
    stated: float | None = None  # verbal: the stated confidence in [0, 1]

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"confidence source {self.source!r} is not one of {', '.join(SOURCES)}")

    def for_choice(self, choice: int | None) -> dict[str, Any]:
        """The record's confidence for the extracted option `choice` (GradedRecord.confidence)."""
        if self.source == VERBAL:
            return {"source": VERBAL, "value": self.stated if choice is not None else None, "probs": None,
                    "mass": None}
        cand = next((c for c in self.candidates if c.letter == choice), None)
        if cand is None and self.candidates:
            cand = self.candidates[0]
        if cand is None:
            return {"source": self.source, "value": None, "probs": None, "mass": None}
        value = cand.probs[choice] if choice is not None and 0 <= choice < len(cand.probs) else None
        return {"source": self.source, "value": value, "probs": list(cand.probs), "mass": cand.mass}

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "stated": self.stated,
                "candidates": [{"letter": c.letter, "probs": list(c.probs), "mass": c.mass} for c in self.candidates]}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> OptionConfidence:
        cands = tuple(Candidate(c.get("letter"), tuple(float(p) for p in c["probs"]), float(c["mass"]))
                      for c in doc.get("candidates") or ())
        stated = doc.get("stated")
        return cls(str(doc["source"]), cands, float(stated) if stated is not None else None)


def letter_index(token: str, n_options: int) -> int | None:
    """The option index a token spells ("A", " B", "(C", "D." -> 0, 1, 2, 3), or None."""
    core = token.strip(_LETTER_PUNCT)
    if len(core) != 1 or core not in LETTERS:
        return None
    i = LETTERS.index(core)
    return i if i < n_options else None


def normalise(masses: Sequence[float]) -> Candidate | None:
    """Per-option probabilities from unnormalised letter masses; None when all are 0."""
    total = float(sum(masses))
    if not total > 0 or not math.isfinite(total):
        return None
    probs = tuple(m / total for m in masses)
    return Candidate(letter=max(range(len(probs)), key=lambda i: probs[i]), probs=probs, mass=min(1.0, total))


def from_logprobs(logprobs: Any, n_options: int) -> OptionConfidence | None:
    """Per-option probabilities from a chat completion choice's `logprobs` object.

    None when there is nothing to read (no logprobs, or no position names a letter): the
    record then has no confidence rather than a made-up one.
    """
    if not isinstance(logprobs, Mapping) or n_options < 1:
        return None
    content = logprobs.get("content")
    if not isinstance(content, list):
        return None
    cands: list[Candidate] = []
    for entry in content:
        if not isinstance(entry, Mapping):
            continue
        emitted = letter_index(str(entry.get("token", "")), n_options)
        if emitted is None:
            continue
        masses = [0.0] * n_options
        seen: set[str] = set()
        tops = entry.get("top_logprobs") or []
        # The emitted token itself counts even when the server left it out of its top K.
        for alt in [*(tops if isinstance(tops, list) else []), entry]:
            if not isinstance(alt, Mapping):
                continue
            tok, lp = str(alt.get("token", "")), alt.get("logprob")
            if tok in seen or not isinstance(lp, int | float) or isinstance(lp, bool):
                continue
            seen.add(tok)
            i = letter_index(tok, n_options)
            if i is not None:
                masses[i] += math.exp(float(lp))
        cand = normalise(masses)
        if cand is not None:
            cands.append(Candidate(emitted, cand.probs, cand.mass))
    return OptionConfidence(LOGPROBS, tuple(cands)) if cands else None


def from_letter_masses(masses: Sequence[float]) -> OptionConfidence | None:
    """The `logits` confidence of an hf model from each option letter's softmax mass."""
    cand = normalise(masses)
    return OptionConfidence(LOGITS, (cand,)) if cand is not None else None


def verbal_confidence(text: str | None) -> OptionConfidence | None:
    """A stated confidence ("CONFIDENCE: 80%", "Confidence: 0.8"), the last one stated, in
    [0, 1]; None when the text states none or a number outside [0, 100]."""
    found = list(_VERBAL.finditer(text or ""))
    if not found:
        return None
    m = found[-1]
    value = float(m.group(1))
    if m.group(2) == "%" or value > 1.0:
        value /= 100.0
    if not 0.0 <= value <= 1.0:
        return None
    return OptionConfidence(VERBAL, (), value)


def without_verbal(text: str) -> str:
    """The response with its stated confidence cut out ("B (confidence: 80%)" -> "B"),
    so that the number is never read as an answer by extraction and an answer on the
    same line is kept."""
    return _VERBAL.sub("", text).strip()


__all__ = [
    "Candidate", "OptionConfidence", "LOGPROBS", "LOGITS", "VERBAL", "VERBAL_INSTRUCTION",
    "from_logprobs", "from_letter_masses", "verbal_confidence", "letter_index", "without_verbal",
]
