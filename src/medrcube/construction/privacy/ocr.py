"""Text in pixels, found by a real OCR model that runs offline.

The model is PP-OCR (PaddleOCR's detector and recogniser, Apache-2.0) as ONNX files
shipped inside the `rapidocr` wheel, run by `onnxruntime` on the CPU. rapidocr's own
configuration names download URLs for its models; here every model path points at the
file inside the installed wheel, so nothing is ever fetched: a missing file is an error
that says how to install it (`pip install 'medrcube[ocr]'`), never a download.

- `TextReader.detect(pixels)` finds text regions (boxes in the frame's pixels): what
  `medrcube build` masks (or refuses) on every exported frame;
- `TextReader.read(pixels)` also recognises the text of each region: what the tests and
  the benchmark use to check that nothing legible is left.

Frames are [0, 1] display values (gray H x W or RGB H x W x 3), as the readers yield them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Model files inside the rapidocr wheel, by role, most preferred first (the names of the
# versions medrcube was measured with: docs/construction.md).
MODEL_FILES: dict[str, tuple[str, ...]] = {
    "det": ("PP-OCRv6_det_small.onnx", "ch_PP-OCRv5_det_mobile.onnx", "ch_PP-OCRv4_det_infer.onnx", "ch_PP-OCRv4_det_mobile.onnx"),
    "rec": ("PP-OCRv6_rec_small.onnx", "ch_PP-OCRv5_rec_mobile.onnx", "ch_PP-OCRv4_rec_infer.onnx", "ch_PP-OCRv4_rec_mobile.onnx"),
}  # fmt: skip
INSTALL_FIX = "install the OCR extra: pip install 'medrcube[ocr]' (./scripts/setup does), which brings rapidocr and onnxruntime"
# The scale a frame is read at: its long side brought towards DET_SIDE (rapidocr's own
# detector size), but never enlarged more than MAX_UPSCALE times (the detector is
# scale-sensitive: a 64-pixel body outline enlarged tenfold reads as the letter O) and
# never past MAX_SIDE (a large radiograph's text is large too; time grows with area).
DET_SIDE = 736
MAX_UPSCALE = 2.0
MAX_SIDE = 2048


class OcrUnavailable(RuntimeError):
    """The OCR model cannot be loaded; the message names what is missing and the fix."""


@dataclass(frozen=True, slots=True)
class TextRegion:
    """A detected line of text: its box (x0, y0, x1, y1, end-exclusive, frame pixels) and
    the detector's score; `text` only from `TextReader.read` (never written to a manifest)."""

    box: tuple[int, int, int, int]
    score: float
    text: str = ""


def _package_dir() -> Path:
    spec = importlib.util.find_spec("rapidocr")
    if spec is None or not spec.submodule_search_locations:
        raise OcrUnavailable(f"the rapidocr package is not installed; {INSTALL_FIX}")
    if importlib.util.find_spec("onnxruntime") is None:
        raise OcrUnavailable(f"onnxruntime is not installed (rapidocr runs its models with it); {INSTALL_FIX}")
    return Path(next(iter(spec.submodule_search_locations)))


def bundled_models() -> dict[str, Path]:
    """The detection and recognition ONNX files inside the installed rapidocr wheel."""
    models = _package_dir() / "models"
    out: dict[str, Path] = {}
    for role, names in MODEL_FILES.items():
        for name in names:
            p = models / name
            # A real model is megabytes; a few bytes would be a placeholder or a pointer file.
            if p.is_file() and p.stat().st_size > 100_000:
                out[role] = p
                break
        else:
            raise OcrUnavailable(f"{models}: no {role} model among {', '.join(names)} (the rapidocr wheel ships them); {INSTALL_FIX}")
    return out


def engine_name() -> str:
    """What detects text, for the manifest: package version and model files."""
    from importlib.metadata import version

    m = bundled_models()
    return f"rapidocr {version('rapidocr')} (onnxruntime {version('onnxruntime')}): {m['det'].name}, {m['rec'].name} from the wheel"


def to_bgr8(pixels: np.ndarray) -> np.ndarray:
    """[0, 1] gray or RGB pixels as the 8-bit 3-channel BGR image the models take."""
    a = np.clip(np.asarray(pixels, dtype=np.float64), 0.0, 1.0)
    u8 = np.round(a * 255).astype(np.uint8)
    if u8.ndim == 2:
        return np.ascontiguousarray(np.repeat(u8[..., None], 3, axis=2))
    return np.ascontiguousarray(u8[..., :3][..., ::-1])


class TextReader:
    """rapidocr with the bundled models, loaded once; thread-safe calls (one at a time)."""

    def __init__(self, threads: int | None = None, box_thresh: float = 0.5):
        try:
            from rapidocr import RapidOCR
        except ImportError as exc:
            raise OcrUnavailable(f"rapidocr cannot be imported ({exc}); {INSTALL_FIX}") from None
        m = bundled_models()
        n = threads if threads is not None else min(2, os.cpu_count() or 1)
        params = {
            "Global.log_level": "error",
            "Global.use_cls": False,  # burned-in text is upright; the angle classifier only costs time
            "Global.model_root_dir": str(m["det"].parent),
            "Det.model_path": str(m["det"]),
            # The frame is scaled here (`scale_for`); rapidocr only rounds it to multiples of 32.
            "Det.limit_type": "max",
            "Det.limit_side_len": 4 * MAX_SIDE,
            "Det.box_thresh": box_thresh,
            "Rec.model_path": str(m["rec"]),  # the ONNX file carries its own character list
            "EngineConfig.onnxruntime.intra_op_num_threads": n,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
        self.engine = RapidOCR(params=params)
        self._lock = threading.Lock()
        # Results by frame content: a rebuild (or a test session building one archive
        # several times) reads each distinct frame once. Bounded; regions are small.
        self._memo: dict[tuple[bytes, bool], list[TextRegion]] = {}

    def _run(self, pixels: np.ndarray, rec: bool) -> list[TextRegion]:
        img = to_bgr8(pixels)
        key = (hashlib.sha256(img.tobytes() + repr(img.shape).encode()).digest(), rec)
        if key not in self._memo:
            if len(self._memo) >= 4096:
                self._memo.clear()
            self._memo[key] = self._infer(img, rec)
        return list(self._memo[key])

    def _infer(self, img: np.ndarray, rec: bool) -> list[TextRegion]:
        h, w = img.shape[:2]
        f = scale_for(h, w)
        if f != 1.0:
            from PIL import Image

            size = (max(1, round(w * f)), max(1, round(h * f)))
            img = np.asarray(Image.fromarray(img).resize(size, Image.Resampling.BICUBIC))
        with self._lock:
            res = self.engine(img, use_det=True, use_cls=False, use_rec=rec)
        quads = getattr(res, "boxes", None)
        if quads is None or len(quads) == 0:
            return []
        scores = list(getattr(res, "scores", None) or [1.0] * len(quads))
        texts = list(getattr(res, "txts", None) or [""] * len(quads)) if rec else [""] * len(quads)
        out = []
        for q, s, t in zip(np.asarray(quads, dtype=np.float64).reshape(-1, 4, 2) / f, scores, texts, strict=False):
            x0, y0 = int(np.floor(max(0.0, q[:, 0].min()))), int(np.floor(max(0.0, q[:, 1].min())))
            x1, y1 = int(np.ceil(min(float(w), q[:, 0].max() + 1))), int(np.ceil(min(float(h), q[:, 1].max() + 1)))
            if x0 < x1 and y0 < y1:
                out.append(TextRegion((x0, y0, x1, y1), float(s), str(t)))
        return out

    def detect(self, pixels: np.ndarray) -> list[TextRegion]:
        """The text regions of a frame (detection only)."""
        return self._run(pixels, rec=False)

    def read(self, pixels: np.ndarray) -> list[TextRegion]:
        """The text regions of a frame with the text recognised in each."""
        return self._run(pixels, rec=True)


def highpass(pixels: np.ndarray) -> np.ndarray:
    """The frame's local contrast: itself minus a blur of it (sigma 1/96 of its side), stretched around mid-gray.

    Large smooth structures (a body outline, a bright organ) flatten out and thin strokes
    stand out, so low-contrast text over anatomy, and text the detector would merge into
    a body-sized blob, come back as lines of their own.
    """
    from scipy import ndimage

    a = np.asarray(pixels, dtype=np.float64)
    gray = a.mean(axis=2) if a.ndim == 3 else a
    d = gray - ndimage.gaussian_filter(gray, max(2.0, max(gray.shape) / 96))
    return np.clip(0.5 + d / (8 * float(d.std()) + 1e-9), 0.0, 1.0)


def scale_for(h: int, w: int) -> float:
    """The factor a frame of h x w pixels is resized by before detection."""
    long = max(h, w)
    if long <= 0:
        return 1.0
    if long < DET_SIDE:
        return min(MAX_UPSCALE, DET_SIDE / long)
    return min(1.0, MAX_SIDE / long)


@functools.lru_cache(maxsize=1)
def _shared() -> TextReader:
    return TextReader()


def shared_reader() -> TextReader:
    """One reader per process (loading the models takes about a second)."""
    return _shared()
