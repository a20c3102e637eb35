"""Replies that commit to more than one option: never read as one of them.

A multiple-choice item has one answer; a reply that gives several has not chosen. Before
any other reading takes the first of them, these are `ambiguous` (unparsed):

- an answer given as a list, after an answer marker or as a whole line: "Answer: B, C",
  "B, C", "Correct answers: B, D", "Answer: pneumonia, cardiomegaly", "Réponse : B et D",
  "答案：B、D", "A, B, C, D" (items separated by ",", ";", "/", "&", "+", "、" or an
  "and" of the cube's languages; every item up to the first that is no option must be
  one, and two of them different options);
- another option said to be right as well: "The answer is B. C is also correct.",
  "B (also D)", "Also correct: D", "C would also be acceptable", "D ist auch richtig",
  "D est aussi correcte", "D también es correcta", "D也正确"; a hedge that names it
  possible or plausible as well ("I'd go with B, but C is also plausible").

"A is also incorrect", "Also, there is no pneumothorax" and "B, because ..." commit to
nothing more. Per-option yes/no ("Pneumothorax (no) / Pneumonia (yes)") is a verdict
list (verdicts.py): it reads the option marked yes.
"""

from __future__ import annotations

import re

from medrcube.run.extract.codes import AMBIGUOUS, Extraction
from medrcube.run.extract.reading import _Input, _norm, _Options, _short
from medrcube.run.extract.statements import answer_tails

# One item of a list from the next: a punctuation separator (an "and" may follow it) or an "and".
_SEP = re.compile(
    r"\s*(?:[,;/&+、，；]|\band/or\b)\s*(?:(?:and|und|et|y|e|og|en|plus)\s+)?"
    r"|\s+(?:and|und|et|y|e|plus|as\s+well\s+as|sowie)\s+|\s*和\s*",
    re.I,
)
# A list ends with its sentence: a full stop that does not close a letter label ("B. Pneumonia").
_LIST_END = re.compile(r"(?<![\s,;:(\[][A-Z])(?<!^[A-Z])[.!?](?=\s|$)|\n")
_EDGE = " \t*_\"'“”‘’«»[](){}.:;!?"


def _pieces(s: str) -> list[str]:
    m = _LIST_END.search(s)
    return [p for p in _SEP.split(s[: m.start()] if m else s)]


def listed(s: str, o: _Options) -> set[int]:
    """The options a list at the start of `s` names ("B, C", "pneumonia and cardiomegaly"):
    the items from the first on, up to the first that is not exactly one option."""
    s = s.strip(" \t:：-–—=\"'“”‘’")
    if not s or _short(s, o) is not None:
        return set()  # one option as a whole, even if its text holds "and" or a comma
    found: list[int] = []
    for piece in _pieces(s):
        p = piece.strip(_EDGE) if len(piece.strip(_EDGE)) > 1 else piece.strip(" \t")
        f = _short(p, o) if p else None
        if f is None or not f.ok:
            # "(B)" keeps its brackets for _short; a piece that is still no option ends the list
            f = _short(piece.strip(" \t"), o) if piece.strip(" \t") else None
            if f is None or not f.ok:
                break
        assert f.choice is not None
        found.append(f.choice)
    return set(found)


# Another option said to be right as well. Letters are read in the original text (a
# capital standing alone), the cue words case-insensitively.
_POSITIVE = (r"(?:correct|right|true|valid|acceptable|defensible|reasonable|possible|plausible|applicable|"
             r"an?\s+(?:correct|right|valid|acceptable|possible|plausible|reasonable)\s+(?:answer|option|choice)|"
             r"(?:the\s+)?(?:answer|option)\s+too)")
_LETTER = r"(?:(?i:option|choice)\s+)?[\(\[]?(?<![A-Za-z0-9'’\-])([A-Z])[\)\]]?(?![A-Za-z0-9'’\-])"
_ALSO_AFTER = re.compile(
    _LETTER + r"\s+(?i:(?:is|are|was|would|could|might|may|can|seems|appears)\s+(?:\w+\s+)?"
    r"(?:also|as\s+well|too|equally)\s+(?:be\s+)?(?:considered\s+)?" + _POSITIVE
    + r"|(?:is|would\s+be|could\s+be|seems)\s+" + _POSITIVE + r"\s+(?:as\s+well|too)\b"
    r"|(?:ist|wäre|waere)\s+(?:auch|ebenfalls)\s+(?:richtig|korrekt|möglich|moeglich)"
    r"|(?:est|serait)\s+(?:aussi|également|egalement)\s+(?:correcte?|juste|bonne|valable|possible)"
    r"|(?:también|tambien)\s+(?:es|sería|seria)\s+(?:correct[oa]|válid[oa]|valid[oa]|posible)"
    r"|(?:es|sería)\s+(?:también|tambien)\s+(?:correct[oa]|posible)"
    r"|(?:também|tambem)\s+(?:é|e|seria)\s+(?:corret[oa]|válid[oa]|possível|possivel)"
    r"|(?:é|e)\s+(?:também|tambem)\s+(?:corret[oa]|possível))"
    r"|" + r"(?<![A-Za-z0-9])([A-Z])\s*也(?:是)?(?:正确|对|可以)"
    # "one could argue for D as well", "D too"
    r"|(?i:argue|go|opt|vote|make\s+a\s+case)\s+for\s+" + _LETTER + r"\s+(?i:as\s+well|too)\b(?!\s+as\b)"
)
_ALSO_BEFORE = re.compile(
    r"(?<![^\W\d_])(?i:also|as\s+well\s+as|auch|aussi|también|tambien|também|tambem)"
    r"(?:\s+(?i:correct|right|possible|plausible|acceptable|valid))?\s*[:：]?\s*" + _LETTER
    + r"(?=\s*(?:[.,;:!)\]]|$|\n|\s(?i:is|would|could|may|might)\s+(?:also\s+)?(?:be\s+)?" + _POSITIVE + r"))"
)


def _also_texts(text: str, o: _Options) -> set[int]:
    """Options named by their text and said to be right as well ("cardiomegaly is also correct")."""
    low = f" {_norm(text)} "
    cue = re.compile(r" (?:is|are|would|could|might|may|can) (?:\w+ )?(?:also|as well|too|equally) (?:be )?"
                     r"(?:considered )?(?:an? )?(?:correct|right|true|valid|acceptable|possible|plausible|reasonable)\b"
                     r"| (?:is|would be) (?:correct|right) (?:as well|too)\b"
                     r"| (?:is|are) also (?:present|seen|noted|evident|visible|shown)\b")
    found: set[int] = set()
    for t, i in o.mentionable:
        at = low.find(f" {t} ")
        while at >= 0:
            if cue.match(low, at + len(t) + 1):
                found.add(i)
            at = low.find(f" {t} ", at + 1)
    also_colon = re.compile(r" also (?:correct|right|possible|valid|acceptable) ")
    for m in also_colon.finditer(low):
        for t, i in o.mentionable:
            if low.startswith(f" {t} ", m.end() - 1):
                found.add(i)
    return found


def also_right(text: str, o: _Options) -> set[int]:
    """The options a reply says are right (or possible) as well."""
    found: set[int] = set()
    for rx in (_ALSO_AFTER, _ALSO_BEFORE):
        for m in rx.finditer(text):
            letter = next((g for g in m.groups() if g), None)
            if letter is not None and ord(letter) - 65 < o.n:
                found.add(ord(letter) - 65)
    return found | _also_texts(text, o)


def _lines(text: str) -> list[str]:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[:1] + lines[-1:] if len(lines) > 1 else lines


def by_several(inp: _Input, *, lines: bool) -> Extraction | None:
    """`ambiguous` for a reply that commits to two options or more (module docstring);
    `lines`: its first and last lines may be answers (it does not list the options)."""
    text, o = inp.text, inp.o
    if o.n < 2:
        return None
    if also_right(text, o):
        return Extraction(None, AMBIGUOUS)
    candidates = answer_tails(text)
    if lines:
        candidates += _lines(text)
    for tail in candidates:
        if len(listed(tail, o)) > 1:
            return Extraction(None, AMBIGUOUS)
    return None
