"""Retraction and self-correction: the answer a reply commits to last.

"Answer: A. Actually no, B." commits to B; "I pick B. Just kidding: C." to C; "I pick B.
Just kidding." to nothing (`retracted`, unreadable). A cue (cues.RETRACTION_STRONG /
RETRACTION_WEAK) counts only after a reading: the text before it must read as an answer
for there to be something to withdraw. What follows is read by the same chain, so a
second correction is followed too. A weak cue ("actually", "wait") withdraws an answer
only when what follows names another answer or says no; a strong one ("just kidding",
"scratch that", "A. No, B.") always. A correction read only from prose (an option named
in passing after "actually") is not certain: ambiguous, never a letter.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from medrcube.run.extract.codes import (
    AMBIGUOUS,
    LETTER_MENTION,
    OPTION_TEXT_MENTION,
    RETRACTED,
    SELF_CORRECTION,
    Extraction,
)
from medrcube.run.extract.cues import (
    CLAUSE_NEGATION,
    CUE_CJK,
    CUE_WORDS,
    RETRACTION_NO,
    RETRACTION_NO_OPENING,
    RETRACTION_STRONG,
    RETRACTION_WEAK,
    lower_ascii,
    words,
)

_MAX_CUES = 6  # a reply arguing with itself longer than this is read as it stands
_MAX_DEPTH = 4
# "no, B." / ": C." after the cue: the correction's own opening, not part of the answer
_OPENING = re.compile(r"\A[\s:,;.!—–\-，。：；！]*(?:(?:no|nein|non|não)\b[\s:,;.!—–\-，。：；！]*)?(?:不[，,]\s*)?", re.I)
_WEAK_READINGS = frozenset({LETTER_MENTION, OPTION_TEXT_MENTION})
_NO = frozenset({"no", "nein", "non", "não"})

Read = Callable[[str], Extraction]


def _word_cue(low: str, m: re.Match[str]) -> bool:
    """A cue that starts with a letter must start a word ("wait", not "await")."""
    first, at = m.group(0)[0], m.start()
    return not ("a" <= first <= "z") or at == 0 or not low[at - 1].isalpha()


def _cues(text: str) -> list[tuple[re.Match[str], bool]]:
    low = lower_ascii(text)
    found: list[tuple[re.Match[str], bool]] = []
    said = words(low)
    if not _NO.isdisjoint(said):  # every form RETRACTION_NO reads
        opening = RETRACTION_NO_OPENING.match(low)
        found += [(opening, True)] if opening else []
        found += [(m, True) for m in RETRACTION_NO.finditer(low)]
    if not CUE_WORDS.isdisjoint(said) or (not low.isascii() and any(c in low for c in CUE_CJK)):
        found += [(m, True) for m in RETRACTION_STRONG.finditer(low) if _word_cue(low, m)]
        found += [(m, False) for m in RETRACTION_WEAK.finditer(low) if _word_cue(low, m)]
    found.sort(key=lambda p: p[0].start())
    return found[:_MAX_CUES]


def _opening_stripped(said: str) -> str:
    """What a correction says, without its opening ("no, ", ": ", "sorry, I mean ")."""
    for _ in range(_MAX_CUES):
        said = said[_OPENING.match(said).end() :]  # type: ignore[union-attr]  # \A... always matches
        low = lower_ascii(said)
        cue = RETRACTION_NO_OPENING.match(low) or RETRACTION_STRONG.match(low) or RETRACTION_WEAK.match(low)
        if cue is None or cue.end() == 0:
            return said
        said = said[cue.end() :]
    return said


def read_corrected(text: str, read: Read, depth: int = 0) -> Extraction | None:
    """The committed answer of `text` when it withdraws an earlier one, else None.

    `read` is the extraction chain without this step (a slice of the reply in, an
    Extraction out).
    """
    if depth >= _MAX_DEPTH:
        return None
    for m, strong in _cues(text):
        # a "no" cue opens with the punctuation before it, which belongs to the prefix
        # ("is it A? No, ..." asks rather than answers)
        prefix = text[: m.start() + 1] if m.group(0)[0] in ".!;:,?—–-" else text[: m.start()]
        if not prefix.strip():
            continue
        before = read(prefix)
        if before.choice is None:
            continue  # nothing committed before this cue: nothing to withdraw
        said = text[m.end() :]
        rest = _opening_stripped(said)
        after = read_corrected(rest, read, depth + 1) or read(rest)
        if after.choice is not None:
            if after.choice == before.choice:
                return before  # "B. Actually, B is right": confirmed, not corrected
            if after.how in _WEAK_READINGS:
                return Extraction(None, AMBIGUOUS)  # "B. Actually, pneumothorax would ...": not certain
            return Extraction(after.choice, SELF_CORRECTION)
        if strong or CLAUSE_NEGATION.search(said) or after.how not in ("no_match", "empty"):
            return Extraction(None, RETRACTED)
        # a weak cue with nothing after it that answers or says no: emphasis, not a retraction
    return None
