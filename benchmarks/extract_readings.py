"""How three answer readers read the same replies: this project's `extract`, the rule of
MedRCube's reference evaluator, and VLMEvalKit's exact-matching rules.

    python -m benchmarks.extract_readings [--json]

The replies are the test corpus (tests/run/data/replies.jsonl, 492 realistic replies)
and the issue's 34 adversarial replies (tests/run/data/adversarial.jsonl), each with the
option it commits to (or none) and the item's answer key. For each reader and reply:

- right: the reading is the expected one (an option, or none where the reply commits to
  none);
- unreadable: no reading where the reply commits to an option (recorded, for a judge or
  a human; never graded as an answer here, though the reference evaluator grades it
  wrong);
- misread graded as right: a reading that is not the reply's, equal to the answer key;
- misread graded as wrong: a reading that is not the reply's, not the key either.

The two other readers are re-implemented here from their published rules, in our own
words, to count them on the same replies (their code is not copied):

- reference evaluator (F1mc/MedRCube, scripts/eval.py, `_judge`): the whole reply is
  upper-cased and the first standalone letter A to D (a regex word boundary on both
  sides, Python's Unicode word characters) is the reading; no such letter reads nothing
  (and is graded wrong).
- VLMEvalKit (open-compass/VLMEvalKit, vlmeval/utils/matching_util.py, `can_infer`): a
  reply holding one of a few fixed refusal sentences reads "no option"; otherwise the
  characters . ( ) [ ] , : ; ! * # { } become spaces, the reply is split on whitespace,
  and if exactly one of the item's letters (upper case, case-sensitive) is a whole token
  that letter is the reading; failing that, if exactly one option's text (lower-cased)
  is a substring of the lower-cased reply, that option; else nothing (VLMEvalKit then
  asks an LLM judge; this counts exact matching alone). One stored revision also skips
  the letter unless it stands before the last five tokens and skips the text match for
  replies longer than twice the options' total length; `--json` gives its figures as
  `vlmevalkit_rev2`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "tests" / "run" / "data"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
CATEGORIES = ("misread graded as right", "misread graded as wrong", "unreadable", "right")

_REFERENCE_LETTER = re.compile(r"\b([A-D])\b")


def reference_reading(reply: str, options: list[str]) -> int | None:
    m = _REFERENCE_LETTER.search(reply.upper())
    return None if m is None else LETTERS.index(m.group(1))


_VLMEVAL_REFUSALS = (
    "Sorry, I can't help with images of people yet.",
    "I can't process this file.",
    "I'm sorry, but without the image provided",
    "Cannot determine the answer",
)
_VLMEVAL_PUNCT = str.maketrans({c: " " for c in ".()[],:;!*#{}"})


def vlmevalkit_reading(reply: str, options: list[str], *, rev2: bool = False) -> int | None:
    if "Failed to obtain answer via API" in reply or any(s in reply for s in _VLMEVAL_REFUSALS):
        return None
    tokens = reply.translate(_VLMEVAL_PUNCT).split()
    letters = LETTERS[: len(options)]
    present = [c for c in letters if c in tokens]
    if len(present) == 1:
        c = present[0]
        if not rev2 or tokens.index(c) < len(tokens) - 5:
            return LETTERS.index(c)
    elif not present and "Z" in tokens:
        return None  # the "no option" letter
    low = reply.lower()
    if rev2 and len(low) > 2 * sum(len(o) for o in options):
        return None
    hits = [i for i, o in enumerate(options) if o.lower() in low]
    return hits[0] if len(hits) == 1 else None


def medrcube_reading(reply: str, options: list[str]) -> int | None:
    from medrcube.run.extract import extract

    return extract(reply, options).choice


READERS = {
    "medrcube": medrcube_reading,
    "reference": reference_reading,
    "vlmevalkit": vlmevalkit_reading,
    "vlmevalkit_rev2": lambda r, o: vlmevalkit_reading(r, o, rev2=True),
}


def category(got: int | None, row: dict[str, Any]) -> str:
    if got == row["expected"]:
        return "right"
    if got is None:
        return "unreadable"
    return "misread graded as right" if got == row["key"] else "misread graded as wrong"


def load(name: str) -> list[dict[str, Any]]:
    with open(DATA / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def tally(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, read in READERS.items():
        cats: Counter[str] = Counter()
        misread_kinds: Counter[str] = Counter()
        for row in rows:
            c = category(read(row["reply"], row["options"]), row)
            cats[c] += 1
            if c.startswith("misread"):
                misread_kinds[row.get("kind", "adversarial")] += 1
        out[name] = {"n": len(rows), **{c: cats[c] for c in CATEGORIES},
                     "misreads_by_kind": dict(misread_kinds.most_common())}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.extract_readings")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    doc = {"corpus": tally(load("replies.jsonl")), "adversarial": tally(load("adversarial.jsonl"))}
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    for part, figures in doc.items():
        print(f"\n{part}")
        print(f"{'reader':<16}" + "".join(f"{c:>26}" for c in CATEGORIES))
        for name, f in figures.items():
            print(f"{name:<16}" + "".join(f"{f[c]:>26}" for c in CATEGORIES))
        for name, f in figures.items():
            if f["misreads_by_kind"]:
                print(f"  {name} misreads by kind: {f['misreads_by_kind']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
