"""Readings that weigh one option against the others: per-option verdict lists and yes/no.

- `verdict_list`: "Option A: incorrect / Option B: incorrect / Option C: correct": the
  one option marked correct; two marked correct, or one marked both, is ambiguous.
- `yes_no`: on a yes/no item, a reply that opens with "Yes," / "Nein." / "Non." / "是";
  a reply that says both ("Yes and no.", "Yes — no.") is ambiguous.
"""

from __future__ import annotations

import re

from medrcube.run.extract.codes import AMBIGUOUS, VERDICT_LIST, YES_NO, Extraction
from medrcube.run.extract.cues import (
    NO_WORDS,
    VERDICT_NEGATIVE,
    VERDICT_POSITIVE,
    VERDICT_POSITIVE_SIGNS,
    VERDICT_POSITIVE_WORDS,
    YES_WORDS,
    lower_ascii,
    words,
)
from medrcube.run.extract.reading import _Options
from medrcube.run.extract.statements import _decide, _statements

# One item of a verdict list per line, or per ";" / " / " / "|"; a comma separates items
# only when a label follows ("A: wrong, B: wrong, C: right").
_LABEL_AHEAD = (
    r"(?=(?:(?i:option|choice|opción|opcion|opção|opcao)\s+)?[\(\[]?[A-Z][\)\]]?\s*"
    r"(?:[.:)\-–—=]|\s(?:is|ist|est|es|é)\s))"
)
_SYMBOLS = "✓✔☑✅✗✘❌☒×"
_ITEM_SPLIT = re.compile(
    rf"\n|;|\s/\s|\||,\s*{_LABEL_AHEAD}|(?<=[.!?])\s+|\s+(?=[\(\[][A-Z][\)\]]\s)"
)
_ITEM = re.compile(
    r"[\s>*•#\-–—]*(?:(?:option|choice|opción|opcion|opção|opcao|选项)\s*)?"
    rf"[\(\[]?(?-i:([A-Z]))[\)\]]?\s*(?:[.:)\-–—=]|(?=\s(?:is|ist|est|es|é)\s)|(?=[{_SYMBOLS}]))(.*)",
    re.I | re.S,
)
# Two of these (a letter label opening a line or following a separator) before a list is
# looked for; labels by option text are counted by their separator alone.
_LABEL_LIKE = re.compile(
    r"(?:^|[\n;/|,.!?])[ \t>*•#\-–—]*(?:"
    rf"(?:(?i:option|choice|opción|opcion|opção|opcao|选项)\s*)?[\(\[]?[A-Z][\)\]]?\s*(?:[.:)\-–—=]|\s(?:is|ist|est|es|é)\s|[{_SYMBOLS}])"
    r"|[^\W\d_][^\n:;.,!?]{1,40}[:=])"
    r"|\s[\(\[][A-Z][\)\]]\s",  # "(A) wrong (B) wrong ..."
    re.M,
)
_TEXT_ITEM_SEP = re.compile(r"\s*[:=)\-–—]")  # "Pneumonia: yes", "Normal - no"
# the verdict opens what follows the label (and the option's own text): "A) Normal -
# incorrect", "C. Pneumothorax is correct", "B: wrong"; a verdict-like word later in a
# sentence ("A. Normal: the right lung is clear") is prose, not a verdict
_BEFORE_VERDICT = re.compile(r"[\s:.,;)\]\-–—=*_]*(?:(?:is|ist|est|es|é|would\s+be)\s+)?(?:(?:definitely|clearly|probably)\s+)?")


def _verdict(rest: str, o: _Options) -> bool | None:
    """True for an item marked correct, False for one marked wrong, None for neither."""
    blank = rest[:200].casefold()
    for raw in o.casefolded:  # "C) No finding - correct": the option's own "No" is no verdict
        if blank.lstrip(" \t").startswith(raw):
            blank = blank.replace(raw, " ", 1)
            break
    at = _BEFORE_VERDICT.match(blank).end()  # type: ignore[union-attr]  # matches the empty string
    if VERDICT_NEGATIVE.match(blank, at):  # first: "incorrect" holds "correct"
        return False
    if VERDICT_POSITIVE.match(blank, at):
        return True
    return None


def _item(piece: str, o: _Options) -> tuple[int, str] | None:
    """(option index, what follows its label) for "C: correct" or "Pneumonia: yes"."""
    m = _ITEM.fullmatch(piece)
    if m is not None:
        idx = ord(m.group(1)) - 65
        return (idx, m.group(2)) if idx < o.n else None
    folded = piece.casefold()
    for i, t in enumerate(o.folded):
        if t and folded.startswith(t):
            sep = _TEXT_ITEM_SEP.match(piece, len(t))
            if sep is not None:
                return i, piece[sep.end() :]
    return None


# A list written on one line ("A: ✗ B: ✗ C: ✓ D: ✗", "A: no B: no C: yes D: no"): the
# space before each further label ends an item, once a line holds three labels or more
# (two: a statement with a colon, "I chose C: it is clear", stays a statement).
_INLINE_LABEL = re.compile(rf"(?<=\S)[ \t,]+(?=[\(\[]?(?-i:[A-Z])[\)\]]?[ \t]*(?:[:=][ \t]*\S|[{_SYMBOLS}]))")


def _one_item_a_line(text: str) -> str:
    return "\n".join(_INLINE_LABEL.sub("\n", line) if len(_INLINE_LABEL.findall(line)) >= 2 else line
                     for line in text.split("\n"))


# a Markdown table row "| C | correct |" is the item "C: correct"
_TABLE_ROW = re.compile(r"^[ \t]*\|[ \t]*((?:(?i:option|choice)[ \t]+)?[\(\[]?[A-Z][\)\]]?)[ \t]*\|([^\n]*?)\|?[ \t]*$", re.M)


# Per-option yes/no written after each option: "Pneumothorax (no) / Pneumonia (yes)",
# "A (no), B (yes)", "Pneumothorax? No. Pneumonia? Yes.": read as "Pneumonia: yes".
_YES_NO_MARK = r"(yes|no|ja|nein|oui|non|sí|si|sim|não|nao)"
_PER_OPTION = re.compile(
    rf"[ \t,;/]*([^\W\d_][^\n:;,.!?()\[\]/|]{{0,40}}?|(?<![A-Za-z])[A-Z])\s*(?:[\(\[]\s*{_YES_NO_MARK}\s*[\)\]]|\?\s*{_YES_NO_MARK}(?![^\W\d_]))",
    re.I,
)
_MARK_SIDE = {w: "yes" for w in ("yes", "ja", "oui", "sí", "si", "sim")} | {w: "no" for w in ("no", "nein", "non", "não", "nao")}


def _per_option_marks(text: str) -> str:
    """`text` with per-option yes/no marks written as verdicts, when it holds two or more."""
    if len(_PER_OPTION.findall(text, 0, 4000)) < 2:
        return text
    return _PER_OPTION.sub(lambda m: f"\n{m.group(1)}: {_MARK_SIDE[(m.group(2) or m.group(3)).casefold()]}", text)


def by_verdict_list(text: str, o: _Options) -> Extraction | None:
    if "(" in text or "[" in text or "?" in text:
        text = _per_option_marks(text)
    if "|" in text:
        text = _TABLE_ROW.sub(lambda m: f"{m.group(1)}: {m.group(2).replace('|', ' ')}", text)
    low = lower_ascii(text)
    if VERDICT_POSITIVE_WORDS.isdisjoint(words(low)) and (low.isascii() or not any(c in low for c in VERDICT_POSITIVE_SIGNS)):
        return None  # no option marked right: nothing for a verdict list to choose
    text = _one_item_a_line(text)
    if len(_LABEL_LIKE.findall(text, 0, 4000)) < 2:
        return None  # fewer than two labelled items: no list
    marks: dict[int, set[bool]] = {}
    for piece in _ITEM_SPLIT.split(text):
        item = _item(piece.strip(" \t>*•#-–—"), o)
        if item is None:
            continue
        idx, rest = item
        verdict = _verdict(rest, o)
        if verdict is not None:
            marks.setdefault(idx, set()).add(verdict)
    if len(marks) < 2:
        return None  # one item is a statement ("C is correct"), read as such
    if any(len(v) > 1 for v in marks.values()):
        return Extraction(None, AMBIGUOUS)  # one option marked both right and wrong
    right = [i for i, v in marks.items() if True in v]
    if not right:
        return None  # only rejections: the rest of the chain reads them as such
    if len(right) > 1:
        return Extraction(None, AMBIGUOUS)
    # an explicit declaration elsewhere ("Answer: D") that disagrees is a contradiction
    rank1, _ = _statements(text, o)
    declared = _decide(rank1)
    if declared is not None and declared.choice != right[0]:
        return Extraction(None, AMBIGUOUS)
    return Extraction(right[0], VERDICT_LIST)


_YN_LATIN = "|".join(sorted((w for w in YES_WORDS | NO_WORDS if all(c < "\u0250" for c in w)), key=len, reverse=True))
# the reply's first word, standing alone: "Yes.", "No,", "Ja -", "Non!"; "No pneumothorax"
# negates a finding and is not read as an answer
_FIRST = re.compile(rf"[\s\"'“«(*>-]*(?i:({_YN_LATIN}))(?=\s*(?:[,.;:!—–\-)]|$))")
_FIRST_ZH = re.compile(r"\s*(是的|是|否|不是|没有|有|无)(?=[，。,.！!\s]|$)")
# a yes or a no that is an answer, anywhere: followed by punctuation, the end, or "and" /
# "or" ("Yes and no.", "Yes — no, actually", "Maybe yes, maybe no."); "no doubt", "no
# other finding" are no answers
_ALONE = re.compile(
    rf"(?<![^\W\d_])(?i:({_YN_LATIN}))(?=\s*(?:[,.;:!?—–\-)]|$|\s(?:and|or|und|oder|et|ou|y|o|e)\b))",
    re.M,
)


def _polarity(word: str) -> bool | None:
    w = word.casefold()
    if w in YES_WORDS or w == "是的":
        return True
    if w in NO_WORDS:
        return False
    return None


def _polarities(text: str) -> set[bool]:
    return {p for m in _ALONE.finditer(text) if (p := _polarity(m.group(1))) is not None}


def by_yes_no_contradiction(text: str, o: _Options) -> Extraction | None:
    """A yes/no reply that says both is ambiguous, whatever else reads it."""
    if o.yes_no is None:
        return None
    return Extraction(None, AMBIGUOUS) if len(_polarities(text)) > 1 else None


def by_yes_no(text: str, o: _Options) -> Extraction | None:
    """A yes/no reply that opens with its answer, in any of the cube's languages."""
    if o.yes_no is None:
        return None
    m = _FIRST.match(text) or _FIRST_ZH.match(text)
    if m is None:
        return None
    side = _polarity(m.group(1))
    if side is None or (not side) in _polarities(text):
        return None if side is None else Extraction(None, AMBIGUOUS)
    yes, no = o.yes_no
    return Extraction(yes if side else no, YES_NO)
