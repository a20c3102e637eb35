"""Baselines that answer like a model would (a letter), for honest floors.

- `random[:SEED]`: a uniform choice over the request's own options. The choice is a hash
  of (seed, item id, variant, the options as shown), so it is the same across runs,
  worker counts and request orders: a random baseline that changed with `-n 8` would
  make regression checks flaky.
- `prior`: text-only exploitation of answer priors (the paper's warning that options alone
  leak the answer). See `PriorAdapter` for the exact rule.

Both are real ModelAdapters: the runner, the response store and answer extraction treat
them exactly as a model, which is also how those layers are tested without a network.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from medrcube.models.base import AdapterBase, ErrorKind, Request, Response

if TYPE_CHECKING:
    from medrcube.cube.item import Cube, Item

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _no_options(req: Request, who: str) -> Response:
    return Response(
        text=None,
        error=f"{who} baseline needs the request's options, and item {req.item_id!r} came without any",
        error_kind=ErrorKind.INTERNAL,
    )


class RandomAdapter(AdapterBase):
    """Uniform over the request's options, reproducible by seed (see module docstring)."""

    keyed_by_item = True  # seeded per item: see ModelAdapter

    def __init__(self, seed: int = 0, *, spec: str | None = None, concurrency: int | None = None, batch_size: int = 64):
        self.seed = int(seed)
        self.spec = spec or f"random:{self.seed}"
        self.fingerprint = f"random:{self.seed}"
        self.batch_size = batch_size
        self.concurrency = concurrency or 4

    def choose(self, req: Request) -> int:
        """The index (in the order shown) this baseline picks for `req`."""
        # Unit separators keep ("a", "bc") and ("ab", "c") apart.
        material = "\x1f".join((str(self.seed), req.item_id, req.variant, *req.options))
        h = int.from_bytes(hashlib.sha256(material.encode("utf-8")).digest()[:8], "big")
        # 2**64 mod n bias is below 1e-18 for any realistic n: uniform for our purposes.
        return h % len(req.options)

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        return [
            Response(text=LETTERS[self.choose(r)]) if r.options else _no_options(r, "the random")
            for r in requests
        ]

    async def aclose(self) -> None:
        return None


def _norm(text: str) -> str:
    # Datasets spell the same option "Normal" and "normal "; the prior should pool them.
    return " ".join(str(text).split()).casefold()


class PriorAdapter(AdapterBase):
    """Answers what was most often correct for items like this one, never looking at images.

    The rule, for a request about item X with task T showing options O:

    1. Among OTHER items of the cube (leave-one-out: X itself never counts) with task T
       and the same option set as X (compared as a set of texts, case- and
       whitespace-insensitive, so rotation and order do not matter), count how often each
       option text is the correct one. Answer the most frequent.
    2. If no other item shares the option set, count instead how often each text shown in
       O is the correct answer among the other items of task T (any option set), and
       answer the most frequent one that has a count above zero.
    3. Otherwise answer "A".

    Ties are broken by the normalised option text (alphabetically), which does not depend
    on the order the options are shown in. The answer is the letter of the chosen text in
    the order shown, like a model's answer.
    """

    keyed_by_item = True  # leave-one-out per item: see ModelAdapter

    def __init__(self, cube: Cube, *, concurrency: int | None = None, batch_size: int = 64):
        self.spec = "prior"
        self.fingerprint = f"prior:{cube.fingerprint}"
        self.batch_size = batch_size
        self.concurrency = concurrency or 4
        self._source = cube.source
        self._items: dict[str, Item] = {it.id: it for it in cube.items}
        # (task, frozenset of option texts) -> Counter of correct texts
        self._by_set: dict[tuple[str, frozenset[str]], Counter[str]] = defaultdict(Counter)
        # task -> Counter of correct texts
        self._by_task: dict[str, Counter[str]] = defaultdict(Counter)
        for it in cube.items:
            answer = _norm(it.answer_text)
            self._by_set[(it.task, frozenset(map(_norm, it.options)))][answer] += 1
            self._by_task[it.task][answer] += 1

    def choose(self, req: Request) -> tuple[int, str]:
        """(index in the order shown, which rule decided: "option_set", "task", "default")."""
        shown = [_norm(o) for o in req.options]
        own = self._items.get(req.item_id)
        task = own.task if own is not None else req.task
        own_answer = _norm(own.answer_text) if own is not None else None

        by_set = Counter(self._by_set.get((task, frozenset(shown)), Counter()))
        if own_answer is not None and own is not None and frozenset(map(_norm, own.options)) == frozenset(shown):
            by_set[own_answer] -= 1  # leave-one-out
        pick = _most_common(by_set, shown)
        if pick is not None:
            return shown.index(pick), "option_set"

        by_task = Counter(self._by_task.get(task, Counter()))
        if own_answer is not None:
            by_task[own_answer] -= 1
        pick = _most_common(Counter({t: by_task[t] for t in shown}), shown)
        if pick is not None:
            return shown.index(pick), "task"
        return 0, "default"

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        out = []
        for r in requests:
            if not r.options:
                out.append(_no_options(r, "the prior"))
            elif r.item_id not in self._items:
                # Leave-one-out needs to know the item; answering blind would be a guess.
                out.append(
                    Response(
                        text=None,
                        error=f"the prior baseline was built from {self._source} and item {r.item_id!r} is not in it",
                        error_kind=ErrorKind.INTERNAL,
                    )
                )
            else:
                out.append(Response(text=LETTERS[self.choose(r)[0]]))
        return out

    async def aclose(self) -> None:
        return None


def _most_common(counts: Counter[str], allowed: Sequence[str]) -> str | None:
    """The allowed text with the highest positive count, ties by text; None if none counts."""
    best = [(-n, t) for t, n in counts.items() if n > 0 and t in allowed]
    return min(best)[1] if best else None
