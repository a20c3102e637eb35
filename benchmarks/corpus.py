"""A long, mixed corpus of model responses for the extraction benchmark.

The mix follows what chat models answer to a multiple-choice image question: bare
letters in every dress ("B", "(b)", "**B**"), letter with option text, the option text
alone, an answer line after a paragraph of reasoning (the longest and commonest form for
reasoning prompts), think blocks that discuss other letters before the final answer,
JSON objects, \\boxed{}, answers with a leading letter and an explanation, refusals,
and hedges between two options. Each entry carries the choice a careful reader would
take (None for refusals and hedges), so the run reports agreement as a sanity figure.

Deterministic by seed; options come from a medical vocabulary, 2 to 5 per item.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

LETTERS = "ABCDE"
_VOCAB = (
    "pneumonia", "pneumothorax", "cardiomegaly", "pleural effusion", "atelectasis", "no finding", "glioma",
    "meningioma", "pituitary tumour", "ischaemic stroke", "haemorrhage", "benign mass", "malignant mass", "cyst",
    "calcification", "dilated cardiomyopathy", "hypertrophic cardiomyopathy", "myocardial infarction", "CT", "MRI",
    "X-ray", "Ultrasound", "axial", "sagittal", "coronal", "T1-weighted", "T2-weighted", "FLAIR", "upper left",
    "upper right", "lower left", "lower right", "mild", "moderate", "severe", "normal", "abnormal", "liver", "kidney",
)
_REASONING = (
    "The image shows a {modality} study with a region of increased density in the {region} zone.",
    "There is no evidence of a mass effect, and the midline structures appear preserved.",
    "Option {other} would usually present with a different distribution of findings.",
    "Considering the patient's presentation and the imaging pattern, several diagnoses are possible.",
    "The margins are well defined, which argues against an infiltrative process such as option {other}.",
    "Comparing the options, the appearance is most consistent with {text}.",
)
_REFUSALS = (
    "I'm sorry, but I can't provide a diagnosis from a medical image. Please consult a radiologist.",
    "I am unable to interpret medical images. A qualified healthcare professional should review this study.",
    "As an AI, I cannot give medical advice or a diagnosis based on this image.",
)


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str
    text: str
    options: tuple[str, ...]
    expected: int | None  # the chosen option; None for a refusal or a hedge


def make_corpus(n: int, seed: int = 0) -> list[Entry]:
    rng = random.Random(seed)
    kinds = [
        ("bare_letter", 18), ("letter_dressed", 8), ("letter_and_text", 10), ("option_text", 6),
        ("reasoning_answer_line", 22), ("think_block", 12), ("json", 6), ("boxed", 4), ("leading_letter", 8),
        ("refusal", 3), ("hedge", 3),
    ]
    names = [k for k, _ in kinds]
    weights = [w for _, w in kinds]
    out = []
    for _ in range(n):
        k = rng.randint(2, 5)
        options = tuple(rng.sample(_VOCAB, k))
        choice = rng.randrange(k)
        kind = rng.choices(names, weights)[0]
        out.append(_entry(kind, options, choice, rng))
    return out


def _reasoning(rng: random.Random, options: tuple[str, ...], choice: int, sentences: int) -> str:
    others = [LETTERS[i] for i in range(len(options)) if i != choice]
    parts = []
    for _ in range(sentences):
        parts.append(rng.choice(_REASONING).format(modality=rng.choice(("CT", "MRI", "radiograph")),
                                                   region=rng.choice(("upper", "lower", "central")),
                                                   other=rng.choice(others), text=options[choice]))
    return " ".join(parts)


def _entry(kind: str, options: tuple[str, ...], choice: int, rng: random.Random) -> Entry:
    L, T = LETTERS[choice], options[choice]
    if kind == "bare_letter":
        text = rng.choice((L, L.lower(), f"{L}.", f" {L}\n", f"{L})"))
    elif kind == "letter_dressed":
        text = rng.choice((f"({L})", f"**{L}**", f"`{L}`", f"Option {L}", f"[{L}]"))
    elif kind == "letter_and_text":
        text = rng.choice((f"{L}. {T}", f"{L}) {T}", f"({L}) {T}", f"**{L}. {T}**"))
    elif kind == "option_text":
        text = rng.choice((T, T.capitalize(), f"{T}."))
    elif kind == "reasoning_answer_line":
        body = _reasoning(rng, options, choice, rng.randint(2, 6))
        text = body + "\n\n" + rng.choice((f"Answer: {L}", f"The answer is {L}.", f"Final answer: {L}",
                                           f"Therefore, the correct answer is {L}. {T}"))
    elif kind == "think_block":
        other = LETTERS[(choice + 1) % len(options)]
        think = f"<think>\nLet me consider option {other}. " + _reasoning(rng, options, choice, rng.randint(3, 8)) + \
            f"\nMaybe {other}? No, the pattern fits {T} better.\n</think>\n"
        text = think + rng.choice((f"{L}", f"Answer: {L}", f"{L}. {T}"))
    elif kind == "json":
        text = rng.choice((f'{{"answer": "{L}"}}', f'```json\n{{"reasoning": "consistent with {T}", "answer": "{L}"}}\n```'))
    elif kind == "boxed":
        text = _reasoning(rng, options, choice, 2) + f" \\boxed{{{L}}}"
    elif kind == "leading_letter":
        text = f"{L}. " + _reasoning(rng, options, choice, rng.randint(1, 3))
    elif kind == "refusal":
        return Entry(kind, rng.choice(_REFUSALS), options, None)
    else:  # hedge
        other = LETTERS[(choice + 1) % len(options)]
        return Entry(kind, rng.choice((f"It is either {L} or {other}.", f"{L}/{other}", f"Could be {L} or {other}; "
                                       "more views would help.")), options, None)
    return Entry(kind, text, options, choice)
