"""Reading a response: per-option-set data, what one strategy concluded, preprocessing, and one short answer."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from medrcube.run.extract.codes import AMBIGUOUS, MISMATCH, OUT_OF_RANGE, Extraction
from medrcube.run.extract.cues import CROSSES, NO_WORDS, YES_WORDS

# ----------------------------------------------------------------------------------
# Per-option-set data
# ----------------------------------------------------------------------------------

_NONWORD = re.compile(r"[\W_]+")


def _norm(s: str) -> str:
    """Case- and punctuation-insensitive form used to compare option texts."""
    return _NONWORD.sub(" ", s.casefold()).strip()


@dataclass(frozen=True, slots=True)
class _Options:
    n: int
    norms: tuple[str, ...]
    # normalised text -> option indices having it (duplicates make a text ambiguous)
    by_text: dict[str, tuple[int, ...]]
    # (normalised text, index), longest first: prefix matching prefers "viral pneumonia"
    # over "pneumonia"
    longest_first: tuple[tuple[str, int], ...]
    # options whose text can be spotted in prose: at least 3 characters with a letter,
    # so "1", "A" or "No." are never "mentioned" by accident
    mentionable: tuple[tuple[str, int], ...]
    # two-letter capitalised options ("CT", "US", "MR"): too short to spot in lowercased
    # prose, but unmistakable as a capitalised word ("a CT scan of the chest")
    acronyms: tuple[tuple[re.Pattern[str], int], ...]
    # the options as written, casefolded, longest first: blanked out of a clause before
    # it is searched for negation, so an option "No finding" does not negate itself
    casefolded: tuple[str, ...]
    # the same, by option index (a verdict list may label its items by option text)
    folded: tuple[str, ...]
    # options written in Chinese (or another script without spaces): found as substrings
    cjk: tuple[tuple[str, int], ...]
    # the option that says the study is normal ("Normal", "No finding"), if any
    normal: int | None
    # (index of the yes option, index of the no option) when the item is a yes/no
    # question (an abstain option may be a third), else None
    yes_no: tuple[int, int] | None


@lru_cache(maxsize=4096)
def _options(options: tuple[str, ...]) -> _Options:
    norms = tuple(_norm(str(o)) for o in options)
    by_text: dict[str, list[int]] = {}
    for i, t in enumerate(norms):
        if t:
            by_text.setdefault(t, []).append(i)
    longest = tuple(sorted(((t, i) for i, t in enumerate(norms) if t), key=lambda p: -len(p[0])))
    mentionable = tuple(
        (t, i) for t, i in longest if len(t) >= 3 and any(c.isalpha() for c in t)
    )
    return _Options(
        n=len(options),
        norms=norms,
        by_text={k: tuple(v) for k, v in by_text.items()},
        longest_first=longest,
        mentionable=mentionable,
        acronyms=tuple(
            (re.compile(rf"(?<![A-Za-z0-9]){re.escape(str(x).strip())}(?![A-Za-z0-9])"), i)
            for i, x in enumerate(options)
            if re.fullmatch(r"[A-Z]{2}", str(x).strip())
        ),
        casefolded=tuple(sorted({str(x).casefold().strip() for x in options} - {""}, key=lambda t: -len(t))),
        folded=tuple(str(x).casefold().strip() for x in options),
        cjk=tuple((str(x).casefold().strip(), i) for i, x in enumerate(options) if _CJK.search(str(x))),
        normal=next((i for i, t in enumerate(norms) if t in ("normal", "normal study", "normal findings")), None),
        yes_no=_yes_no_sides(norms),
    )


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def _yes_no_sides(norms: tuple[str, ...]) -> tuple[int, int] | None:
    yes = [i for i, t in enumerate(norms) if t in YES_WORDS]
    no = [i for i, t in enumerate(norms) if t in NO_WORDS]
    return (yes[0], no[0]) if len(yes) == 1 and len(no) == 1 else None


# ----------------------------------------------------------------------------------
# Findings: what one strategy concluded
# ----------------------------------------------------------------------------------

# statuses of a finding
_OK_LETTER = "letter"  # a letter alone
_OK_TEXT = "text"  # an option's text alone
_OK_BOTH = "both"  # letter and its own option's text
_OK_BOXED = "boxed"
_BAD_MISMATCH = "mismatch"
_BAD_AMBIGUOUS = "ambiguous"
_BAD_RANGE = "range"


@dataclass(frozen=True, slots=True)
class _Find:
    choice: int | None
    status: str
    pos: int = 0  # where in the text the finding starts (for how codes)

    @property
    def ok(self) -> bool:
        return self.choice is not None


_BAD_TO_HOW = {_BAD_MISMATCH: MISMATCH, _BAD_AMBIGUOUS: AMBIGUOUS, _BAD_RANGE: OUT_OF_RANGE}


@dataclass(slots=True)
class _Input:
    """What every strategy reads: one reply, as given and cleaned, and its options."""

    raw: str  # normalised text after reasoning, markup kept (for JSON and tags)
    text: str  # cleaned text
    o: _Options


def _unparsed(f: _Find) -> Extraction:
    return Extraction(None, _BAD_TO_HOW.get(f.status, AMBIGUOUS))


def _letter_index(letter: str, o: _Options) -> _Find:
    i = ord(letter.upper()) - 65
    return _Find(i, _OK_LETTER) if 0 <= i < o.n else _Find(None, _BAD_RANGE)


# ----------------------------------------------------------------------------------
# Preprocessing
# ----------------------------------------------------------------------------------

_THINK_CLOSE = re.compile(r"<\s*/\s*think(?:ing)?\s*>", re.I | re.A)
_THINK_OPEN = re.compile(r"<\s*think(?:ing)?\s*>", re.I | re.A)
_SPECIAL_TOKENS = re.compile(
    r"<\|[^<>|\n]{0,40}\|>|</?s>|<eos>|<bos>|<pad>|<end_of_turn>|<start_of_turn>(?:model)?",
    re.I,
)
_LATEX_WRAP = re.compile(
    r"\\(?:text|textbf|textit|texttt|mathrm|mathbf|mathit|mathsf|operatorname|emph)\s*\{([^{}]*)\}"
)
_MARKUP = re.compile(r"[*`$]+|\\[()\[\]]")
_UNDERSCORE_EMPHASIS = re.compile(r"(?<!\w)_+|_+(?!\w)")
_ANSWER_TAG_MARKUP = re.compile(r"<\s*/?\s*answer\s*>", re.I | re.A)


def _split_reasoning(text: str) -> tuple[str, str | None]:
    """(text to read, unterminated reasoning or None).

    Everything up to the last closing think tag is reasoning. Done on the raw text,
    before any normalisation, so that prefixing a think block never changes what is
    read.
    """
    closes = list(_THINK_CLOSE.finditer(text))
    last = closes[-1] if closes else None
    if last is not None:
        text = text[last.end() :]
    m = _THINK_OPEN.search(text)
    if m is None:
        return text, None
    return text[: m.start()], text[m.end() :]


# A chat-template role leaking into the decoded text ("ASSISTANT: B", "assistant\nB").
_ROLE_PREFIX = re.compile(r"\A\s*(?:assistant|gpt|model|bot)\s*(?::|\n)", re.I)


def _normalise(text: str) -> str:
    # NFKC makes full-width letters and punctuation ASCII, but not the ideographic full
    # stop: "答案是A。" ends a sentence as "答案是A." does
    text = unicodedata.normalize("NFKC", _SPECIAL_TOKENS.sub("", text)).replace("。", ". ")
    return _ROLE_PREFIX.sub("", text, count=1)


def _clean(text: str) -> str:
    """Drop emphasis and LaTeX wrappers: "**B**", "$B$", "\\text{B}" all read "B"."""
    for _ in range(3):  # nested wrappers such as \textbf{\text{B}}
        new = _LATEX_WRAP.sub(r"\1", text)
        if new == text:
            break
        text = new
    if "<" in text:
        text = _ANSWER_TAG_MARKUP.sub("\n", text)
    text = _MARKUP.sub("", text)
    return _UNDERSCORE_EMPHASIS.sub("", text) if "_" in text else text


# ----------------------------------------------------------------------------------
# Reading one short answer ("B", "(b)", "B. Pneumonia", "Pneumonia", "\boxed{B}")
# ----------------------------------------------------------------------------------

_BOXED_WHOLE = re.compile(r"\\boxed\s*\{(.*)\}", re.S)
_STRIP_EDGE = " \t\r\n\"'“”‘’«»"
_SHORT_LETTER = re.compile(
    r"(?:(?:option|choice|letter)\s*[:#]?\s*)?"
    r"(?:\(\s*([A-Za-z])\s*\)|\[\s*([A-Za-z])\s*\]|\{\s*([A-Za-z])\s*\}|([A-Za-z]))"
    r"\s*[.:;!,)]*",
    re.I,
)
# a letter label followed by text: "B. Pneumonia", "(B) Pneumonia", "B) x", "B - x", "B: x"
_SHORT_LABEL = re.compile(
    r"(?:(?:option|choice)\s*)?"
    r"(?:\(\s*([A-Za-z])\s*\)|\[\s*([A-Za-z])\s*\]|([A-Za-z])\s*(?:[.:)]|\s[-–—]))"
    r"\s*(\S.*)",
    re.I | re.S,
)
# "B Pneumonia": no separator; read only when the text is the letter's own option
_SHORT_LABEL_NOSEP = re.compile(r"([A-Z])\s+(\S.*)", re.S)


def _short(s: str, o: _Options) -> _Find | None:
    """Read `s` as one complete short answer, or None if it is not one."""
    s = s.strip(_STRIP_EDGE)
    if not s or len(s) > 300:
        return None
    m = _BOXED_WHOLE.fullmatch(s)
    if m:
        inner = _short(m.group(1), o)
        if inner is not None and inner.ok:
            return _Find(inner.choice, _OK_BOXED)
        return inner
    if any(c in s for c in CROSSES):
        return _Find(None, _BAD_AMBIGUOUS)  # "Normal ✗", "A. Normal ✗": a rejection, never the answer
    t = _norm(s)
    if not t:
        return None
    # The option's text itself wins over any reading as a letter: an option text such
    # as "Option A" for option C is still option C.
    hit = o.by_text.get(t)
    if hit is not None:
        return _Find(hit[0], _OK_TEXT) if len(hit) == 1 else _Find(None, _BAD_AMBIGUOUS)
    m = _SHORT_LETTER.fullmatch(s)
    if m:
        return _letter_index(next(g for g in m.groups() if g), o)
    m = _SHORT_LABEL.fullmatch(s)
    if m:
        letter = next(g for g in m.groups()[:3] if g)
        label = _norm(m.group(4))
        found = _letter_index(letter, o)
        if found.choice is None:
            return found
        if label == o.norms[found.choice]:
            return _Find(found.choice, _OK_BOTH)
        if label in o.by_text:
            return _Find(None, _BAD_MISMATCH)
        return None
    m = _SHORT_LABEL_NOSEP.fullmatch(s)
    if m:
        found = _letter_index(m.group(1), o)
        if found.choice is not None and _norm(m.group(2)) == o.norms[found.choice]:
            return _Find(found.choice, _OK_BOTH)
    return None


# ----------------------------------------------------------------------------------
