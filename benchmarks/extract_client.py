"""`python -m benchmarks.extract_client --n N --repeat R`: extraction speed in one process.

Builds the corpus (benchmarks/corpus.py), then times `extract(text, options)` over all
of it R times with `time.perf_counter`; prints JSON: responses per second per
repetition, agreement with the corpus's expected choices, and the `how` counts.
The first pass is a warm-up (regex compilation, option caches) and is not counted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.extract_client")
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    from benchmarks.corpus import make_corpus
    from medrcube.run.extract import extract

    corpus = make_corpus(args.n)
    pairs = [(e.text, list(e.options)) for e in corpus]
    results = [extract(t, o) for t, o in pairs]  # warm-up
    rates = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for t, o in pairs:
            extract(t, o)
        rates.append(len(pairs) / (time.perf_counter() - t0))
    agree = sum(1 for e, r in zip(corpus, results, strict=True) if r.choice == e.expected)
    by_kind: dict[str, list[int]] = {}
    for e, r in zip(corpus, results, strict=True):
        tally = by_kind.setdefault(e.kind, [0, 0])
        tally[0] += 1
        tally[1] += r.choice == e.expected
    print(json.dumps({
        "n": len(pairs),
        "rates": rates,
        "agreement": agree / len(pairs),
        "by_kind": {k: {"n": v[0], "agree": v[1] / v[0]} for k, v in sorted(by_kind.items())},
        "how": dict(Counter(r.how for r in results).most_common()),
        "mean_chars": sum(len(t) for t, _ in pairs) / len(pairs),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
