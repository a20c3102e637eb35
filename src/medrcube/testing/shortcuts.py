"""Blind shortcut models: what an adversarial vendor's text-only system would answer.

Each strategy reads only what a blind request carries (question and options, and for the
sibling reader the other questions of the same image, which a server sees across requests
when one image is sent several times) and returns a letter per item in the item's own
option order. `replay_lines` writes them as a replay file, so they go through the real gate
(`--model=replay:FILE`) like any recorded model:

- `constant:L`: the letter L for every item (a letter missing from an item's options is
  answered as L anyway: the gate grades it as a wrong answer, as it would a model's);
- `longest`: the longest option (ties: the first);
- `prior`: the leakage audit's options-only text model, cross-validated by image, so no
  item is answered by a model that saw its own image's items;
- `siblings`: the audit's sibling reader (options, question, and the image's other items).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from medrcube.cube import audit_model as model
from medrcube.cube.item import LETTERS, Item

STRATEGIES = ("constant:A", "constant:B", "constant:C", "constant:D", "longest", "prior", "siblings")


def _cv_letters(items: Sequence[Item], features: model.Features, folds: int = 5, seed: int = 0) -> dict[str, str]:
    import hashlib

    fold_of = {it.id: int.from_bytes(hashlib.sha256(f"{seed}\x1f{model.image_key(it)}".encode()).digest()[:4], "big") % folds for it in items}
    out: dict[str, str] = {}
    for k in range(folds):
        test = [it for it in items if fold_of[it.id] == k]
        train = [it for it in items if fold_of[it.id] != k]
        if not test:
            continue
        vocab, w = model.fit(train, features)
        for it, pick in zip(test, model.predict(test, features, vocab, w), strict=True):
            out[it.id] = LETTERS[pick]
    return out


def answers(items: Sequence[Item], strategy: str) -> dict[str, str]:
    """Item id -> the letter `strategy` answers (module docstring)."""
    if strategy.startswith("constant:"):
        letter = strategy.split(":", 1)[1]
        return {it.id: letter for it in items}
    if strategy == "longest":
        return {it.id: LETTERS[max(range(len(it.options)), key=lambda j: (len(it.options[j]), -j))] for it in items}
    if strategy == "prior":
        return _cv_letters(items, model.option_features)
    if strategy == "siblings":
        siblings: dict[str, list[Item]] = defaultdict(list)
        for it in items:
            siblings[model.image_key(it)].append(it)
        return _cv_letters(items, model.sibling_features(siblings))
    raise ValueError(f"unknown shortcut strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")


def write_replay(items: Sequence[Item], strategy: str, path: str | Path) -> Path:
    """A replay file (JSON Lines, standard variant) of `strategy`'s answers."""
    picks = answers(items, strategy)
    p = Path(path)
    p.write_text("".join(json.dumps({"id": it.id, "response": picks[it.id]}) + "\n" for it in items), encoding="utf-8")
    return p
