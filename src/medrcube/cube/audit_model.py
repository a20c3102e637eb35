"""The text-only shortcut models the leakage audit fits: which option is right, from text alone.

A conditional-logit model (McFadden's choice model: one score per option, a softmax over
an item's options) on sparse indicator features of the text a blind model sees:

- options-only prior: the option's own text and its words, the option set it is shown
  in, the question paired with the option, and whether it is the longest or shortest;
- sibling reader: the same, plus every word of the image's OTHER questions and options
  (and which tasks they ask) paired with the option's text. What this model gains over
  the prior is what the sibling questions give away.

Fitted by L-BFGS (scipy) on the log-likelihood with an L2 penalty, and scored by
k-fold cross-validation with folds grouped by image, so that an item is always predicted
by a model that never saw its image's items. Ties (options whose features were never
seen in training) are broken by a hash of the item and option, never by the letter: a
model that fell back to "A" would measure the letter balance, not the text. The audit
scores a tie by its expectation (1/t for the answer among t tied options): a coin flip
on one item would read as a prior of 0 or 1 where the model knows nothing.

scikit-learn is not a dependency; the model is forty lines of numpy and scipy (threadpoolctl
holds their BLAS to one thread while it fits: `cross_validated`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from medrcube.cube.item import Item

_WORD = re.compile(r"[a-z0-9]+")
Features = Callable[[Item, int], list[str]]


def norm(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def words(text: str) -> list[str]:
    return _WORD.findall(norm(text))


def option_features(item: Item, j: int) -> list[str]:
    """What a blind model can read about option j of `item` with no other item in view."""
    opt = norm(item.options[j])
    lengths = [len(o) for o in item.options]
    feats = [f"opt={opt}", f"set={'|'.join(sorted(map(norm, item.options)))}>{opt}", f"q={norm(item.question)}>{opt}"]
    feats += [f"w={w}" for w in set(words(opt))]
    if lengths.count(max(lengths)) == 1 and lengths[j] == max(lengths):
        feats.append("longest")
    if lengths.count(min(lengths)) == 1 and lengths[j] == min(lengths):
        feats.append("shortest")
    return feats


def sibling_features(siblings: Mapping[str, Sequence[Item]]) -> Features:
    """Option features plus the words of the other items on the same image, per option."""

    def features(item: Item, j: int) -> list[str]:
        opt = norm(item.options[j])
        seen: set[str] = set()
        for other in siblings.get(image_key(item), ()):
            if other.id == item.id:
                continue
            seen.add(f"task:{other.task}")
            seen.update(words(other.question))
            for o in other.options:
                seen.update(words(o))
        return option_features(item, j) + [f"sib={s}>{opt}" for s in sorted(seen)]

    return features


def image_key(item: Item) -> str:
    """Items on one image: the dataset and the image path (an item without an image is its own)."""
    return f"{item.dataset}\x1f{item.image}" if item.image else f"{item.dataset}\x1f#{item.id}"


def _tiebreak(item: Item, j: int) -> float:
    h = hashlib.sha256(f"{item.id}\x1f{item.options[j]}".encode()).digest()
    return int.from_bytes(h[:4], "big") / 2**32 * 1e-9


class _Design:
    """Rows: every option of every item, items contiguous; columns: features."""

    def __init__(self, items: Sequence[Item], features: Features, vocab: dict[str, int]):
        from scipy import sparse

        rows, cols = [], []
        self.starts = np.zeros(len(items) + 1, dtype=np.int64)
        r = 0
        for i, it in enumerate(items):
            for j in range(len(it.options)):
                for f in features(it, j):
                    c = vocab.get(f)
                    if c is not None:
                        rows.append(r)
                        cols.append(c)
                r += 1
            self.starts[i + 1] = r
        self.x = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(r, len(vocab)))
        self.y = np.zeros(r)
        for i, it in enumerate(items):
            self.y[self.starts[i] + it.answer] = 1.0
        self.jitter = np.array([_tiebreak(it, j) for it in items for j in range(len(it.options))])

    def probs(self, w: np.ndarray) -> np.ndarray:
        s = self.x @ w
        seg = self.starts[:-1]
        m = np.maximum.reduceat(s, seg)
        e = np.exp(s - np.repeat(m, np.diff(self.starts)))
        z = np.add.reduceat(e, seg)
        return np.asarray(e / np.repeat(z, np.diff(self.starts)))


def fit(items: Sequence[Item], features: Features, l2: float = 1.0) -> tuple[dict[str, int], np.ndarray]:
    """Feature vocabulary and weights maximising the penalised log-likelihood of the answers."""
    from scipy.optimize import minimize

    vocab: dict[str, int] = {}
    for it in items:
        for j in range(len(it.options)):
            for f in features(it, j):
                vocab.setdefault(f, len(vocab))
    d = _Design(items, features, vocab)
    if not vocab:
        return vocab, np.zeros(0)

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        p = d.probs(w)
        nll = -float(np.sum(np.log(np.clip(p[d.y == 1], 1e-300, None))))
        grad = d.x.T @ (p - d.y) + 2 * l2 * w
        return nll + l2 * float(w @ w), np.asarray(grad)

    res = minimize(loss, np.zeros(len(vocab)), jac=True, method="L-BFGS-B", options={"maxiter": 200})
    return vocab, np.asarray(res.x)


def _scores(d: _Design, w: np.ndarray) -> np.ndarray:
    return np.asarray(d.x @ w) if len(w) else np.zeros(d.x.shape[0])


def predict(items: Sequence[Item], features: Features, vocab: dict[str, int], w: np.ndarray) -> list[int]:
    """The option index each item's highest score picks (ties by a hash, never by the letter)."""
    d = _Design(items, features, vocab)
    s = _scores(d, w) + d.jitter
    return [int(np.argmax(s[d.starts[i] : d.starts[i + 1]])) for i in range(len(items))]


def expected_hits(items: Sequence[Item], features: Features, vocab: dict[str, int], w: np.ndarray) -> list[float]:
    """Per item, the chance that the highest score picks its answer, ties broken uniformly."""
    d = _Design(items, features, vocab)
    s = _scores(d, w)
    out = []
    for i, it in enumerate(items):
        row = s[d.starts[i] : d.starts[i + 1]]
        tied = np.flatnonzero(row >= row.max() - 1e-9)
        out.append(1.0 / len(tied) if it.answer in tied else 0.0)
    return out


def _once_each(items: Sequence[Item], features: Features) -> Features:
    """`features`, computed once per option of `items`: every fold reads each item's features
    twice for its model (the vocabulary, the design) and once for its predictions, nine
    times in all: 6.7 -> 3.6 s of CPU for the audit at the paper's scale. By the item object
    itself (a fold's lists hold the same objects), falling back to `features` for any other item."""
    made = {id(it): (it, [features(it, j) for j in range(len(it.options))]) for it in items}

    def once(item: Item, j: int) -> list[str]:
        hit = made.get(id(item))
        return hit[1][j] if hit is not None and hit[0] is item else features(item, j)

    return once


def cross_validated(items: Sequence[Item], features: Features, folds: int = 5, seed: int = 0) -> dict[str, float]:
    """Item id -> how often the model fitted on the other folds (grouped by image) picks its
    answer: 1 or 0, or 1/t when its answer is one of t options tied for the highest score."""
    from threadpoolctl import threadpool_limits

    fold_of = {it.id: int.from_bytes(hashlib.sha256(f"{seed}\x1f{image_key(it)}".encode()).digest()[:4], "big") % folds for it in items}
    out: dict[str, float] = {}
    # One BLAS thread: L-BFGS-B calls BLAS on vectors of a few thousand weights at every
    # step, where OpenBLAS's threads, waking and spinning, cost many times the work itself
    # (the whole audit 7.1 -> 0.6 s of CPU on the bundled cube beside another job, 10.2 ->
    # 3.5 s at the paper's scale: benchmarks/RESULTS.md section 24), with the same figures
    # to the last digit.
    with threadpool_limits(limits=1, user_api="blas"):
        features = _once_each(items, features)
        for k in range(folds):
            test = [it for it in items if fold_of[it.id] == k]
            train = [it for it in items if fold_of[it.id] != k]
            if not test:
                continue
            vocab, w = fit(train, features) if train else ({}, np.zeros(0))
            out.update(zip((it.id for it in test), expected_hits(test, features, vocab, w), strict=True))
    return out
