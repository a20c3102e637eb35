"""Reading answer statements: what follows an answer marker, and explicit statements ranked by how explicit they are."""

from __future__ import annotations

import re

from medrcube.run.extract.cues import (
    MARKER_COLON,
    MARKER_PHRASES,
    MARKER_WORDS,
    MARKER_ZH,
    REJECTED_AFTER,
    REJECTED_SIGN,
    REPORT_MARKERS,
    WRONG_LABEL,
    lower_ascii,
    words,
)
from medrcube.run.extract.reading import (
    _BAD_AMBIGUOUS,
    _BAD_MISMATCH,
    _BOXED_WHOLE,
    _OK_BOTH,
    _OK_BOXED,
    _OK_TEXT,
    _Find,
    _letter_index,
    _norm,
    _Options,
    _short,
)

# Reading what follows an answer marker ("the answer is ___")
# ----------------------------------------------------------------------------------

_TAIL_LETTER = re.compile(
    r"(?:(?:option|choice|letter)\s*[:#]?\s*)?"
    r"(?:\(\s*([A-Za-z])\s*\)|\[\s*([A-Za-z])\s*\]|([A-Za-z]))"
    r"(?![A-Za-z0-9'’\-])",
    re.I,
)
_PROSE_AFTER = re.compile(r"\s+[A-Za-z]")  # "A chest", "a pneumonia": an article, not a letter
_LEADING_SEP = re.compile(r"\s*(?:[.:)\-–—,]\s*|\s+(?=\())")
_BRACKET_SEP = re.compile(r"[\s.:\-–—,]*")
_OPENING_SEP = re.compile(r"[.:),]|\s[-–—]")
_SENTENCE_END = re.compile(r"[.!?;](?=\s|$)|\n")
_TAIL_LEAD = " \t:：-–—=\"'“”‘’"
# another option named after a hedge word: "B or C", "B, but possibly D", "B/C"
_HEDGE_LETTER = re.compile(
    r"(?:\b(?:or|and|possibly|maybe|perhaps|alternatively|also|versus|vs|though|although)\b\W+(?:\w+\W+){0,3}?|/\s*)"
    r"(?:(?:option|choice)\s+)?[\(\[]?(?-i:([A-Z]))[\)\]]?(?![A-Za-z0-9'’\-])",
    re.I,
)
_HEDGE_WORD = re.compile(r"\b(?:or|possibly|maybe|perhaps|alternatively|either|versus|vs)\b", re.I)


def _hedged(segment: str, chosen: int, o: _Options) -> bool:
    """Does `segment` (the rest of the answer's sentence) also name another option?"""
    for m in _HEDGE_LETTER.finditer(segment):
        letter = m.group(1)
        idx = ord(letter) - 65
        if idx >= o.n or idx == chosen:
            continue
        if letter in "AI" and _PROSE_AFTER.match(segment, m.end()) and "(" not in m.group(0):
            continue  # "or a chest ..." style article
        return True
    if _HEDGE_WORD.search(segment):
        seg = f" {_norm(segment)} "
        for t, i in o.mentionable:
            if i != chosen and f" {t} " in seg:
                return True
    return False


_SENTENCE_MAX = 400


def _sentence(s: str) -> str:
    """`s` up to its first sentence end (at most _SENTENCE_MAX characters)."""
    m = _SENTENCE_END.search(s, 0, _SENTENCE_MAX)
    return s[:_SENTENCE_MAX] if m is None else s[: m.start()]


def _prefix_option(s: str, o: _Options) -> tuple[int, str] | None:
    """The longest option text that `s` starts with (word-bounded), and what follows."""
    t = _norm(s)
    for text, i in o.longest_first:
        if t == text or t.startswith(text + " "):
            return i, t[len(text) :]
    return None


def _parse_tail(tail: str, o: _Options, *, need_separator: bool = False) -> _Find | None:
    """Read the answer at the start of `tail` ("(B) Pneumonia", "b.", "pneumonia").

    Returns None when the tail starts with no answer at all ("not clear", "A chest").
    `need_separator` (for a response's first words) requires "B." / "B)" / "(B)" / "B,"
    rather than a bare letter, because a bare capital at the start of prose is a word.
    """
    tail = tail.lstrip(_TAIL_LEAD)
    if not tail:
        return None
    if tail.startswith("\\boxed"):
        m = _BOXED_WHOLE.match(tail[: tail.find("}") + 1]) if "}" in tail else None
        if m:
            inner = _short(m.group(1), o)
            if inner is not None and inner.ok:
                return _Find(inner.choice, _OK_BOXED)
            return inner
    m = _TAIL_LETTER.match(tail)
    if m:
        bare = m.group(3)
        letter = next(g for g in m.groups() if g)
        rest = tail[m.end() :]
        is_word = bare is not None and (
            (bare in "AI" or bare.islower()) and _PROSE_AFTER.match(rest) is not None
        )
        if need_separator and bare is not None and not _OPENING_SEP.match(rest):
            is_word = True
        if not is_word:
            if rest.startswith("?"):
                return None  # "is it B? Let me check ..." is a question, not an answer
            found = _letter_index(letter, o)
            if found.choice is None:
                # "E. coli" on a four-option item may still be an option's text
                by_text = _parse_text(tail, o)
                return by_text if by_text is not None else found
            if bare is None:  # "(B)" / "[B]": the brackets already separate the label
                sep = _BRACKET_SEP.match(rest)
            else:
                sep = _LEADING_SEP.match(rest)
            if REJECTED_SIGN.match(rest) or ((sep is None or "." not in sep.group(0)) and REJECTED_AFTER.match(rest)):
                return _Find(None, _BAD_AMBIGUOUS)  # "B is wrong", "A: incorrect", "A. ✗": rejected, not chosen
            if sep is None:
                # "B or C", "B but possibly D": the rest of the clause follows directly
                return _Find(None, _BAD_AMBIGUOUS) if _hedged(_sentence(rest), found.choice, o) else found
            label = _sentence(rest[sep.end() :])
            named = _prefix_option(label, o)
            if named is not None:
                idx, after = named
                if o.norms[idx] != o.norms[found.choice]:
                    return _Find(None, _BAD_MISMATCH)
                if _hedged(after, found.choice, o) or REJECTED_AFTER.match(after) or REJECTED_SIGN.match(after):
                    return _Find(None, _BAD_AMBIGUOUS)
                return _Find(found.choice, _OK_BOTH)
            # After "B." a new sentence starts and is reasoning; after "B," / "B:" /
            # "B -" the clause goes on and may hedge ("B, but possibly D").
            if "." not in sep.group(0) and _hedged(label, found.choice, o):
                return _Find(None, _BAD_AMBIGUOUS)
            return found
    if need_separator:
        return None
    return _parse_text(tail, o)


def _parse_text(tail: str, o: _Options) -> _Find | None:
    sentence = _sentence(tail)
    named = _prefix_option(sentence, o)
    if named is None:
        return None
    idx, after = named
    if len(o.by_text.get(o.norms[idx], ())) > 1:
        return _Find(None, _BAD_AMBIGUOUS)
    if _hedged(after, idx, o) or REJECTED_AFTER.match(after) or REJECTED_SIGN.match(after):
        return _Find(None, _BAD_AMBIGUOUS)
    return _Find(idx, _OK_TEXT)


# ----------------------------------------------------------------------------------
# Explicit answer statements
# ----------------------------------------------------------------------------------

_BOXED_ANY = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\}){0,300})\}")
# Markers are searched in an ASCII-lowercased copy of the text (same length, so offsets
# carry over) with patterns that start with a literal and no re.I: the regex engine then
# skips quickly to candidate positions, several times faster on long reasoning than
# case-insensitive patterns opening with \b. The word boundary before a match is
# checked in Python (`_starts_word`). Letters are always read from the original text.

# rank 1: "final answer ...", and "Answer: X" declarations (the answer may be on the next
# line when "Answer:" starts a line)
_FINAL = re.compile(
    r"final\s+(?:answer|choice|option|selection|response)\b(?:\s+is\b)?\s*(?:[:：=]|-(?=\s))?"
)
_ANSWER_COLON = re.compile(r"answer\s*(?:[:：=]|-(?=\s))")
_ANSWER_COLON_ZH = re.compile(r"答案\s*(?:[:：=]|-(?=\s)|是|为)")
_LINE_START_JUNK = " \t>#-•"
# rank 2: answer phrases in running prose
_PHRASES: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"(?:answer|option|choice|response|diagnosis|selection)\s+"
        r"(?:is|would\s+be|should\s+be|will\s+be|must\s+be)\b\s*(?:[:：]|-(?=\s))?"
    ),
    re.compile(r"(?:correct|right|best|my|selected|chosen|appropriate)\s+(?:answer|option|choice)s?\s*[:：]"),
    re.compile(
        r"i\s*(?:'d|’d|would|will|'ll|’ll|must|should)?\s+(?:choose|select|pick|go\s+with|opt\s+for)\b"
        r"(?:\s+(?:option|choice|answer))?"
    ),
    re.compile(r"(?:answer|choose|select)\s*[:：]?\s*(?=\(\s*[a-z]\s*\))"),
)
# "So B." / "Therefore, option C.": a conclusion that is only a letter (checked to be a
# capital letter in the original text by _CONCLUDED_LETTER)
_CONCLUSION = re.compile(
    r"(?:so|thus|therefore|hence|it's|it’s|it\s+is|that's|that\s+is|definitely|clearly|likely|probably)"
    r"[ \t]*,?[ \t]+"
)
_CONCLUDED_LETTER = re.compile(
    r"(?:(?i:option|choice)\s+)?[\(\[]?[A-Z][\)\]]?[ \t]*(?:[.!]|\n|$)"
)
# "B is correct", "Option C is the most likely answer": the verb phrase is found in the
# lowercased text, the letter before it in the original (_LETTER_BEFORE)
_LETTER_FIRST = re.compile(
    r"(?:is|seems|appears|would\s+be|looks)\s+(?:to\s+be\s+)?(?:the\s+)?"
    r"(?:correct|right|best|most\s+(?:likely|appropriate|accurate|consistent|probable)|answer)\b"
)
_LETTER_BEFORE = re.compile(
    r"(?<![A-Za-z0-9'’\-])(?:(?i:option|choice)\s+)?[\(\[]?([A-Z])[\)\]]?\s+\Z"
)


def _starts_word(low: str, pos: int) -> bool:
    if pos == 0:
        return True
    c = low[pos - 1]
    return not (c.isalnum() or c == "_")


def _line_start(text: str, pos: int) -> bool:
    # Bounded look-back: a line whose start is 200 characters back is not a short
    # "Answer:" line, and unbounded scans would make huge inputs quadratic.
    lo = max(0, pos - 200)
    nl = text.rfind("\n", lo, pos)
    if nl < 0 and lo > 0:
        return False
    return not text[nl + 1 : pos].strip(_LINE_START_JUNK)


_TAIL_MAX = 400  # an answer sits right after its marker; more is reasoning


def _tail_at(text: str, pos: int, *, next_line: bool) -> str:
    end = text.find("\n", pos, pos + _TAIL_MAX)
    tail = text[pos : pos + _TAIL_MAX] if end < 0 else text[pos:end]
    if next_line and not tail.strip(_TAIL_LEAD) and end >= 0:
        # "**Final Answer:**\n\nB. Pneumonia": the answer is on the next line
        for line in text[end + 1 : end + 1 + 4 * _TAIL_MAX].split("\n", 4)[:4]:
            if line.strip():
                return line[:_TAIL_MAX]
    return tail


def _statements(text: str, o: _Options) -> tuple[list[_Find], list[_Find]]:
    """(rank-1 findings, rank-2 findings) of explicit answer statements in `text`."""
    low = lower_ascii(text)
    rank1: list[_Find] = []
    rank2: list[_Find] = []

    def read(pos: int, start: int, out: list[_Find], *, next_line: bool) -> None:
        if WRONG_LABEL.search(text, max(0, start - 25), start):
            return  # "Wrong answer: A", "falsche Antwort: C": a rejection, never the answer
        f = _parse_tail(_tail_at(text, pos, next_line=next_line), o)
        if f is not None:
            out.append(_Find(f.choice, f.status, start))

    if "\\boxed" in text:
        for m in _BOXED_ANY.finditer(text):
            f = _short(m.group(1), o)
            if f is not None:
                rank1.append(_Find(f.choice, _OK_BOXED if f.ok else f.status, m.start()))
    for m in _FINAL.finditer(low):
        if _starts_word(low, m.start()):
            read(m.end(), m.start(), rank1, next_line=True)
    # the other languages' markers only where one of their words appears (most replies: none)
    other_languages = not MARKER_WORDS.isdisjoint(words(low)) or any(r in low for r in REPORT_MARKERS)
    colon_markers = (_ANSWER_COLON, MARKER_COLON) if other_languages else (_ANSWER_COLON,)
    colons = [m for rx in colon_markers for m in rx.finditer(low) if _starts_word(low, m.start())]
    if "答案" in text:  # Chinese has no word boundaries: "正确答案：B"
        colons += _ANSWER_COLON_ZH.finditer(text)
    for m in colons:
        first = _line_start(text, m.start()) or low[max(0, m.start() - 12) : m.start()].rstrip().endswith("final")
        read(m.end(), m.start(), rank1, next_line=first)
    for rx in _PHRASES + MARKER_PHRASES if other_languages else _PHRASES:
        for m in rx.finditer(low):
            if _starts_word(low, m.start()):
                read(m.end(), m.start(), rank2, next_line=False)
    if "选" in text:  # "我选B", "应选D", "正确选项是A"
        for m in MARKER_ZH.finditer(text):
            read(m.end(), m.start(), rank2, next_line=False)
    for m in _CONCLUSION.finditer(low):
        if _starts_word(low, m.start()) and _CONCLUDED_LETTER.match(text, m.end()):
            read(m.end(), m.start(), rank2, next_line=False)
    for m in _LETTER_FIRST.finditer(low):
        if not _starts_word(low, m.start()):
            continue
        before = _LETTER_BEFORE.search(text, max(0, m.start() - 30), m.start())
        if before is None:
            continue
        f = _letter_index(before.group(1), o)
        if f.choice is not None and _hedged(_sentence(text[m.end() : m.end() + 300]), f.choice, o):
            f = _Find(None, _BAD_AMBIGUOUS)  # "B is most likely, or possibly C"
        rank2.append(_Find(f.choice, f.status, before.start()))
    return rank1, rank2


# "The correct answers are B and D", "answers: B, D": a plural marker (a list follows)
_PLURAL = re.compile(r"(?:answers|options|choices)\s*(?:(?:are|would\s+be)\b\s*[:：]?|[:：])")


def answer_tails(text: str) -> list[str]:
    """What follows each answer marker of `text` (the declarations and phrases that
    `_statements` reads, and plural markers), up to the line's end: where a reply that
    answers with a list ("Answer: B, C") gives it."""
    low = lower_ascii(text)
    starts: list[tuple[int, int]] = []  # (marker start, its end)
    rxs: list[re.Pattern[str]] = [_FINAL, _ANSWER_COLON, _PLURAL, MARKER_COLON, *_PHRASES, *MARKER_PHRASES]
    for rx in rxs:
        starts += [(m.start(), m.end()) for m in rx.finditer(low) if _starts_word(low, m.start())]
    if "答案" in text:
        starts += [(m.start(), m.end()) for m in _ANSWER_COLON_ZH.finditer(text)]
    return [_tail_at(text, end, next_line=True) for start, end in sorted(starts)
            if not WRONG_LABEL.search(text, max(0, start - 25), start)]


def _decide(finds: list[_Find]) -> _Find | None:
    """All findings of one rank must agree; any hedge or mismatch makes them unparsed."""
    if not finds:
        return None
    for f in finds:
        if not f.ok:
            return f
    choices = {f.choice for f in finds}
    if len(choices) > 1:
        return _Find(None, _BAD_AMBIGUOUS)
    first = min(finds, key=lambda f: f.pos)
    boxed = all(f.status == _OK_BOXED for f in finds)
    return _Find(first.choice, _OK_BOXED if boxed else first.status, first.pos)


def _after_reasoning(text: str, pos: int) -> bool:
    """Is there reasoning (a sentence or a line) before position `pos`?"""
    before = text[:pos].strip()
    return "\n" in before or len(before) > 80 or _SENTENCE_END.search(before) is not None


# ----------------------------------------------------------------------------------
