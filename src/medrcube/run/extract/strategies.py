"""The extraction strategies, in order: each returns an Extraction (decided, possibly unparsed) or None."""

from __future__ import annotations

import re
from collections.abc import Callable

from medrcube.run.extract.codes import (
    AMBIGUOUS,
    ANSWER_LINE,
    ANSWER_TAG,
    BARE_LETTER,
    BOXED,
    FINAL_AFTER_REASONING,
    LEADING_ANSWER,
    LETTER_AND_TEXT,
    LETTER_MENTION,
    NEGATED,
    OPTION_TEXT,
    OPTION_TEXT_MENTION,
    REFUSAL,
    Extraction,
)
from medrcube.run.extract.cues import CLAUSE_END, CLAUSE_NEGATION
from medrcube.run.extract.json_reading import by_json
from medrcube.run.extract.reading import (
    _OK_BOTH,
    _OK_BOXED,
    _OK_LETTER,
    _OK_TEXT,
    _clean,
    _Find,
    _Input,
    _norm,
    _Options,
    _short,
    _unparsed,
)
from medrcube.run.extract.several import by_several
from medrcube.run.extract.statements import _SENTENCE_END, _after_reasoning, _decide, _parse_tail, _statements
from medrcube.run.extract.verdicts import by_verdict_list, by_yes_no, by_yes_no_contradiction

# The strategies: each returns an Extraction (decided, possibly unparsed) or None
# ----------------------------------------------------------------------------------


_SHORT_HOW = {
    _OK_LETTER: BARE_LETTER,
    _OK_BOXED: BOXED,
    _OK_BOTH: LETTER_AND_TEXT,
    _OK_TEXT: OPTION_TEXT,
}

_ANSWER_TAG = re.compile(r"<\s*answer\s*>(.*?)<\s*/\s*answer\s*>", re.I | re.S | re.A)


def _by_answer_tag(inp: _Input) -> Extraction | None:
    contents = _ANSWER_TAG.findall(inp.raw)
    if not contents:
        return None
    finds = []
    for c in contents:
        c = _clean(c)
        f = _short(c, inp.o) or _parse_tail(c, inp.o)
        if f is None:
            r1, r2 = _statements(c, inp.o)
            f = _decide(r1) or _decide(r2)
        if f is not None:
            finds.append(f)
    decided = _decide(finds)
    if decided is None:
        return None
    return Extraction(decided.choice, ANSWER_TAG) if decided.ok else _unparsed(decided)


def _by_whole(inp: _Input) -> Extraction | None:
    f = _short(inp.text, inp.o)
    if f is None:
        return None
    return Extraction(f.choice, _SHORT_HOW[f.status]) if f.ok else _unparsed(f)


def _by_statements(inp: _Input) -> Extraction | None:
    rank1, rank2 = _statements(inp.text, inp.o)
    decided = _decide(rank1) or _decide(rank2)
    if decided is None:
        return None
    if not decided.ok:
        return _unparsed(decided)
    # A response that opens with one answer and states another ("B\n\nAnswer: C")
    # has two final answers: unparsed, not whichever came last.
    lead = _leading(inp.text, inp.o)
    if lead is not None and lead.choice != decided.choice:
        return Extraction(None, AMBIGUOUS)
    if lead is not None and decided.pos > 0:
        return Extraction(decided.choice, LEADING_ANSWER)  # "C\n\nExplanation: the answer is C"
    if decided.status == _OK_BOXED:
        return Extraction(decided.choice, BOXED)
    how = FINAL_AFTER_REASONING if _after_reasoning(inp.text, decided.pos) else ANSWER_LINE
    return Extraction(decided.choice, how)


_LABEL_LINE = re.compile(r"^[ \t>\-•]*[\(\[]?(?-i:([A-Z]))\s*[.):\]]\s+\S", re.M)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")


def _enumerates_options(text: str) -> bool:
    """Does the response list the options ("A. Normal\\nB. Pneumonia")?"""
    seen: set[str] = set()
    for m in _LABEL_LINE.finditer(text):
        seen.add(m.group(1))
        if len(seen) >= 2:
            return True
    return False


def _leading(text: str, o: _Options) -> _Find | None:
    """The answer a response opens with ("B", "B. Pneumonia", "B. The image ..."), if any.

    None for a response that lists the options: its first line is the list's.
    """
    if _enumerates_options(text):
        return None
    stripped = text.lstrip()
    first = stripped.split("\n", 1)[0]
    return _short(first, o) or _parse_tail(stripped, o, need_separator=True)


def _by_lines(inp: _Input) -> Extraction | None:
    text, o = inp.text, inp.o
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    listed = _enumerates_options(text)
    lead = _leading(text, o)
    last_line = lines[-1]
    final = _short(last_line, o) if len(lines) > 1 else None
    if final is None:
        pieces = _SENTENCE_SPLIT.split(last_line)
        if len(pieces) > 1:
            final = _short(pieces[-1], o)
            if final is not None and final.status == _OK_TEXT:
                final = None  # a closing sentence that is a bare option text is too weak
    if final is not None and listed and final.status not in (_OK_LETTER, _OK_BOXED):
        final = None  # "D. Effusion" closing a list of options is the list, not an answer
    finds = [f for f in (lead, final) if f is not None]
    decided = _decide(finds)
    if decided is None:
        return None
    if not decided.ok:
        return _unparsed(decided)
    if all(f.status == _OK_TEXT for f in finds):
        # A line that is only an option's text ("- Effusion" closing a list of findings)
        # counts only if no other option is mentioned anywhere in the response.
        if _mentions(text, o) - {decided.choice}:
            return Extraction(None, AMBIGUOUS)
    return Extraction(decided.choice, LEADING_ANSWER if lead is not None else FINAL_AFTER_REASONING)


_REFUSAL = re.compile(
    r"\b(?:I|we)\s*(?:am|'m|’m|are|'re|’re)?\s+(?:not\s+able|unable)\s+to\s+"
    r"(?:provide|give|offer|make|interpret|diagnose|analy[sz]e|view|see|assess|evaluate|"
    r"determine|read|access|process|answer|help|review|examine|open|display)\b"
    r"|\b(?:I|we)\s+(?:can\s*not|can't|can’t|won't|won’t|will\s+not|do\s+not|don't|don’t)\s+"
    r"(?:provide|give|offer|make|interpret|diagnose|analy[sz]e|assess|evaluate|determine|"
    r"access|process|answer|help|review|have\s+(?:the\s+)?(?:ability|capability|access)|"
    r"(?:see|view|read|open|examine)\s+(?:the\s+|this\s+|your\s+|any\s+)?(?:image|picture|photo|scan|attachment|file|x-ray|radiograph)s?)\b"
    r"|\bas\s+an?\s+(?:AI|A\.I\.|language\s+model|artificial\s+intelligence|virtual\s+assistant)\b"
    r"|\bI(?:'m|’m|\s+am)\s+(?:sorry|afraid)\b"
    r"|\bI\s+apologi[sz]e\b"
    r"|\b(?:consult|see|contact)\s+(?:with\s+)?(?:a|your)\s+(?:qualified\s+|licensed\s+)?"
    r"(?:doctor|physician|radiologist|healthcare|health\s+care|medical)"
    r"|\bnot\s+(?:able|qualified|permitted|allowed)\s+to\s+(?:provide|give|make|offer)\s+(?:a\s+|any\s+)?(?:medical|diagnos)",
    re.I,
)


def _by_refusal(inp: _Input) -> Extraction | None:
    return Extraction(None, REFUSAL, refused=True) if _REFUSAL.search(inp.text) else None


_HEDGE_PAIR = re.compile(
    r"(?<![A-Za-z0-9'’\-])(?:(?:option|choice)s?\s+)?[\(\[]?(?-i:([A-Z]))[\)\]]?\s*,?\s*"
    r"(?:or|/|and/or|and)\s*(?:(?:option|choice)\s+)?[\(\[]?(?-i:([A-Z]))[\)\]]?(?![A-Za-z0-9'’\-])",
    re.I,
)
_HEDGE_CONTEXT = re.compile(r"\b(?:either|between|could\s+be|might\s+be|may\s+be|options?|choices?)\b|\bor\b|/", re.I)


def _by_hedge(inp: _Input) -> Extraction | None:
    for m in _HEDGE_PAIR.finditer(inp.text):
        a, b = ord(m.group(1)) - 65, ord(m.group(2)) - 65
        if a == b or a >= inp.o.n or b >= inp.o.n:
            continue
        # "A and B" is a hedge only with "either/between/options"; "A or B" always is
        if not _HEDGE_CONTEXT.search(m.group(0)):
            start = max(0, m.start() - 20)
            if not _HEDGE_CONTEXT.search(inp.text[start : m.start()]):
                continue
        return Extraction(None, AMBIGUOUS)
    return None


_OPTION_FORM = re.compile(
    r"\b(?:option|choice|answer)\s+[\(\[]?(?-i:([A-Z]))[\)\]]?(?![A-Za-z0-9'’\-])"
    r"|(?<![A-Za-z0-9])\(\s*(?-i:([A-Z]))\s*\)|(?<![A-Za-z0-9])\[\s*(?-i:([A-Z]))\s*\]",
    re.I,
)
_NEGATION = re.compile(
    r"\b(?:incorrect|wrong|eliminated?|falsch|faux|fausse|incorrecte|incorrect[oa]|incorret[oa]|errad[oa])\b|错误|"
    + CLAUSE_NEGATION.pattern,
    re.I,
)


def _negated(text: str, start: int, end: int) -> bool:
    """Is the mention at text[start:end] negated nearby, within its own sentence?

    A window rather than the whole sentence: "I'm not a radiologist, but the findings
    suggest option C" names C; "option A is incorrect" and "not (A)" reject A.
    """
    lo = max(0, start - 30)
    left = max(text.rfind(". ", lo, start), text.rfind("\n", lo, start), text.rfind("; ", lo, start))
    left = max(left + 1, lo)
    m = _SENTENCE_END.search(text, end, end + 40)
    right = m.start() if m else min(len(text), end + 40)
    return _NEGATION.search(text, left, start) is not None or _NEGATION.search(text, end, right) is not None


def _by_letter_mention(inp: _Input) -> Extraction | None:
    letters: set[int] = set()
    for m in _OPTION_FORM.finditer(inp.text):
        idx = ord(next(g for g in m.groups() if g)) - 65
        if idx >= inp.o.n:
            continue
        if _negated(inp.text, m.start(), m.end()):
            return Extraction(None, AMBIGUOUS)
        letters.add(idx)
    if not letters:
        return None
    if len(letters) > 1:
        return Extraction(None, AMBIGUOUS)
    return Extraction(letters.pop(), LETTER_MENTION)


def _mentions(text: str, o: _Options, *, stop_early: bool = True) -> set[int]:
    """The options whose text appears in `text`.

    With `stop_early`, stops once two options are found: callers that only need to know
    "exactly one" ask no more.
    """
    words = f" {_norm(text)} "
    # characters already covered by a longer option's mention: options are tried
    # longest first, so "viral pneumonia" hides the "pneumonia" inside it
    covered = bytearray(len(words))
    found: set[int] = set()
    for t, i in o.mentionable:
        needle = f" {t} "
        at = words.find(needle)
        while at >= 0:
            s, e = at + 1, at + 1 + len(t)
            if covered.find(0, s, e) >= 0:  # not wholly inside a longer mention
                covered[s:e] = b"\x01" * (e - s)
                found.add(i)
                if stop_early and len(found) > 1:
                    return found
            at = words.find(needle, at + 1)
    for rx, i in o.acronyms:
        if rx.search(text):
            found.add(i)
            if stop_early and len(found) > 1:
                return found
    if o.cjk:  # no spaces to bound a word: "考虑为肺炎", "未见气胸"
        folded = text.casefold()
        for t, i in o.cjk:
            if t in folded:
                found.add(i)
    return found


# Idioms that name the word "normal" without calling the study normal.
_NOT_A_MENTION = re.compile(r"\b(?:within|upper|lower)\s+(?:the\s+)?(?:normal\s+limits?|limits?\s+of\s+normal)\b", re.I)
# "Normal" in prose answers only when it is said of the study ("the study is normal", "a
# normal chest radiograph", "normal findings"), not of one organ ("heart size is normal").
_STUDY = r"(?:study|exam|examination|image|images|radiograph|film|scan|x-ray|chest|findings?|result|ct|mri)"
_STUDY_NORMAL = re.compile(
    rf"\b{_STUDY}\s+(?:is|are|appears?|looks?|seems?)\s+(?:\w+\s+)?normal\b|\bnormal\s+(?:\w+\s+)?{_STUDY}\b"
    r"|\A\W*normal\W*\Z",
    re.I,
)
_CLAUSE = re.compile(rf"(.*?)({CLAUSE_END.pattern}|\Z)", re.I | re.S)


def _clause_mentions(text: str, o: _Options) -> tuple[set[int], set[int]]:
    """(options named in a clause without negation, options named in a negated clause).

    A clause is a sentence (up to ".", ";", "!", "?" or a line end); it is negated when
    a negation cue (cues.CLAUSE_NEGATION) appears in it outside every option's own text,
    so "No finding" as an option does not negate itself. A question names no answer
    ("Pneumonia?"), and a clause that is only a negation ("Unlikely.", "Not seen.")
    negates the one before it.
    """
    affirmed: set[int] = set()
    negated: set[int] = set()
    before: set[int] = set()  # what the previous clause named
    for m in _CLAUSE.finditer(_NOT_A_MENTION.sub(" ", text)):
        clause, end = m.group(1), m.group(2)
        if not clause.strip():
            if not end:
                break
            continue
        found = _mentions(clause, o, stop_early=False)
        if o.normal is not None and o.normal in found and not _STUDY_NORMAL.search(clause):
            found.discard(o.normal)
        blank = clause.casefold()
        for raw in o.casefolded:
            blank = blank.replace(raw, " ")
        denied = CLAUSE_NEGATION.search(blank) is not None
        if not found:
            if denied and len(clause.split()) <= 3 and before:  # "Pneumonia? Unlikely."
                affirmed -= before
                negated |= before
            before = set()
        elif end.strip() == "?":
            before = found  # asked, not answered: its answer may follow
        else:
            (negated if denied else affirmed).update(found)
            before = found
        if not end:
            break
    return affirmed, negated


def _by_option_text(inp: _Input) -> Extraction | None:
    """One option named in prose, and no negation of it: "... consistent with pneumonia".

    "Pneumothorax is not seen." names no answer (`negated`); "No pneumothorax; the
    findings are those of pneumonia." names pneumonia: the others it names are negated.
    """
    o = inp.o
    if not o.mentionable and not o.acronyms and not o.cjk:
        return None
    affirmed, negated = _clause_mentions(inp.text, o)
    if not affirmed:
        return Extraction(None, NEGATED) if negated else None
    if len(affirmed) > 1 or affirmed & negated:
        return Extraction(None, AMBIGUOUS)
    (choice,) = affirmed
    if len(o.by_text.get(o.norms[choice], ())) > 1:
        return Extraction(None, AMBIGUOUS)
    return Extraction(choice, OPTION_TEXT_MENTION)


def _by_several(inp: _Input) -> Extraction | None:
    return by_several(inp, lines=not _enumerates_options(inp.text))


def _by_verdict_list(inp: _Input) -> Extraction | None:
    return by_verdict_list(inp.text, inp.o)


def _by_yes_no_contradiction(inp: _Input) -> Extraction | None:
    return by_yes_no_contradiction(inp.text, inp.o)


def _by_yes_no(inp: _Input) -> Extraction | None:
    return by_yes_no(inp.text, inp.o)


Strategy = Callable[[_Input], Extraction | None]

# The order is the design (see the package docstring): explicit before implicit,
# structured before prose, refusals only after every way of answering was tried.
# Between the two runs the package reads retractions (corrections.py): a reply that
# withdraws its answer is read before any strategy can take the withdrawn one.
EXPLICIT: tuple[tuple[str, Strategy], ...] = (
    ("json", by_json),
    ("answer_tag", _by_answer_tag),
    ("verdict_list", _by_verdict_list),
)
READINGS: tuple[tuple[str, Strategy], ...] = (
    ("several", _by_several),
    ("yes_no_contradiction", _by_yes_no_contradiction),
    ("whole", _by_whole),
    ("statements", _by_statements),
    ("lines", _by_lines),
    ("yes_no", _by_yes_no),
    ("refusal", _by_refusal),
    ("hedge", _by_hedge),
    ("letter_mention", _by_letter_mention),
    ("option_text_mention", _by_option_text),
)
STRATEGIES = EXPLICIT + READINGS
