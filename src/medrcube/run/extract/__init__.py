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
      `verdict_list`: a verdict per option ("Option A: incorrect / Option B: incorrect /
      Option C: correct", "A) falsch, B) richtig", "B: likely" among "unlikely"s): the
      one marked correct; two marked correct, or one marked both, is `ambiguous`.
      Then retractions (corrections.py): "Answer: A. Actually no, B." reads B
      (`self_correction`: the answer committed last); "I pick B. Just kidding." reads
      nothing (`retracted`). A cue counts only after an answer; the text after it is
      read by this same chain.
   4. (On a yes/no item, a reply that says both, "Yes and no.", "Maybe yes, maybe no.",
      is `ambiguous` before anything else reads it.)
      `bare_letter`, `boxed`, `letter_and_text`, `option_text`: the whole response is
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
   7. `yes_no`: on a yes/no item, a reply that opens with its answer in any of the
      cube's languages ("Yes, ...", "Nein.", "Non,", "Sim.", "是").
      `refusal`: checked only now, so that "I am not a doctor, but the answer is B"
      stays an answer.
   8. `ambiguous`: a hedge between letters ("A or B", "B/C") anywhere.
   9. `letter_mention`: one option-form letter ("option C", "(C)") across the whole
      text, none of them negated ("option A is incorrect").
   10. `option_text_mention`: exactly one option's text appears in prose in a clause
       without negation ("... consistent with pneumonia"); "A chest X-ray shows
       consolidation." is read only if "Consolidation" is an option and no other option
       is named outside a negated clause. Negation is read in every language of
       cues.py ("not seen", "ruled out", "unlikely", "absent", "anything but", "kein",
       "pas de", "sin", "sem", "未见"): a reply whose only named options are negated
       ("Pneumothorax is not seen.") reads nothing (`negated`), never the finding.
   11. `no_match`: nothing above applied.

   Answer markers are read in English, German, French, Spanish, Portuguese and Chinese
   ("Antwort: B", "la bonne réponse est C", "la respuesta correcta es D", "a resposta é
   B", "答案是B", "我选B"); a marker labelled wrong ("Wrong answer: A") and a letter
   followed by its rejection ("B is wrong", "A: incorrect") never read as the answer.
   In JSON every duplicate key counts ({"answer": "A", "answer": "B"} is `ambiguous`),
   and tool calls are read through their nesting, arguments given as a JSON string
   included.

   Other codes: `ambiguous` (hedged or contradictory answers), `letter_text_mismatch`
   ("B. Effusion" where B is Pneumonia), `out_of_range` ("E" on a four-option item),
   `unterminated_think` (an unclosed reasoning block with no final answer).

The strategies are small functions over precompiled regexes; per option set the
normalised option texts are computed once (cached), which keeps extraction fast
(measured in benchmarks/).
"""

from __future__ import annotations

from collections.abc import Sequence

from medrcube.run.extract.codes import (
    EMPTY,
    FINAL_AFTER_REASONING,
    HOW_CODES,
    LETTERS,
    NO_MATCH,
    UNTERMINATED_THINK,
    Extraction,
)
from medrcube.run.extract.corrections import read_corrected
from medrcube.run.extract.reading import _clean, _Input, _normalise, _Options, _options, _split_reasoning, _unparsed
from medrcube.run.extract.statements import _decide, _statements
from medrcube.run.extract.strategies import EXPLICIT, READINGS

__all__ = ["HOW_CODES", "Extraction", "extract"]


def _run(raw: str, o: _Options, *, corrections: bool = True) -> Extraction:
    text = _clean(raw)
    if not text.strip():
        return Extraction(None, EMPTY)
    inp = _Input(raw=raw, text=text, o=o)
    for _name, strategy in EXPLICIT:
        result = strategy(inp)
        if result is not None:
            return result
    if corrections:
        result = read_corrected(text, lambda part: _run(part, o, corrections=False))
        if result is not None:
            return result
    for _name, strategy in READINGS:
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
