"""The stable how codes of answer extraction (written to results.jsonl, counted in reports) and its result value."""

from __future__ import annotations

import string
from dataclasses import dataclass

LETTERS = string.ascii_uppercase

# --- how codes (stable: they are written to results.jsonl and counted in reports) ---
EMPTY = "empty"
JSON = "json"
ANSWER_TAG = "answer_tag"
BARE_LETTER = "bare_letter"
BOXED = "boxed"
LETTER_AND_TEXT = "letter_and_text"
OPTION_TEXT = "option_text"
ANSWER_LINE = "answer_line"
FINAL_AFTER_REASONING = "final_answer_after_reasoning"
LEADING_ANSWER = "leading_answer"
REFUSAL = "refusal"
LETTER_MENTION = "letter_mention"
OPTION_TEXT_MENTION = "option_text_mention"
AMBIGUOUS = "ambiguous"
MISMATCH = "letter_text_mismatch"
OUT_OF_RANGE = "out_of_range"
UNTERMINATED_THINK = "unterminated_think"
NO_MATCH = "no_match"
VERDICT_LIST = "verdict_list"  # "Option A: incorrect / Option C: correct / ...": the one marked correct
SELF_CORRECTION = "self_correction"  # "Answer: A. Actually no, B.": the answer committed last
RETRACTED = "retracted"  # "I pick B. Just kidding.": the answer was withdrawn, none replaced it
YES_NO = "yes_no"  # "Ja, ..." / "Non." on a yes/no item
NEGATED = "negated"  # "Pneumothorax is not seen.": the only option named is negated

HOW_CODES: tuple[str, ...] = (
    EMPTY, JSON, ANSWER_TAG, BARE_LETTER, BOXED, LETTER_AND_TEXT, OPTION_TEXT,
    ANSWER_LINE, FINAL_AFTER_REASONING, LEADING_ANSWER, REFUSAL, LETTER_MENTION,
    OPTION_TEXT_MENTION, AMBIGUOUS, MISMATCH, OUT_OF_RANGE, UNTERMINATED_THINK, NO_MATCH,
    VERDICT_LIST, SELF_CORRECTION, RETRACTED, YES_NO, NEGATED,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Extraction:
    """The chosen option (index as shown) or None, how that was decided, and refusal."""

    choice: int | None
    how: str
    refused: bool = False

    @property
    def parsed(self) -> bool:
        return self.choice is not None

    @property
    def letter(self) -> str | None:
        return None if self.choice is None else LETTERS[self.choice]


