"""Answer extraction that never guesses: which option a free-text response chose.

`extract(text, options)` returns an `Extraction(choice, how, refused)`: the index of the
chosen option (as shown to the model) or None, a short stable code saying how the
decision was made, and whether the response is a refusal. It never picks a letter when
the response does not name exactly one option: hedged, contradictory or unrecognised
output is unparsed (choice None), for a judge or a human to look at, never a guess.

Only letters valid for the item count (A-D for four options, A-B for two). The article
"A" and the pronoun "I" are letters only where the form says so ("A.", "(A)", "the
answer is A", a response that is just "A"), never in prose ("A chest X-ray shows ...").

Pipeline
--------
1. Reasoning is cut off: everything up to the last `</think>` (or `</thinking>`) is
   reasoning and is ignored, so a think block, whatever letters it discusses, never
   changes the result. An unterminated `<think>` (the model ran out of tokens or never
   closed it) leaves nothing to read except an explicit final answer in its last lines.
2. Chat special tokens (`<|im_end|>`, `</s>`, ...) are dropped, the text is NFKC
   normalised (full-width letters and colons become ASCII), and Markdown/LaTeX emphasis
   (`**B**`, `$B$`, `\\text{B}`, backticks) is removed for the text-based strategies.
3. Strategies run in order; the first one with an opinion wins, and an opinion may be
   "unparsed" (a strong strategy that finds contradictory evidence stops the chain
   rather than letting a weaker one guess). The order goes from the most explicit,
   least ambiguous form of an answer to the weakest:

   1. `empty`: nothing after the reasoning, nothing to read.
   2. `json`: `{"answer": "B"}`, fenced or embedded. Structured output is explicit,
      and its other fields (a "reasoning" string) must not be read as prose.
   3. `answer_tag`: `<answer>B</answer>`, as R1-style medical models write.
   4. `bare_letter`, `boxed`, `letter_and_text`, `option_text`: the whole response is
      one short answer ("b", "(B)", "**B**", "\\boxed{B}", "B. Pneumonia",
      "Pneumonia"), the least ambiguous form there is. An option's exact text wins
      over reading it as a letter.
   5. `answer_line`, `final_answer_after_reasoning`, `boxed`: explicit answer
      statements ("Answer: B", "The answer is B", "Final answer: B", "\\boxed{B}",
      "B is correct", "So B."). Declarations ("Answer: X", "final
      answer", \\boxed) outrank answer phrases in running prose, so letters discussed
      during reasoning do not count; within the deciding rank all statements must
      agree. `answer_line` when the statement opens the response,
      `final_answer_after_reasoning` when reasoning precedes it.
   6. `leading_answer`, `final_answer_after_reasoning`: a response that opens with an
      answer ("B. The image shows ...") or ends with one on its own line; when both
      are present they must agree. A response that lists the options ("A. ...\\nB.
      ...") echoes the prompt, so its lines are not read as answers.
   7. `refusal`: checked only now, so that "I am not a doctor, but the answer is B"
      stays an answer.
   8. `ambiguous`: a hedge between letters ("A or B", "B/C") anywhere.
   9. `letter_mention`: one option-form letter ("option C", "(C)") across the whole
      text, none of them negated ("option A is incorrect").
   10. `option_text_mention`: exactly one option's text appears in prose, not negated
       ("... consistent with pneumonia"); "A chest X-ray shows consolidation." is read
       only if "Consolidation" is an option and no other option is mentioned.
   11. `no_match`: nothing above applied.

   Other codes: `ambiguous` (hedged or contradictory answers), `letter_text_mismatch`
   ("B. Effusion" where B is Pneumonia), `out_of_range` ("E" on a four-option item),
   `unterminated_think` (an unclosed reasoning block with no final answer).

The strategies are small functions over precompiled regexes; per option set the
normalised option texts are computed once (cached), which keeps extraction fast
(measured in benchmarks/).
"""

from __future__ import annotations

import json
import re
import string
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

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

HOW_CODES: tuple[str, ...] = (
    EMPTY, JSON, ANSWER_TAG, BARE_LETTER, BOXED, LETTER_AND_TEXT, OPTION_TEXT,
    ANSWER_LINE, FINAL_AFTER_REASONING, LEADING_ANSWER, REFUSAL, LETTER_MENTION,
    OPTION_TEXT_MENTION, AMBIGUOUS, MISMATCH, OUT_OF_RANGE, UNTERMINATED_THINK, NO_MATCH,
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
    )


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
    last = None
    for last in _THINK_CLOSE.finditer(text):
        pass
    if last is not None:
        text = text[last.end() :]
    m = _THINK_OPEN.search(text)
    if m is None:
        return text, None
    return text[: m.start()], text[m.end() :]


# A chat-template role leaking into the decoded text ("ASSISTANT: B", "assistant\nB").
_ROLE_PREFIX = re.compile(r"\A\s*(?:assistant|gpt|model|bot)\s*(?::|\n)", re.I)


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", _SPECIAL_TOKENS.sub("", text))
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
        if not found.ok:
            return found
        if label == o.norms[found.choice]:
            return _Find(found.choice, _OK_BOTH)
        if label in o.by_text:
            return _Find(None, _BAD_MISMATCH)
        return None
    m = _SHORT_LABEL_NOSEP.fullmatch(s)
    if m:
        found = _letter_index(m.group(1), o)
        if found.ok and _norm(m.group(2)) == o.norms[found.choice]:
            return _Find(found.choice, _OK_BOTH)
    return None


# ----------------------------------------------------------------------------------
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
            if not found.ok:
                # "E. coli" on a four-option item may still be an option's text
                by_text = _parse_text(tail, o)
                return by_text if by_text is not None else found
            if bare is None:  # "(B)" / "[B]": the brackets already separate the label
                sep = _BRACKET_SEP.match(rest)
            else:
                sep = _LEADING_SEP.match(rest)
            if sep is None:
                # "B or C", "B but possibly D": the rest of the clause follows directly
                return _Find(None, _BAD_AMBIGUOUS) if _hedged(_sentence(rest), found.choice, o) else found
            label = _sentence(rest[sep.end() :])
            named = _prefix_option(label, o)
            if named is not None:
                idx, after = named
                if o.norms[idx] != o.norms[found.choice]:
                    return _Find(None, _BAD_MISMATCH)
                if _hedged(after, found.choice, o):
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
    if _hedged(after, idx, o):
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
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

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
    low = text.translate(_ASCII_LOWER)
    rank1: list[_Find] = []
    rank2: list[_Find] = []

    def read(pos: int, start: int, out: list[_Find], *, next_line: bool) -> None:
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
    colons = [m for m in _ANSWER_COLON.finditer(low) if _starts_word(low, m.start())]
    if "答案" in text:  # Chinese has no word boundaries: "正确答案：B"
        colons += _ANSWER_COLON_ZH.finditer(text)
    for m in colons:
        first = _line_start(text, m.start()) or low[max(0, m.start() - 12) : m.start()].rstrip().endswith("final")
        read(m.end(), m.start(), rank1, next_line=first)
    for rx in _PHRASES:
        for m in rx.finditer(low):
            if _starts_word(low, m.start()):
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
        if f.ok and _hedged(_sentence(text[m.end() : m.end() + 300]), f.choice, o):
            f = _Find(None, _BAD_AMBIGUOUS)  # "B is most likely, or possibly C"
        rank2.append(_Find(f.choice, f.status, before.start()))
    return rank1, rank2


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
# The strategies: each returns an Extraction (decided, possibly unparsed) or None
# ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Input:
    raw: str  # normalised text after reasoning, markup kept (for JSON and tags)
    text: str  # cleaned text
    o: _Options


def _unparsed(f: _Find) -> Extraction:
    return Extraction(None, _BAD_TO_HOW.get(f.status, AMBIGUOUS))


_SHORT_HOW = {
    _OK_LETTER: BARE_LETTER,
    _OK_BOXED: BOXED,
    _OK_BOTH: LETTER_AND_TEXT,
    _OK_TEXT: OPTION_TEXT,
}

_JSON_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.S)
_JSON_OBJECT = re.compile(r"\{[^{}]{0,2000}\}")
_ANSWER_KEYS = frozenset(
    {
        "answer", "final_answer", "finalanswer", "answer_letter", "answer_choice",
        "choice", "option", "selected_option", "selected_answer", "correct_answer",
        "correct_option", "correct_choice", "prediction", "predicted_answer", "letter",
    }
)  # fmt: skip
_LOOSE_PAIR = re.compile(r"[\"']?([A-Za-z_ ]{3,20})[\"']?\s*:\s*[\"']([^\"'\n]{1,200})[\"']")


def _json_values(blob: str) -> list[str] | None:
    """Answer values of one JSON object text, or None when it holds no answer key."""
    try:
        obj = json.loads(blob)
    except ValueError:
        obj = None
    pairs: list[tuple[str, object]]
    if isinstance(obj, dict):
        pairs = list(obj.items())
    elif obj is None:
        # tolerate single-quoted or otherwise sloppy objects: {'answer': 'B'}
        pairs = [(k, v) for k, v in _LOOSE_PAIR.findall(blob)]
    else:
        return None
    values = [v for k, v in pairs if str(k).strip().casefold().replace(" ", "_") in _ANSWER_KEYS]
    return [v for v in values if isinstance(v, str)] or None


def _by_json(inp: _Input) -> Extraction | None:
    if "{" not in inp.raw:
        return None
    blobs = [m.group(1).strip() for m in _JSON_FENCE.finditer(inp.raw)]
    blobs += _JSON_OBJECT.findall(inp.raw)
    finds: list[_Find] = []
    for blob in blobs:
        for value in _json_values(blob) or ():
            f = _short(_clean(value), inp.o)
            if f is None:
                f = _parse_tail(_clean(value), inp.o)
            finds.append(f if f is not None else _Find(None, _BAD_AMBIGUOUS))
    decided = _decide(finds)
    if decided is None:
        return None
    return Extraction(decided.choice, JSON) if decided.ok else _unparsed(decided)


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
        found, _ = _mentions(text, o)
        if found - {decided.choice}:
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
    r"\b(?:not|no|never|neither|nor|incorrect|wrong|unlikely|less\s+likely|excluded?|"
    r"eliminated?|rule[sd]?\s+out|ruled\s+out|without|absent|absence|negative\s+for|"
    r"isn't|isn’t|doesn't|doesn’t|cannot|can't|can’t)\b",
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


_NEGATORS = frozenset(
    "no not without neither nor unlikely exclude excluded excluding rule ruled absent "
    "absence negative never isn t doesn cannot".split()
)


def _mentions(text: str, o: _Options) -> tuple[set[int], bool]:
    """(options whose text appears in `text`, whether any appearance is negated).

    Stops early once two options are found: callers only need to know "exactly one".
    """
    words = f" {_norm(text)} "
    # characters already covered by a longer option's mention: options are tried
    # longest first, so "viral pneumonia" hides the "pneumonia" inside it
    covered = bytearray(len(words))
    found: set[int] = set()
    negated = False
    for t, i in o.mentionable:
        needle = f" {t} "
        at = words.find(needle)
        while at >= 0:
            s, e = at + 1, at + 1 + len(t)
            if covered.find(0, s, e) >= 0:  # not wholly inside a longer mention
                covered[s:e] = b"\x01" * (e - s)
                found.add(i)
                if _NEGATORS.intersection(words[max(0, at - 40) : at].split()[-4:]):
                    negated = True
                if len(found) > 1 or negated:
                    return found, negated
            at = words.find(needle, at + 1)
    for rx, i in o.acronyms:
        for m in rx.finditer(text):
            found.add(i)
            if _NEGATORS.intersection(_norm(text[max(0, m.start() - 40) : m.start()]).split()[-4:]):
                negated = True
            if len(found) > 1 or negated:
                return found, negated
    return found, negated


def _by_option_text(inp: _Input) -> Extraction | None:
    o = inp.o
    if not o.mentionable and not o.acronyms:
        return None
    found, negated = _mentions(inp.text, o)
    if not found:
        return None
    if negated or len(found) > 1 or len(o.by_text.get(o.norms[next(iter(found))], ())) > 1:
        return Extraction(None, AMBIGUOUS)
    return Extraction(found.pop(), OPTION_TEXT_MENTION)


# The order is the design (see the module docstring): explicit before implicit,
# structured before prose, refusals only after every way of answering was tried.
STRATEGIES: tuple[tuple[str, Callable[[_Input], Extraction | None]], ...] = (
    ("json", _by_json),
    ("answer_tag", _by_answer_tag),
    ("whole", _by_whole),
    ("statements", _by_statements),
    ("lines", _by_lines),
    ("refusal", _by_refusal),
    ("hedge", _by_hedge),
    ("letter_mention", _by_letter_mention),
    ("option_text_mention", _by_option_text),
)


def _run(raw: str, o: _Options) -> Extraction:
    text = _clean(raw)
    if not text.strip():
        return Extraction(None, EMPTY)
    inp = _Input(raw=raw, text=text, o=o)
    for _name, strategy in STRATEGIES:
        result = strategy(inp)
        if result is not None:
            return result
    return Extraction(None, NO_MATCH)


def _from_unterminated(reasoning: str, o: _Options) -> Extraction:
    """An unclosed think block: only an explicit final answer at its very end counts."""
    text = _clean(_normalise(reasoning))
    lines = [ln for ln in text.splitlines() if ln.strip()]
    tail = "\n".join(lines[-2:])
    rank1, rank2 = _statements(tail, o)
    decided = _decide(rank1) or _decide(rank2)
    if decided is not None and decided.ok:
        return Extraction(decided.choice, FINAL_AFTER_REASONING)
    if decided is not None:
        return _unparsed(decided)
    return Extraction(None, UNTERMINATED_THINK)


def extract(text: str | None, options: Sequence[str]) -> Extraction:
    """Which of `options` (lettered A, B, ... as shown) the response `text` chose.

    Never raises on any text; returns choice None with a `how` code when the response
    does not name exactly one valid option. `options` must hold 1 to 26 options.
    """
    n = len(options)
    if not 1 <= n <= len(LETTERS):
        raise ValueError(f"extract needs 1 to {len(LETTERS)} options, got {n}")
    o = _options(tuple(str(x) for x in options))
    if text is None:
        return Extraction(None, EMPTY)
    if not isinstance(text, str):
        text = str(text)
    body, unterminated = _split_reasoning(text)
    body = _normalise(body)
    if unterminated is not None and not _clean(body).strip():
        return _from_unterminated(unterminated, o)
    return _run(body, o)
