"""Text in pixels, found by a real OCR model that runs offline.

The model is PP-OCR (PaddleOCR's detector and recogniser, Apache-2.0) as ONNX files
shipped inside the `rapidocr` wheel, run by `onnxruntime` on the CPU. rapidocr's own
configuration names download URLs for its models; here every model path points at the
file inside the installed wheel, so nothing is ever fetched: a missing file is an error
that says how to install it (`pip install 'medrcube[ocr]'`), never a download.

- `TextReader.detect_native(pixels)` finds text regions in an image as it is given (no
  resizing): `multiscale` reads a frame as a pyramid of such views, which is what
  `medrcube build` masks (or refuses) on every exported frame;
- `TextReader.recognise(pixels)` reads the text of one cropped line: what the final
  pixel leak scan, the tests and the benchmark use to check that nothing legible is left.

Frames are [0, 1] display values (gray H x W or RGB H x W x 3), as the readers yield them.
"""

from __future__ import annotations

import functools
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
# One ONNX thread by default: on a shared 2-core machine a second thread costs more CPU
# time than it saves wall time (measured: docs/construction.md); MEDRCUBE_OCR_THREADS sets it.
DEFAULT_THREADS = 1


class OcrUnavailable(RuntimeError):
    """The OCR model cannot be loaded; the message names what is missing and the fix."""


@dataclass(frozen=True, slots=True)
class TextRegion:
    """A detected line of text: its box (x0, y0, x1, y1, end-exclusive, frame pixels) and
    the detector's score; `text` only from `TextReader.read` (never written to a manifest)."""

    box: tuple[int, int, int, int]
    score: float
    text: str = ""
    # The detector's quadrilateral of the line (4 corners, frame pixels; empty when not known):
    # a line that runs off the row is masked and read along it (`oriented`).
    quad: tuple[tuple[float, float], ...] = ()


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
    """[0, 1] gray or RGB pixels (or 8-bit gray) as the 8-bit 3-channel BGR image the models take."""
    a = np.asarray(pixels)
    if a.dtype == np.uint8 and a.ndim == 2:
        return np.ascontiguousarray(np.broadcast_to(a[..., None], (*a.shape, 3)))
    u8 = np.clip(a * 255.0 + 0.5, 0, 255).astype(np.uint8)
    if u8.ndim == 2:
        return np.ascontiguousarray(np.broadcast_to(u8[..., None], (*u8.shape, 3)))
    return np.ascontiguousarray(u8[..., :3][..., ::-1])


# The recogniser reads lines 48 pixels high; a taller crop is reduced first (the same read, far less to convert).
REC_HEIGHT = 48
# The engine reduces an image whose longest side passes REC_MAX_SIDE px (rapidocr's max_side_len) to that side, its height
# rounded to a multiple of 32: a row more than about 125 times as long as high comes out 0 px high and the engine raises
# (a stack of 8 px letters down a 1,024 px frame cut into cells 4 px high and laid out as a row, `oriented.unstacked`, 4 x
# 3,800 px: tuning seed 19024, 2026-12-07, session 29). Such a row is read in pieces REC_PIECE times as long as high, each
# a letter longer than the step (the engine reads them unreduced), their texts joined.
REC_MAX_SIDE = 2000
REC_PIECE = 40


def _env_threads() -> int:
    raw = os.environ.get("MEDRCUBE_OCR_THREADS", "").strip()
    if not raw:
        return DEFAULT_THREADS
    if not raw.isdigit() or int(raw) < 1:
        raise OcrUnavailable(f"MEDRCUBE_OCR_THREADS is {raw!r}; give a whole number of threads >= 1 (or unset it: 1 thread)")
    return int(raw)


class TextReader:
    """rapidocr with the bundled models, loaded once; thread-safe calls (one at a time)."""

    def __init__(self, threads: int | None = None, box_thresh: float = 0.5):
        try:
            from rapidocr import RapidOCR
        except ImportError as exc:
            raise OcrUnavailable(f"rapidocr cannot be imported ({exc}); {INSTALL_FIX}") from None
        m = bundled_models()
        self.threads = threads if threads is not None else _env_threads()
        params = {
            "Global.log_level": "error",
            "Global.use_cls": False,  # burned-in text is upright; the angle classifier only costs time
            "Global.model_root_dir": str(m["det"].parent),
            "Det.model_path": str(m["det"]),
            # Views are scaled by `multiscale`; rapidocr only rounds them to multiples of 32.
            "Det.limit_type": "max",
            "Det.limit_side_len": 8192,
            "Det.box_thresh": box_thresh,
            "Rec.model_path": str(m["rec"]),  # the ONNX file carries its own character list
            "EngineConfig.onnxruntime.intra_op_num_threads": self.threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
        self.engine = RapidOCR(params=params)
        self._lock = threading.Lock()
        # Regions by frame content (`multiscale.detect`): a rebuild (or a test session
        # building one archive several times) reads each distinct frame once. Bounded.
        self._memo: dict[bytes, list[TextRegion]] = {}

    def memo_get(self, key: bytes) -> list[TextRegion] | None:
        got = self._memo.get(key)
        return None if got is None else list(got)

    def memo_put(self, key: bytes, regions: list[TextRegion]) -> None:
        if len(self._memo) >= 4096:
            self._memo.clear()
        self._memo[key] = list(regions)

    def clear_memo(self) -> None:
        self._memo.clear()

    def detect_quads(self, pixels: np.ndarray) -> list[tuple[np.ndarray, float]]:
        """(quad, score) of every text region the detector finds in the image as given: the quad is the
        detector's own 4 x 2 corners (its pixels), along the line whatever its angle."""
        img = to_bgr8(pixels)
        with self._lock:
            res = self.engine(img, use_det=True, use_cls=False, use_rec=False)
        quads = getattr(res, "boxes", None)
        if quads is None or len(quads) == 0:
            return []
        scores = list(getattr(res, "scores", None) or [1.0] * len(quads))
        return [(q, float(s)) for q, s in zip(np.asarray(quads, dtype=np.float64).reshape(-1, 4, 2), scores, strict=False)]

    def detect_native(self, pixels: np.ndarray) -> list[tuple[tuple[int, int, int, int], float]]:
        """(box, score) of every text region the detector finds in the image as given (boxes in its pixels)."""
        h, w = np.asarray(pixels).shape[:2]
        out = []
        for q, s in self.detect_quads(pixels):
            x0, y0 = int(np.floor(max(0.0, q[:, 0].min()))), int(np.floor(max(0.0, q[:, 1].min())))
            x1, y1 = int(np.ceil(min(float(w), q[:, 0].max() + 1))), int(np.ceil(min(float(h), q[:, 1].max() + 1)))
            if x0 < x1 and y0 < y1:
                out.append(((x0, y0, x1, y1), s))
        return out

    def recognise(self, pixels: np.ndarray) -> str:
        """The recogniser alone (no detector) on one cropped line: the text it reads there."""
        return self.recognise_scored(pixels)[0]

    def recognise_scored(self, pixels: np.ndarray) -> tuple[str, float]:
        """The recogniser's text of one cropped line and its confidence (the lowest of its pieces; 0 for none)."""
        a = np.asarray(pixels)
        if a.size == 0 or a.shape[0] < 2 or a.shape[1] < 2 or float(a.std()) == 0.0:
            return "", 0.0
        if a.shape[0] > 4 * REC_HEIGHT:  # a tall crop is thinned first: converting all of it would cost more than reading it
            k = a.shape[0] // (2 * REC_HEIGHT)
            a = a[::k, ::k]
        img = to_bgr8(a)
        if img.shape[0] > 2 * REC_HEIGHT:
            from PIL import Image

            f = REC_HEIGHT / img.shape[0]
            img = np.asarray(Image.fromarray(img).resize((max(1, round(img.shape[1] * f)), REC_HEIGHT), Image.Resampling.BOX))
        h, w = img.shape[:2]
        if w > REC_MAX_SIDE and round(int(h * REC_MAX_SIDE / w) / 32) == 0:  # the engine would size it to 0 px high
            step = REC_PIECE * h
            pieces = [self._recognised(img[:, x : x + step + h]) for x in range(0, w - h, step)]  # a letter's overlap
            read = [(t, s) for t, s in pieces if t]
            return " ".join(t for t, _ in read), (min(s for _, s in read) if read else 0.0)
        return self._recognised(img)

    def _recognised(self, img: np.ndarray) -> tuple[str, float]:
        with self._lock:
            res = self.engine(img, use_det=False, use_cls=False, use_rec=True)
        texts = [str(t) for t in (getattr(res, "txts", None) or ())]
        scores = [float(x) for x in (getattr(res, "scores", None) or ())]
        return " ".join(texts), (min(scores) if scores and texts else 0.0)


@functools.lru_cache(maxsize=1)
def _shared() -> TextReader:
    return TextReader()


def shared_reader() -> TextReader:
    """One reader per process (loading the models takes about a second)."""
    return _shared()
