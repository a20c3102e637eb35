"""A simulated model that answers from the pixels it is sent, for robustness tests and demos.

`NoiseBlindModel(cube)` knows the cube's answers and "sees" an image only when it is
clean: Immerkaer's fast estimate of the noise sigma (J. Immerkaer 1996, "Fast noise
variance estimation", CVIU 64:300-302) below 5 grey levels (every mini-cube image is
below 3; `noise:0.03` gives about 8, `noise:0.1` about 20). Then it answers right on the
~80% of items its item-id hash picks, else it names the next option. So its accuracy
falls under noise and holds under compression, windowing, resolution and position
changes: a real adapter (the ModelAdapter protocol) whose behaviour comes from the
bytes the runner sends, not from a script of answers.
"""

from __future__ import annotations

import hashlib
import io
import string
from collections.abc import Sequence

import numpy as np

from medrcube.cube.item import Cube
from medrcube.models.base import AdapterBase, Request, Response

SEES_BELOW = 5.0


def noise_sigma(data: bytes) -> float:
    """Immerkaer (1996) fast noise-variance estimate, in 8-bit grey levels."""
    from PIL import Image

    a = np.asarray(Image.open(io.BytesIO(data)).convert("L"), dtype=np.float64)
    lap = (a[:-2, :-2] - 2 * a[:-2, 1:-1] + a[:-2, 2:] - 2 * a[1:-1, :-2] + 4 * a[1:-1, 1:-1]
           - 2 * a[1:-1, 2:] + a[2:, :-2] - 2 * a[2:, 1:-1] + a[2:, 2:])
    h, w = a.shape
    return float(np.sqrt(np.pi / 2) * np.abs(lap).sum() / (6 * (w - 2) * (h - 2)))


class NoiseBlindModel(AdapterBase):
    """Right on ~80% of the items (chosen by item id) when the image is clean, wrong on
    every item when it is noisy (module docstring)."""

    spec = "noise-blind"
    fingerprint = "test:noise-blind:1"
    batch_size = 8
    concurrency = 2

    def __init__(self, cube: Cube, *, image_max_side: int | None = None) -> None:
        self.answers = {it.id: it.answer_text for it in cube.items}
        self.image_max_side = image_max_side  # the limit the runner makes perturbed images within
        self.seen = 0
        self.modes: set[str] = set()
        self.largest_side = 0  # of the images received

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        return [self._one(r) for r in requests]

    def _one(self, r: Request) -> Response:
        self.seen += 1
        right = r.options.index(self.answers[r.item_id])
        knows = int(hashlib.sha256(r.item_id.encode()).hexdigest(), 16) % 10 < 8
        sees = bool(r.images) and self._clean(r.images[0].read())
        choice = right if (knows and sees) else (right + 1) % len(r.options)
        return Response(text=string.ascii_uppercase[choice])

    def _clean(self, data: bytes) -> bool:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            self.modes.add(im.mode)
            self.largest_side = max(self.largest_side, *im.size)
        return noise_sigma(data) < SEES_BELOW

    async def aclose(self) -> None:
        return None
