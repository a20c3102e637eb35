"""A simulated scorer whose calibration is known, for tests and benchmarks (docs/clinical.md).

Each item gets a confidence c drawn uniformly from [low, high]; it is answered correctly
with probability f(c): f(c) = c for the `calibrated` scorer, f(c) = c - gap for the
`overconfident` one (gap > 0: it says 80% and is right 80% - gap of the time). Because
the gap is the same at every confidence, the true expected calibration error and the
true root-mean-square calibration error of the overconfident scorer are both `gap`,
at any binning, and both are 0 for the calibrated one.

Items sit on images (1 to `max_per_image` items each), so the records have real image
clusters for the cluster bootstrap. With `shared` = 0 outcomes are independent given the
confidence. With `shared` = s > 0 the items of an image share one confidence and, each
with probability s, one draw of correctness (a hard image is missed by every question
about it): P(correct | c) is still f(c), so the truth above is unchanged, but the items
of an image are correlated, which an item-level bootstrap ignores.
Records are real GradedRecords with a `logits`-style confidence, so the metrics read
them exactly as they read a run's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from medrcube.records import GradedRecord, Outcome


@dataclass(frozen=True, slots=True)
class SimulatedScorer:
    gap: float = 0.0  # true calibration error (0: calibrated)
    low: float = 0.3
    high: float = 1.0
    n_options: int = 4
    shared: float = 0.0  # probability that an item shares its image's correctness draw

    def __post_init__(self) -> None:
        if not 0.0 <= self.low < self.high <= 1.0 or self.low - self.gap < 0.0:
            raise ValueError(f"need 0 <= low < high <= 1 and low - gap >= 0, got {self}")

    @property
    def true_ece(self) -> float:
        return self.gap

    def records(self, n_items: int, seed: int, *, max_per_image: int = 3, task: str = "Disease Diagnosis",
                variant: str = "standard") -> list[GradedRecord]:
        rng = np.random.default_rng(seed)
        sizes = rng.integers(1, max_per_image + 1, size=n_items)
        image = np.repeat(np.arange(n_items), sizes)[:n_items]
        conf = rng.uniform(self.low, self.high, size=n_items)
        draw = rng.random(n_items)
        if self.shared > 0:
            conf = rng.uniform(self.low, self.high, size=n_items)[image]  # one confidence per image
            image_draw = rng.random(n_items)[image]
            draw = np.where(rng.random(n_items) < self.shared, image_draw, draw)
        correct = draw < conf - self.gap
        out = []
        for i in range(n_items):
            answer = int(rng.integers(0, self.n_options))
            chosen = answer if correct[i] else (answer + 1 + int(rng.integers(0, self.n_options - 1))) % self.n_options
            out.append(GradedRecord(
                item_id=f"sim{i}", dataset="sim", task=task, modality="X-Ray", part="Chest",
                image=f"img{image[i]}", image_digest=None, variant=variant, rotation=0, answer=answer,
                n_options=self.n_options, prompt_hash="sim", response=None, extracted=chosen, how="simulated",
                outcome=Outcome.CORRECT if correct[i] else Outcome.WRONG,
                confidence={"source": "logits", "value": float(conf[i]), "probs": None, "mass": 1.0},
            ))
        return out


CALIBRATED = SimulatedScorer(gap=0.0)
OVERCONFIDENT = SimulatedScorer(gap=0.15)
