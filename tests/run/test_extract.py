"""Answer extraction: a table of real-world response styles, and its properties.

The table holds outputs in the styles of GPT-4o, Claude, Gemini, Qwen-VL, LLaVA,
DeepSeek-R1 (with and without <think>), and medical models (LLaVA-Med, MedGemma,
HuatuoGPT-Vision, MedVLM-R1, RadFM), each with the option it chose or None when it
chose none, and the `how` code where the path matters.
"""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from medrcube.run.extract import HOW_CODES, Extraction, extract

CXR = ("Normal", "Pneumonia", "Pneumothorax", "Pleural effusion")
MOD = ("CT", "MRI", "X-Ray", "Ultrasound")
PLANE = ("Axial", "Coronal", "Sagittal", "Oblique")
PROTO = ("T1-weighted", "T2-weighted", "FLAIR", "DWI")
FIND = ("Atelectasis", "Consolidation", "Cardiomegaly", "Nodule")
YN = ("Yes", "No")
SEV = ("Mild", "Moderate", "Severe")
TEN = tuple(f"Finding {i}" for i in range(10))

# (id, response, options, expected choice, expected how or None when the path is free)
CASES: list[tuple[str, str, tuple[str, ...], int | None, str | None]] = [
    # --- bare letters and decorated letters -------------------------------------
    ("gpt4o-bare", "B", CXR, 1, "bare_letter"),
    ("lower", "b", CXR, 1, "bare_letter"),
    ("article-letter-alone", "A", CXR, 0, "bare_letter"),
    ("article-letter-lower", "a", CXR, 0, "bare_letter"),
    ("paren", "(B)", CXR, 1, "bare_letter"),
    ("dot", "B.", CXR, 1, "bare_letter"),
    ("close-paren", "B)", CXR, 1, "bare_letter"),
    ("spaced-lower-paren", "  b)  ", CXR, 1, "bare_letter"),
    ("bold", "**B**", CXR, 1, "bare_letter"),
    ("math", "$B$", CXR, 1, "bare_letter"),
    ("backticks", "`C`", CXR, 2, "bare_letter"),
    ("brackets", "[D]", CXR, 3, "bare_letter"),
    ("option-word", "Option C", CXR, 2, "bare_letter"),
    ("option-paren", "Option (B)", CXR, 1, "bare_letter"),
    ("qwen-fullwidth", "Ｃ", CXR, 2, "bare_letter"),
    ("qwen-im-end", "B<|im_end|>", CXR, 1, "bare_letter"),
    ("llava-eos", "B</s>", CXR, 1, "bare_letter"),
    ("llava-role-leak", "ASSISTANT: B", CXR, 1, "bare_letter"),
    ("gemma-end-of-turn", "D<end_of_turn>", CXR, 3, "bare_letter"),
    ("trailing-newlines", "\n\nC\n\n", CXR, 2, "bare_letter"),
    ("ninth-letter-alone", "I", TEN, 8, "bare_letter"),
    # --- boxed ------------------------------------------------------------------
    ("boxed", r"\boxed{B}", CXR, 1, "boxed"),
    ("boxed-text", r"\boxed{\text{B}}", CXR, 1, "boxed"),
    ("boxed-math", r"$\boxed{\textbf{C}}$", CXR, 2, "boxed"),
    ("boxed-paren-math", r"\(\boxed{D}\)", CXR, 3, "boxed"),
    ("boxed-with-text", r"\boxed{B. Pneumonia}", CXR, 1, "boxed"),
    ("r1-final-answer-boxed", "Let me analyze this.\n\n**Final Answer**\n\\boxed{D}", CXR, 3, "boxed"),
    # a second boxed answer after "on reflection" corrects the first (issue 25: the last committed answer)
    ("two-boxed-corrected", "First \\boxed{B}, then on reflection \\boxed{C}.", CXR, 2, "self_correction"),
    ("two-boxed-differ", "First \\boxed{B}, and also \\boxed{C}.", CXR, None, "ambiguous"),
    # --- letter with text, option text ------------------------------------------
    ("letter-and-text", "B. Pneumonia", CXR, 1, "letter_and_text"),
    ("letter-and-text-case", "b. pneumonia!", CXR, 1, "letter_and_text"),
    ("claude-paren-label", "(C) Pneumothorax", CXR, 2, "letter_and_text"),
    ("gemini-bold-label", "**B. Pneumonia**", CXR, 1, "letter_and_text"),
    ("paren-label-text", "B) T2-weighted", PROTO, 1, "letter_and_text"),
    ("yes-no-label", "B. No", YN, 1, "letter_and_text"),
    ("letter-text-mismatch", "B. Pneumothorax", CXR, None, "letter_text_mismatch"),
    ("option-text", "Pneumonia", CXR, 1, "option_text"),
    ("medflamingo-text-dot", "Pneumothorax.", CXR, 2, "option_text"),
    ("radfm-lower-text", "pneumothorax", CXR, 2, "option_text"),
    ("text-with-hyphen", "X-Ray", MOD, 2, "option_text"),
    ("text-lower-hyphen", "x-ray", MOD, 2, "option_text"),
    ("protocol-text", "T2-weighted", PROTO, 1, "option_text"),
    ("yes", "Yes", YN, 0, "option_text"),
    ("no-dot", "No.", YN, 1, "option_text"),
    ("severity-text", "Moderate", SEV, 1, "option_text"),
    # --- answer statements ------------------------------------------------------
    ("answer-colon", "Answer: B", CXR, 1, "answer_line"),
    ("answer-colon-nospace", "Answer:B", CXR, 1, "answer_line"),
    ("answer-dash", "Answer - B", CXR, 1, "answer_line"),
    ("answer-is", "The answer is B", CXR, 1, "answer_line"),
    ("qwen-answer-is-dot", "The answer is B.", CXR, 1, "answer_line"),
    ("claude-answer-bold", "The answer is **B**.", CXR, 1, "answer_line"),
    ("correct-answer-paren-text", "The correct answer is (B) Pneumonia", CXR, 1, "answer_line"),
    ("qwen-correct-answer-label", "The correct answer is C. X-Ray.", MOD, 2, "answer_line"),
    ("correct-option-comma-text", "The correct option is B, pneumonia.", CXR, 1, "answer_line"),
    ("correct-answer-colon-label", "Correct answer: D) Pleural effusion", CXR, 3, "answer_line"),
    ("bold-answer-colon", "**Answer**: **C**", CXR, 2, "answer_line"),
    ("answer-is-colon-bold-label", "The answer is: **(C) Pneumothorax**.", CXR, 2, "answer_line"),
    ("i-choose", "I choose B.", CXR, 1, "answer_line"),
    ("i-would-choose-option", "I would choose option D.", CXR, 3, "answer_line"),
    ("my-answer-is", "My answer is C.", CXR, 2, "answer_line"),
    ("letter-is-correct", "C is correct.", CXR, 2, "answer_line"),
    ("article-letter-is-correct", "A is the correct answer.", CXR, 0, "answer_line"),
    ("diagnosis-is-text", "The most likely diagnosis is pneumonia.", CXR, 1, "answer_line"),
    ("answer-is-lower-letter", "the answer is a", CXR, 0, "answer_line"),
    ("chinese-answer", "答案：C", CXR, 2, "answer_line"),
    ("chinese-correct-answer", "根据影像表现，正确答案是B。", CXR, 1, None),
    ("answer-colon-out-of-range", "The answer is E", CXR, None, "out_of_range"),
    ("article-then-answer", "A chest X-ray shows consolidation, so the answer is C", CXR, 2, None),
    (
        "article-prose-then-final-line",
        "A chest X-ray shows consolidation in the right lower lobe.\nANSWER: C",
        CXR,
        2,
        "final_answer_after_reasoning",
    ),
    # --- reasoning with one final answer ----------------------------------------
    (
        "gpt4o-reasoning-template",
        "Step 1: The image is a frontal chest radiograph.\n"
        "Step 2: There is focal consolidation in the right lower lobe.\n"
        "Step 3: No visible pleural line, so pneumothorax (C) is unlikely; the costophrenic "
        "angles are sharp, so effusion (D) is unlikely.\n\nANSWER: B",
        CXR,
        1,
        "final_answer_after_reasoning",
    ),
    (
        "claude-reasoning-bold-answer",
        "Looking at this chest X-ray, I can see an area of increased opacity in the right "
        "lower lobe with air bronchograms.\n\n**Answer: B. Pneumonia**",
        CXR,
        1,
        "final_answer_after_reasoning",
    ),
    (
        "evaluate-each-option",
        "Let's evaluate each option:\nA. Normal - there is a clear abnormality, so no.\n"
        "B. Pneumonia - consolidation present, yes.\nC. Pneumothorax - no pleural line.\n"
        "D. Pleural effusion - angles are sharp.\n\nTherefore, the answer is B.",
        CXR,
        1,
        "final_answer_after_reasoning",
    ),
    (
        "so-letter",
        "Option A is incorrect because the lungs are not clear. Option C is unlikely. "
        "Option D is unlikely. So B.",
        CXR,
        1,
        "final_answer_after_reasoning",
    ),
    (
        "revised-answer-final-wins",
        "At first glance the answer is B.\n\nOn closer inspection there is a pleural line.\n"
        "Final answer: C",
        CXR,
        2,
        "final_answer_after_reasoning",
    ),
    (
        "tentative-question-then-answer",
        "So the answer is A? Wait, no. The visceral pleural line is clear. The answer is C.",
        CXR,
        2,
        "final_answer_after_reasoning",
    ),
    (
        "final-answer-next-line",
        "The lesion is bright on FLAIR.\n\n### Final Answer\nC. FLAIR",
        PROTO,
        2,
        "final_answer_after_reasoning",
    ),
    (
        "severity-reasoning-answer",
        "Based on the extent of the lesion, I would grade this as moderate. Answer: B",
        SEV,
        1,
        "final_answer_after_reasoning",
    ),
    (
        "claude-reasoning-last-letter",
        "Based on the image, this appears to be an axial slice through the brain.\n\nA",
        PLANE,
        0,
        "final_answer_after_reasoning",
    ),
    (
        "flair-reasoning-last-letter",
        "This is a FLAIR sequence, as CSF is suppressed while the lesion is bright.\n\nC",
        PROTO,
        2,
        "final_answer_after_reasoning",
    ),
    (
        "listed-options-then-letter",
        "A. Normal\nB. Pneumonia\nC. Pneumothorax\nD. Pleural effusion\n\nB",
        CXR,
        1,
        "final_answer_after_reasoning",
    ),
    (
        "prompt-echo-then-letter",
        "Question: What is the most likely diagnosis?\nOptions:\nA. Normal\nB. Pneumonia\n"
        "C. Pneumothorax\nD. Pleural effusion\n"
        "Answer with the option's letter from the given choices directly.\nD",
        CXR,
        3,
        "final_answer_after_reasoning",
    ),
    (
        "ninth-letter-pronoun-prose",
        "I think the answer is C.",
        TEN,
        2,
        None,
    ),
    # --- leading answers --------------------------------------------------------
    (
        "gpt4o-label-then-explanation",
        "B. Pneumonia\n\nThe chest radiograph demonstrates a right lower lobe airspace "
        "opacity with air bronchograms, consistent with pneumonia.",
        CXR,
        1,
        "leading_answer",
    ),
    (
        "gemini-bold-label-explanation",
        "**B. Pneumonia**\n\nThe chest X-ray shows consolidation, unlike A or C.",
        CXR,
        1,
        "leading_answer",
    ),
    (
        "leading-letter-prose",
        "B. The chest X-ray shows consolidation in the right lower lobe.",
        CXR,
        1,
        "leading_answer",
    ),
    (
        "gemini-answer-is-bold-label-why",
        "The answer is **(D) Pleural effusion**.\n\nHere's why:\n* **Blunting of the "
        "costophrenic angle** is seen.\n* A meniscus sign is present.",
        CXR,
        3,
        "answer_line",
    ),
    (
        "medgemma-answer-explanation",
        "**Answer: B. Pneumonia**\n\n**Explanation:** The radiograph shows a dense opacity "
        "in the right lower zone; options A, C and D do not fit.",
        CXR,
        1,
        "answer_line",
    ),
    # --- think blocks -------------------------------------------------------------
    ("think-then-bare", "<think>A? C? D</think>\n\nB", CXR, 1, "bare_letter"),
    (
        "r1-think-then-answer",
        "<think>\nOkay, let's look at the options. A is normal, but there's an opacity. C "
        "would show a pleural line. D would blunt the angle. So B.\n</think>\n\n"
        "**Answer:** B. Pneumonia",
        CXR,
        1,
        "answer_line",
    ),
    (
        "r1-think-boxed",
        "<think>\nThe answer could be A or C...\n</think>\n\nThe answer is \\boxed{C}.",
        CXR,
        2,
        "boxed",
    ),
    (
        "r1-orphan-close-tag",
        "Okay, so I need to figure out the view. Wait, maybe it's A? No... So the answer "
        "should be C.\n</think>\n\nC",
        PLANE,
        2,
        "bare_letter",
    ),
    (
        "r1-unterminated-think",
        "<think>\nLet me analyze the image. The pleural line is visible, maybe C. But it "
        "could be D",
        CXR,
        None,
        "unterminated_think",
    ),
    (
        "r1-unterminated-with-final",
        "<think>\nReasoning about the lungs and the pleura.\nSo the final answer is C.",
        CXR,
        2,
        "final_answer_after_reasoning",
    ),
    ("think-only", "<think>The answer is B.</think>", CXR, None, "empty"),
    (
        "thinking-tag",
        "<thinking>Compare A, B and D.</thinking>\nAnswer: D",
        CXR,
        3,
        "answer_line",
    ),
    (
        "medvlm-r1-answer-tag",
        "<think>The image shows a hyperlucent area without lung markings at the apex."
        "</think>\n<answer>C</answer>",
        CXR,
        2,
        "answer_tag",
    ),
    (
        "r1-no-think-revision-boxed",
        "Let me think. The answer is A? No, wait. The pleural line is visible. The answer "
        "is C.\n\n**Final Answer**\n\\boxed{C}",
        CXR,
        2,
        "boxed",
    ),
    # --- JSON ---------------------------------------------------------------------
    ("json", '{"answer": "B"}', CXR, 1, "json"),
    (
        "json-reasoning-field",
        '{"answer": "B", "reasoning": "Right lower lobe consolidation; the answer is not A."}',
        CXR,
        1,
        "json",
    ),
    (
        "json-fenced",
        '```json\n{\n  "reasoning": "The pleural line is visible.",\n  "answer": "C"\n}\n```',
        CXR,
        2,
        "json",
    ),
    ("json-single-quotes", "{'answer': 'D'}", CXR, 3, "json"),
    ("json-label-value", '{"answer": "B. Pneumonia"}', CXR, 1, "json"),
    ("json-hedged", '{"answer": "A or B"}', CXR, None, "ambiguous"),
    ("json-text-value", '{"final_answer": "Sagittal"}', PLANE, 2, "json"),
    # --- ambiguous and contradictory ------------------------------------------------
    ("a-or-b", "A or B", CXR, None, "ambiguous"),
    ("either-or", "It is either B or C.", CXR, None, "ambiguous"),
    ("but-possibly", "B, but possibly D", CXR, None, "ambiguous"),
    ("slash", "B/C", CXR, None, "ambiguous"),
    ("answer-hedged", "Answer: A or B", CXR, None, "ambiguous"),
    ("two-final-answers", "Answer: B\n\nAnswer: C", CXR, None, "ambiguous"),
    ("label-text-mismatch-in-statement", "Answer: (A) Pneumonia", CXR, None, "letter_text_mismatch"),
    (
        "options-could-be",
        "Option A or option C could be correct; it is hard to decide.",
        CXR,
        None,
        "ambiguous",
    ),
    (
        "text-hedge-two-options",
        "The severity appears moderate to severe.",
        SEV,
        None,
        "ambiguous",
    ),
    (
        "llava-med-two-findings",  # the negated finding is no reading; the other one is
        "The chest X-ray shows no signs of pneumothorax, but there is consolidation "
        "suggestive of pneumonia.",
        CXR,
        1,
        "option_text_mention",
    ),
    (
        "options-listed-with-verdicts",  # one marked likely, every other unlikely: a verdict list
        "A. Normal: unlikely\nB. Pneumonia: likely\nC. Pneumothorax: unlikely\n"
        "D. Pleural effusion: unlikely",
        CXR,
        1,
        "verdict_list",
    ),
    (
        "options-listed-two-likely",
        "A. Normal: unlikely\nB. Pneumonia: likely\nC. Pneumothorax: likely\n"
        "D. Pleural effusion: unlikely",
        CXR,
        None,
        "ambiguous",
    ),
    (
        "negated-diagnosis",
        "The most likely diagnosis is not pneumonia but a pneumothorax.",
        CXR,
        None,
        None,
    ),
    ("negated-only-mention", "There is no pneumothorax.", CXR, None, None),
    ("out-of-range-bare", "E", CXR, None, "out_of_range"),
    ("out-of-range-two-options", "C", YN, None, "out_of_range"),
    # --- prose without a letter -------------------------------------------------------
    ("article-prose-no-match", "A chest X-ray shows consolidation.", CXR, None, "no_match"),
    (
        "article-prose-unique-text",
        "A chest X-ray shows consolidation.",
        FIND,
        1,
        "option_text_mention",
    ),
    (
        "article-large-pneumothorax",
        "A large pneumothorax is seen on the right.",
        CXR,
        2,
        "option_text_mention",
    ),
    (
        "llava-prose-mention",
        "The image shows a chest X-ray with signs of pneumonia.",
        CXR,
        1,
        "option_text_mention",
    ),
    (
        "llava-med-effusion",
        "The image is a chest X-ray showing bilateral pleural effusion.",
        CXR,
        3,
        "option_text_mention",
    ),
    ("modality-prose", "The imaging modality is MRI.", MOD, 1, "option_text_mention"),
    ("llava-med-acronym", "The image is a CT scan of the chest.", MOD, 0, "option_text_mention"),
    ("pronoun-us-is-not-ultrasound", "Let us look: it is an axial CT.", MOD + ("US",), 0, "option_text_mention"),
    (
        "findings-list-last-line",
        "Findings:\n- Consolidation\n- Pleural effusion",
        ("Normal", "Pneumonia", "Consolidation", "Pleural effusion"),
        None,
        "ambiguous",
    ),
    ("impression-last-line", "Impression:\nPneumonia", CXR, 1, "answer_line"),  # a report's conclusion declares it
    ("yes-prose", "Yes, there is a fracture of the distal radius.", YN, 0, "yes_no"),
    ("letter-mention", "The findings point to (C), given the visible pleural line.", CXR, 2, "letter_mention"),
    ("its-letter", "I think it's (C).", CXR, 2, "answer_line"),
    ("definitely-letter", "Definitely B!", CXR, 1, "answer_line"),
    ("letter-first-hedged", "B is the most likely answer, or possibly C.", CXR, None, "ambiguous"),
    ("answer-although-other", "I believe the answer is B, although C cannot be excluded.", CXR, None, "ambiguous"),
    ("leading-then-other-answer", "B\n\nAnswer: C", CXR, None, "ambiguous"),
    (
        "leading-then-same-answer",
        "C\n\nExplanation: The answer is C because a pleural line is visible.",
        CXR,
        2,
        "leading_answer",
    ),
    ("hepatitis-b-prose", "Hepatitis B is not related.", CXR, None, "no_match"),
    (
        "not-a-doctor-but-option",
        "I'm not a radiologist and this is not advice, but the findings suggest option C.",
        CXR,
        2,
        "letter_mention",
    ),
    ("option-negated", "Option A is incorrect.", CXR, None, "ambiguous"),
    # --- refusals -------------------------------------------------------------------
    ("refuse-diagnosis", "I cannot provide a medical diagnosis.", CXR, None, "refusal"),
    ("refuse-interpret", "I'm unable to interpret medical images.", CXR, None, "refusal"),
    (
        "gpt4o-sorry",
        "I'm sorry, but I can't help with interpreting medical images.",
        CXR,
        None,
        "refusal",
    ),
    (
        "refuse-consult",
        "I'm unable to provide a diagnosis based on medical images. Please consult a "
        "radiologist.",
        CXR,
        None,
        "refusal",
    ),
    (
        "claude-apology",
        "I apologize, but I'm not able to diagnose medical conditions from images. If you "
        "have concerns about pneumonia, please consult with a qualified healthcare "
        "professional.",
        CXR,
        None,
        "refusal",
    ),
    ("refuse-view", "I cannot view the image, so I cannot answer this question.", CXR, None, "refusal"),
    ("refuse-no-image", "Sorry, I can't see any image attached. Could you upload it?", CXR, None, "refusal"),
    ("refuse-as-an-ai", "As an AI, I can't make a diagnosis from this scan.", CXR, None, "refusal"),
    (
        "refusal-then-answer",
        "I can't provide a medical diagnosis, but based on the visible features, the most "
        "likely answer is B. Pneumonia.",
        CXR,
        1,
        "final_answer_after_reasoning",
    ),
    (
        "as-an-ai-then-answer",
        "As an AI language model, I cannot provide medical diagnoses. However, based on "
        "typical radiographic features, the answer would be D.",
        CXR,
        3,
        "final_answer_after_reasoning",
    ),
    ("as-an-ai-then-letter", "As an AI, I can't be certain. B", CXR, 1, None),
    # --- empty ----------------------------------------------------------------------
    ("empty", "", CXR, None, "empty"),
    ("whitespace", " \n\t ", CXR, None, "empty"),
    ("only-special-tokens", "<|im_end|>", CXR, None, "empty"),
]


def test_the_table_is_large_and_distinct() -> None:
    assert len(CASES) >= 80
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))
    assert len({(c[1], c[2]) for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("response", "options", "choice", "how"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_response_styles(response: str, options: tuple[str, ...], choice: int | None, how: str | None) -> None:
    got = extract(response, options)
    assert got.choice == choice, got
    if how is not None:
        assert got.how == how, got
    assert got.how in HOW_CODES
    assert got.refused == (got.how == "refusal")
    if got.refused or got.choice is None:
        assert got.letter is None and not got.parsed
    else:
        assert got.letter == string.ascii_uppercase[got.choice] and got.parsed


def test_extraction_is_a_frozen_value() -> None:
    e = extract("B", CXR)
    assert e == Extraction(1, "bare_letter", False)
    with pytest.raises(AttributeError):
        e.choice = 2  # type: ignore[misc]


def test_none_and_non_string_responses() -> None:
    assert extract(None, CXR) == Extraction(None, "empty", False)
    assert extract(2, ("1", "2", "3")).choice == 1  # type: ignore[arg-type]


@pytest.mark.parametrize("options", [(), tuple(str(i) for i in range(27))])
def test_bad_option_counts_are_an_error(options: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="options"):
        extract("A", options)


def test_duplicate_option_texts_are_never_resolved_by_text() -> None:
    opts = ("Pneumonia", "pneumonia.", "Normal")
    assert extract("Pneumonia", opts).choice is None
    assert extract("B", opts).choice == 1


def test_how_codes_are_documented_in_the_module() -> None:
    import medrcube.run.extract as mod

    doc = mod.__doc__ or ""
    for code in HOW_CODES:
        assert code in doc, code


# ------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------

_WORD = st.text(alphabet=string.ascii_letters + "-'", min_size=2, max_size=12)
_OPTION_TEXT = st.lists(_WORD, min_size=1, max_size=4).map(" ".join)


def _key(text: str) -> str:
    """The property's precondition: texts distinct ignoring case and punctuation."""
    return " ".join(re.sub(r"[\W_]+", " ", text.casefold()).split())


@st.composite
def option_sets(draw: st.DrawFn) -> tuple[str, ...]:
    texts = draw(st.lists(_OPTION_TEXT, min_size=2, max_size=8, unique_by=_key))
    for t in texts:
        assume(len(_key(t)) > 1)  # not a single letter
    return tuple(texts)


@given(option_sets(), st.data())
@example(("A chest", "Pneumonia"), None)
def test_exact_letter_or_text_is_read_as_that_option(options: tuple[str, ...], data) -> None:
    if data is None:  # the @example: an option text starting with the article
        i = 0
    else:
        i = data.draw(st.integers(0, len(options) - 1))
    letter = string.ascii_uppercase[i]
    assert extract(letter, options).choice == i
    assert extract(letter.lower(), options).choice == i
    assert extract(options[i], options).choice == i


_THINK_INNER = st.one_of(
    st.text(max_size=200),
    st.lists(
        st.sampled_from(
            list("ABCDEFGH abcdo\n.:()*?<>/")
            + ["answer", "Answer: ", "final answer is ", "<think>", "\\boxed{A}", "<answer>D</answer>"]
        ),
        max_size=40,
    ).map("".join),
).filter(lambda s: not re.search(r"<\s*/\s*think", s, re.I | re.A))

_RESPONSES = st.one_of(
    st.text(max_size=300),
    st.sampled_from([c[1] for c in CASES]),
    st.lists(
        st.sampled_from(
            ["A", "B", "C", "D", "E", "(B)", "Answer:", "the answer is", " or ", "\n", ". ",
             "Pneumonia", "Normal", "not", "\\boxed{C}", '{"answer": "D"}', "<think>",
             "</think>", "I cannot provide", "<answer>A</answer>", "**", "$"]
        ),
        max_size=12,
    ).map("".join),
)


@settings(max_examples=300)
@given(_THINK_INNER, _RESPONSES, st.sampled_from([CXR, YN, SEV, TEN]))
def test_a_think_block_never_changes_the_result(inner: str, response: str, options) -> None:
    assert extract(f"<think>{inner}</think>{response}", options) == extract(response, options)


@settings(max_examples=300)
@given(
    st.one_of(st.text(), st.text(alphabet=st.characters(min_codepoint=0x80), max_size=500), _RESPONSES),
    st.sampled_from([CXR, YN, SEV, TEN, MOD, ("Yes", "Yes")]),
)
def test_never_raises_and_stays_in_range(text: str, options) -> None:
    got = extract(text, options)
    assert got.choice is None or 0 <= got.choice < len(options)
    assert got.how in HOW_CODES
    assert not (got.refused and got.choice is not None)


def test_huge_inputs_are_handled() -> None:
    filler = "The lungs are clear on this side. " * 30_000  # about 1 MB
    assert extract(filler + "\nANSWER: C", CXR) == Extraction(2, "final_answer_after_reasoning")
    assert extract("<think>" + "A " * 200_000 + "</think>B", CXR).choice == 1
    assert extract("(" * 100_000 + "{" * 100_000, CXR).choice is None
    assert extract("Ω" * 200_000, CXR).choice is None
    # many statements and mentions without sentence or line breaks stay linear
    assert extract("the answer is B " * 20_000, CXR).choice == 1
    assert extract("pneumonia " * 50_000, CXR).how == "option_text_mention"
    assert extract("Answer: B Answer: C " * 10_000, CXR).choice is None


# The reference evaluator reads the first standalone A-D of the upper-cased response.
# Wherever a response is a plain letter, our reading must be the same, so per-voxel
# correct counts agree with the published scoring.
_REFERENCE = re.compile(r"\b([A-D])\b")


@given(
    st.sampled_from("ABCDabcd"),
    st.sampled_from(["{}", "{}.", "({})", "{})", " {}\n", "**{}**", "{}\n"]),
)
def test_plain_letters_agree_with_the_reference_scoring(letter: str, form: str) -> None:
    response = form.format(letter)
    ref = _REFERENCE.search(response.upper())
    assert ref is not None
    got = extract(response, CXR)
    assert got.letter == ref.group(1)
