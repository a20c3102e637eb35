"""Image perturbations: named, parametrised, seeded transformations of decoded pixels.

A perturbation variant asks an item again on a changed image, the way another scanner,
another compression setting, another window or another resolution would show it. The
kinds are the registry's (run/perturbations.py: the product's own in
run/builtin_perturbations.py, a site package's by entry point); this module parses a
spec against it, decides where a perturbation is asked, and runs the pipeline. An item
a perturbation does not apply to is not asked in that variant (`applies_to_item`,
`perturb_image` returning None when the region of interest would be lost).

Pipeline (`perturb_image`): decode (16-bit and float windowed over their own range, as
models/images.py does; palette, alpha and other modes to L or RGB), scale down to the
model's `max_side` first (so that noise is added at the resolution the model sees, not
averaged away by a later resize), transform in float [0, 1], quantise to 8 bits, encode
(PNG; JPEG at the quality for `jpeg`). The output is mode L or RGB, never larger than
`max_side`. Noise comes from a generator seeded by sha256(kind, level, seed, the source
image's digest): the same image gets the same noise in every run and every item on it.

The store keys a perturbed ask by the sha256 of the bytes produced here (the plan's
ImageInput digest), so a change of algorithm or of the encoder's bytes is a new key,
never a stale answer.
"""

from __future__ import annotations

import hashlib
import io
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from medrcube.run.perturbations import PerturbationKind, examples, kind_of, names

DEFAULT_MAX_SIDE = 1024  # models/images.py's default: what an API adapter sends at most
ALGORITHM_VERSION = 1  # part of the noise seed: bump when a transformation changes

# numpy is imported in the functions that perturb pixels: the variants' names are read when
# the options are, at every start of the gate and of `medrcube run`, before any image is.
if TYPE_CHECKING:
    import numpy as np


class PerturbationError(ValueError):
    """A perturbation spec that cannot be parsed, or an image it cannot be applied to."""


@dataclass(frozen=True, slots=True)
class Perturbation:
    """One perturbation at one level. `spec` is the variant name records carry."""

    kind: str
    level: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        kind = kind_of(self.kind)
        if kind is None:
            raise PerturbationError(f"unknown perturbation {self.kind!r}; choices: {examples()}")
        if kind.levels is None:
            if self.level is not None:
                raise PerturbationError(f"{self.kind} takes no level: write it as {self.kind!r}")
            return
        if self.level is None or isinstance(self.level, bool) or not math.isfinite(float(self.level)):
            raise PerturbationError(f"{self.kind} needs a level, e.g. {kind.example}")
        lo, hi = kind.levels.low, kind.levels.high
        if kind.levels.integer and float(self.level) != int(self.level):
            raise PerturbationError(f"{self.kind} needs an integer level, got {self.level!r}")
        if not lo <= float(self.level) <= hi or (kind.levels.above_low and self.level <= lo):
            raise PerturbationError(f"{self.kind} level {_fmt(self.level)} is outside {_fmt(lo)}..{_fmt(hi)}")

    @property
    def kind_entry(self) -> PerturbationKind:
        """The registry's entry of this perturbation's kind."""
        kind = kind_of(self.kind)
        assert kind is not None  # __post_init__ refused an unknown kind
        return kind

    @property
    def spec(self) -> str:
        """"jpeg:30", "noise:0.03", "noise:0.03@7" (a non-zero seed), "flip"."""
        text = self.kind if self.level is None else f"{self.kind}:{_fmt(self.level)}"
        return f"{text}@{self.seed}" if self.seed else text

    def __str__(self) -> str:
        return self.spec

    def applies_to_task(self, task: str) -> bool:
        """Whether this kind may be asked on a task at all (its `skips_tasks`)."""
        return task not in self.kind_entry.skips_tasks

    def applies_to_item(self, task: str, question: str, options: tuple[str, ...]) -> bool:
        """The task rule, and the kind's item rule (a flip: no side named in the question or an option)."""
        if not self.applies_to_task(task):
            return False
        skips = self.kind_entry.skips_item
        return not (skips is not None and skips(question, tuple(options)))


def parse_perturbation(token: str) -> Perturbation:
    """"jpeg:30" -> Perturbation("jpeg", 30); "noise:0.03@7" carries seed 7; "flip"."""
    text = token.strip().casefold()
    head, at, seed_text = text.partition("@")
    kind, colon, level_text = head.partition(":")
    seed = 0
    if at:
        if not seed_text.isdigit():
            raise PerturbationError(f"perturbation {token.strip()!r}: the seed after '@' must be an integer >= 0")
        seed = int(seed_text)
    entry = kind_of(kind)
    if entry is not None and entry.levels is None:
        if colon:
            raise PerturbationError(f"perturbation {token.strip()!r}: {kind} takes no level; write {kind!r}")
        return Perturbation(kind, None, seed)
    if not colon or not level_text.strip():
        example = entry.example if entry is not None else examples()
        raise PerturbationError(f"perturbation {token.strip()!r} needs a level, e.g. {example}")
    try:
        level = float(level_text)
    except ValueError:
        raise PerturbationError(f"perturbation {token.strip()!r}: level {level_text!r} is not a number") from None
    integer = entry is not None and entry.levels is not None and entry.levels.integer
    return Perturbation(kind, int(level) if integer and level.is_integer() else level, seed)


def is_kind(word: str) -> bool:
    """Whether a variant word ("jpeg:30", "flip@2") names a registered perturbation."""
    return word.partition(":")[0].partition("@")[0] in names()


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


# -- the region of interest -----------------------------------------------------------------


def roi_box(meta: Mapping[str, Any] | None) -> tuple[float, float, float, float] | None:
    """(x0, y0, x1, y1) in source pixels from `meta.bbox` or `meta.lesion` (centre, diameter)."""
    if not meta:
        return None
    box = meta.get("bbox")
    if isinstance(box, (list, tuple)) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box):
        return (float(box[0]), float(box[1]), float(box[2]), float(box[3]))
    lesion = meta.get("lesion")
    if isinstance(lesion, Mapping):
        centre, diameter = lesion.get("center_row_col"), lesion.get("diameter_px")
        if isinstance(centre, (list, tuple)) and len(centre) == 2 and isinstance(diameter, (int, float)):
            r, c, h = float(centre[0]), float(centre[1]), float(diameter) / 2
            return (c - h, r - h, c + h, r + h)
    return None


def roi_kept(p: Perturbation, size: tuple[int, int], box: tuple[float, float, float, float] | None,
             task: str = "") -> bool:
    """Whether a kind that moves the image (a rotation, a crop: its `keeps_roi`) keeps the
    ROI inside the frame (and, for ROI Grounding, its centre in the same quadrant). Other
    kinds move nothing."""
    keeps = p.kind_entry.keeps_roi
    return box is None or keeps is None or keeps(p.level, size, box, task)


# -- pixels ----------------------------------------------------------------------------------


def decode(data: bytes, max_side: int | None = DEFAULT_MAX_SIDE) -> tuple[np.ndarray, tuple[int, int]]:
    """Encoded bytes -> float32 pixels in [0, 1] ((H, W) or (H, W, 3)) no larger than
    `max_side`, and the source (width, height) the ROI coordinates refer to."""
    import numpy as np
    from PIL import Image

    try:
        im: Image.Image = Image.open(io.BytesIO(data))  # any image from here on (converted below)
        im.load()
    except Exception as exc:  # noqa: BLE001 - PIL raises many kinds for damaged files
        raise PerturbationError(f"not a readable image ({len(data)} bytes): {exc}") from exc
    source = im.size
    if im.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        arr = np.asarray(im, dtype=np.float32)
        lo, hi = float(arr.min()), float(arr.max())
        arr = np.zeros_like(arr) if hi <= lo else (arr - lo) / (hi - lo)
        im = Image.fromarray((arr * 255).round().astype(np.uint8), mode="L")
    elif im.mode in ("LA", "RGBA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        black = Image.new("RGBA", rgba.size, (0, 0, 0, 255))
        im = Image.alpha_composite(black, rgba).convert("L" if im.mode == "LA" else "RGB")
    elif im.mode == "1":
        im = im.convert("L")
    elif im.mode not in ("L", "RGB"):
        im = im.convert("RGB")
    if max_side and max(im.size) > max_side:
        scale = max_side / max(im.size)
        im = im.resize((max(1, round(im.width * scale)), max(1, round(im.height * scale))), Image.Resampling.LANCZOS)
    return np.asarray(im, dtype=np.float32) / 255.0, source


def encode(pixels: np.ndarray, *, jpeg_quality: int | None = None) -> bytes:
    """Float pixels in [0, 1] -> 8-bit PNG (or JPEG at `jpeg_quality`), mode L or RGB."""
    import numpy as np
    from PIL import Image

    arr = (np.clip(pixels, 0.0, 1.0) * 255.0).round().astype(np.uint8)
    im = Image.fromarray(arr, mode="L" if arr.ndim == 2 else "RGB")
    buf = io.BytesIO()
    if jpeg_quality is not None:
        im.save(buf, format="JPEG", quality=int(jpeg_quality), optimize=False, progressive=False, subsampling=0)
    else:
        im.save(buf, format="PNG", compress_level=6, optimize=False)
    return buf.getvalue()


def _rng(p: Perturbation, source_digest: str) -> np.random.Generator:
    import numpy as np

    material = f"{ALGORITHM_VERSION}|{p.kind}|{p.level!r}|{p.seed}|{source_digest}".encode()
    return np.random.default_rng(int.from_bytes(hashlib.sha256(material).digest()[:16], "big"))


def transform(p: Perturbation, pixels: np.ndarray, source_digest: str = "") -> np.ndarray:
    """The perturbation of decoded float pixels (same shape; values may leave [0, 1])."""
    return p.kind_entry.transform(pixels, None if p.level is None else float(p.level), lambda: _rng(p, source_digest))


def perturb_image(p: Perturbation, data: bytes, *, source_digest: str = "", max_side: int | None = DEFAULT_MAX_SIDE,
                  meta: Mapping[str, Any] | None = None, task: str = "") -> bytes | None:
    """Encoded bytes -> the perturbed image's encoded bytes, or None when the perturbation
    would lose the item's region of interest (`roi_kept`)."""
    out, source = render(p, data, source_digest or digest(data), max_side)
    return out if roi_kept(p, source, roi_box(meta), task) else None


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def render(p: Perturbation, data: bytes, source_digest: str, max_side: int | None) -> tuple[bytes, tuple[int, int]]:
    """The perturbed image's bytes (whatever the ROI) and the source (width, height)."""
    pixels, source = decode(data, max_side)
    out = transform(p, pixels, source_digest)
    quality = int(p.level) if p.kind_entry.jpeg_quality and p.level is not None else None
    return encode(out, jpeg_quality=quality), source


class PerturbedImages:
    """Perturbed images of one plan, by (source digest, spec): the digest of every one
    (the store key needs it at plan time) and a bounded LRU of the bytes, recomputed
    (and checked against the digest) when evicted before the adapter reads them. The
    pixels do not depend on the item; whether an item keeps its ROI is decided per item
    from the source size (`roi_kept`)."""

    def __init__(self, *, max_side: int | None = DEFAULT_MAX_SIDE, max_bytes: int = 128 * 1024 * 1024) -> None:
        self.max_side = max_side
        self.max_bytes = max_bytes
        self._made: dict[tuple[str, str], tuple[str, tuple[int, int]]] = {}
        self._bytes: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.computed = 0

    def _render(self, p: Perturbation, source_digest: str, read: Callable[[], bytes]) -> tuple[bytes, tuple[int, int]]:
        out = render(p, read(), source_digest, self.max_side)
        with self._lock:
            self.computed += 1
        return out

    def digest_of(self, p: Perturbation, source_digest: str, read: Callable[[], bytes],
                  meta: Mapping[str, Any] | None = None, task: str = "") -> str | None:
        """The sha256 of the perturbed bytes, or None when the item's ROI would be lost."""
        key = (source_digest, p.spec)
        with self._lock:
            made = self._made.get(key)
        if made is None:
            out, size = self._render(p, source_digest, read)
            made = (digest(out), size)
            with self._lock:
                self._made[key] = made
                self._remember(key, out)
        return made[0] if roi_kept(p, made[1], roi_box(meta), task) else None

    def _remember(self, key: tuple[str, str], out: bytes) -> None:
        if len(out) > self.max_bytes or key in self._bytes:
            return
        self._bytes[key] = out
        self._size += len(out)
        while self._size > self.max_bytes:
            _, old = self._bytes.popitem(last=False)
            self._size -= len(old)

    def reader(self, p: Perturbation, source_digest: str, read: Callable[[], bytes]) -> Callable[[], bytes]:
        """A reader of the perturbed bytes for an ImageInput (after `digest_of`)."""
        key = (source_digest, p.spec)

        def read_perturbed() -> bytes:
            with self._lock:
                hit = self._bytes.get(key)
                made = self._made.get(key)
            if hit is not None:
                return hit
            out, _ = self._render(p, source_digest, read)
            if made is None or digest(out) != made[0]:
                raise PerturbationError(
                    f"the {p.spec} image of {source_digest[:12]} came out different on recomputation; "
                    "the perturbation is not deterministic on this machine"
                )
            return out

        return read_perturbed
