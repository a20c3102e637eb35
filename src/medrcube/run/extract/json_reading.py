"""The `json` strategy: {"answer": "B"}, fenced or embedded, and tool calls.

Structured output is explicit, and its other fields (a "reasoning" string) are not read
as prose. Every duplicate key counts ({"answer": "A", "answer": "B"} is two answers that
disagree), tool calls are read through their nesting (arguments given as a JSON string
included), a reply that is one JSON value without an answer key reads nothing, and a
declaration in another field ("content": "Answer: C") that disagrees makes it ambiguous.
"""

from __future__ import annotations

import json
import re

from medrcube.run.extract.codes import AMBIGUOUS, JSON, NO_MATCH, Extraction
from medrcube.run.extract.reading import _BAD_AMBIGUOUS, _clean, _Find, _Input, _Options, _short, _unparsed
from medrcube.run.extract.statements import _decide, _parse_tail, _statements

_JSON_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.S)
_JSON_OBJECT = re.compile(r"\{[^{}]{0,2000}\}")
_ANSWER_KEYS = frozenset(
    {
        "answer", "final_answer", "finalanswer", "answer_letter", "answer_choice",
        "choice", "option", "selected_option", "selected_answer", "correct_answer",
        "correct_option", "correct_choice", "prediction", "predicted_answer", "letter",
        "diagnosis", "selection",
    }
)  # fmt: skip
_LOOSE_PAIR = re.compile(r"[\"']?([A-Za-z_ ]{3,20})[\"']?\s*:\s*[\"']([^\"'\n]{1,200})[\"']")


def _pairs(pairs: list[tuple[str, object]]) -> list[tuple[str, object]]:
    # object_pairs_hook: keep every pair, duplicates included, so that {"answer": "A",
    # "answer": "B"} is two answers (that disagree), not whichever came last
    return pairs


def _answer_values(node: object, depth: int = 0) -> list[object]:
    """Values under answer keys anywhere in a parsed JSON value (tool calls nest them:
    {"function": {"arguments": "{\\"answer\\": \\"B\\"}"}}, the arguments a JSON string)."""
    if depth > 6:
        return []
    if isinstance(node, str):
        s = node.strip()
        if s.startswith("{") and s.endswith("}"):
            try:
                return _answer_values(json.loads(s, object_pairs_hook=_pairs), depth + 1)
            except ValueError:
                return []
        return []
    if isinstance(node, list):
        if node and all(isinstance(x, tuple) and len(x) == 2 for x in node):  # an object's pairs
            out: list[object] = []
            for k, v in node:
                if str(k).strip().casefold().replace(" ", "_") in _ANSWER_KEYS:
                    out.append(v)
                else:
                    out += _answer_values(v, depth + 1)
            return out
        return [v for x in node for v in _answer_values(x, depth + 1)]
    return []


def _other_strings(node: object, depth: int = 0) -> list[str]:
    """Strings of a parsed JSON value outside its answer keys (a "content" beside a tool
    call, a "reasoning" field), JSON-looking strings (tool arguments) left out."""
    if depth > 6:
        return []
    if isinstance(node, str):
        s = node.strip()
        return [] if s.startswith("{") else [node]
    if isinstance(node, list):
        if node and all(isinstance(x, tuple) and len(x) == 2 for x in node):
            return [t for k, v in node if str(k).strip().casefold().replace(" ", "_") not in _ANSWER_KEYS
                    for t in _other_strings(v, depth + 1)]
        return [t for x in node for t in _other_strings(x, depth + 1)]
    return []


def _declared_elsewhere(blob: str, o: _Options) -> set[int | None]:
    """What the declarations ("Answer: C") in a JSON text's other strings choose."""
    try:
        obj: object = json.loads(blob, object_pairs_hook=_pairs)
    except ValueError:
        return set()
    out: set[int | None] = set()
    for text in _other_strings(obj):
        decided = _decide(_statements(_clean(text), o)[0])
        if decided is not None:
            out.add(decided.choice)
    return out


def _json_values(blob: str) -> list[str] | None:
    """Answer values of one JSON text, or None when it holds no answer key."""
    try:
        obj: object = json.loads(blob, object_pairs_hook=_pairs)
    except ValueError:
        obj = None
    values: list[object]
    if obj is None:
        # tolerate single-quoted or otherwise sloppy objects: {'answer': 'B'}
        values = [v for k, v in _LOOSE_PAIR.findall(blob) if k.strip().casefold().replace(" ", "_") in _ANSWER_KEYS]
    else:
        values = _answer_values(obj)
    return [v for v in values if isinstance(v, str)] or None


def by_json(inp: _Input) -> Extraction | None:
    if "{" not in inp.raw:
        return None
    blobs = [m.group(1).strip() for m in _JSON_FENCE.finditer(inp.raw)]
    whole = inp.raw.strip()
    if whole.startswith("{") and whole.endswith("}"):
        try:
            json.loads(whole)
        except ValueError:
            blobs += _JSON_OBJECT.findall(inp.raw)
        else:
            # The reply is one JSON value: read it whole (tool calls nest their answer),
            # and only through its answer keys: a tool call that answers nothing
            # ({"name": "lookup", "arguments": {"query": "pneumothorax"}}) is no reading.
            values = _json_values(whole)
            if values is None:
                return Extraction(None, NO_MATCH)
            blobs.append(whole)
    else:
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
    if not decided.ok:
        return _unparsed(decided)
    # {"tool_calls": [... "A" ...], "content": "Answer: C"}: two answers, no choice
    if any(_declared_elsewhere(blob, inp.o) - {decided.choice} for blob in blobs):
        return Extraction(None, AMBIGUOUS)
    return Extraction(decided.choice, JSON)
