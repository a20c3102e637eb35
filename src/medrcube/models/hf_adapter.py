"""`hf:PATH_OR_ID`: in-process inference with transformers.

Any model that `AutoProcessor` + `AutoModelForImageTextToText` load and whose processor
has a chat template. Prompts go through the processor's chat template (image parts, then
the prompt text), batches are left-padded so that generation appends on the right, and
decoding is greedy unless the parameters say otherwise.

Weights load from safetensors only (`use_safetensors=True`): a PyTorch `.bin`/`.pt`
checkpoint is a pickle, and unpickling one from an untrusted directory can run arbitrary
code. A directory with only such weights is refused with the way to convert it.

Generation runs in a worker thread (`asyncio.to_thread`): the event loop keeps serving
the response store and the progress bar while the model computes. Any failure inside a
batch becomes an error Response for that batch (never an exception out of `generate`);
an unreadable image fails only its own request. On a CUDA out-of-memory error the batch
is split in half and retried, so a too-large batch_size degrades instead of failing.

This module imports torch and transformers at import time; the registry imports it
only when an `hf:` model is chosen.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import io
import json
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

from medrcube.models.base import AdapterBase, ErrorKind, Request, Response
from medrcube.models.confidence import OptionConfidence, from_letter_masses
from medrcube.models.models_file import ModelSpecError

DEFAULT_PARAMS: dict[str, Any] = {"max_new_tokens": 64, "do_sample": False}
DEFAULT_BATCH_SIZE = 8
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Pickled PyTorch checkpoints, which are never loaded (module docstring).
_PICKLE_WEIGHTS = (".bin", ".pt", ".pth")
# Samples taken from each weight file for the fingerprint (see _weights_digest).
_WEIGHT_SAMPLES = 64
_SAMPLE_BYTES = 16 * 1024


class HFAdapter(AdapterBase):
    """A transformers vision-language model loaded with `from_pretrained`.

    `params` are generation parameters (a value of None removes a default); OpenAI-style
    names are understood too (`max_tokens`, `max_completion_tokens`, `temperature`), so
    one runner configuration serves both providers. `device` is "auto" (CUDA when
    present, else CPU; every GPU via device_map="auto" when there are several), "cpu",
    "cuda", "cuda:N" or "mps". `dtype` "auto" means bfloat16 on CUDA, float32 elsewhere.
    """

    def __init__(
        self,
        model: str,
        *,
        spec: str | None = None,
        concurrency: int | None = None,
        params: Mapping[str, Any] | None = None,
        batch_size: int | None = None,
        dtype: str | None = None,
        device: str | None = None,
        image_max_side: int | None = None,
    ):
        self.model_id = model
        self.spec = spec or f"hf:{model}"
        merged = {**DEFAULT_PARAMS, **dict(params or {})}
        # batch_size may sit among params (models.yaml `params: {batch_size: 4}`); it is
        # the adapter's, not generate()'s.
        param_batch = merged.pop("batch_size", None)
        self.params = {k: v for k, v in merged.items() if v is not None}
        self.batch_size = int(batch_size or param_batch or DEFAULT_BATCH_SIZE)
        # One model, one device: batches run one at a time unless told otherwise.
        self.concurrency = concurrency or 1
        self.image_max_side = image_max_side
        self._gate = threading.BoundedSemaphore(self.concurrency)
        self._letter_ids: dict[int, list[list[int]]] = {}  # option count -> letter token ids

        self.device, device_map = _choose_device(device)
        self.dtype = _choose_dtype(dtype, self.device)
        self.processor, self.network = self._load(device_map)
        self.fingerprint = self._fingerprint()

    # -- loading -----------------------------------------------------------------------

    def _load(self, device_map: str | None) -> tuple[Any, Any]:
        source = self.model_id
        local = Path(source).expanduser()
        looks_like_path = source.startswith((".", "/", "~")) or local.exists() or "\\" in source
        if looks_like_path and not local.is_dir():
            raise ModelSpecError(
                f"hf model directory {source!r} not found: pass a directory written by save_pretrained "
                "(config.json, weights, processor and tokenizer files)"
            )
        where = str(local) if local.is_dir() else source
        if local.is_dir():
            _require_safetensors(local, source)
        try:
            processor = AutoProcessor.from_pretrained(where)
            model = AutoModelForImageTextToText.from_pretrained(
                where, dtype=self.dtype, device_map=device_map, use_safetensors=True
            )
        except (OSError, ValueError, KeyError) as e:
            if local.is_dir():
                hint = "the directory must hold a model saved with save_pretrained"
            elif "safetensors" in str(e):
                hint = f"medrcube loads safetensors weights only, never a pickled .bin checkpoint. {_CONVERT}"
            else:
                hint = (
                    "a hub id loads only where a Hugging Face hub (or its local cache) is reachable; "
                    "offline, download the model elsewhere and pass its local directory"
                )
            raise ModelSpecError(f"cannot load hf model {source!r}: {hint} ({type(e).__name__}: {_first_line(e)})") from e
        if not getattr(processor, "chat_template", None):
            raise ModelSpecError(
                f"hf model {source!r}: its processor has no chat template, so prompts cannot be formatted; "
                "use a chat/instruct checkpoint or add chat_template.jinja to the directory"
            )
        tokenizer = getattr(processor, "tokenizer", None)
        if tokenizer is None:
            raise ModelSpecError(f"hf model {source!r}: the processor has no tokenizer")
        # Left padding: generation appends after the last position of every row.
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        if device_map is None:
            # transformers declares `to` through functools.wraps(nn.Module.to), which mypy does not
            # bind to the instance (it takes the device for `self`): the call is right, the stub is not.
            model = model.to(self.device)  # type: ignore[arg-type]
        model.eval()
        return processor, model

    def _fingerprint(self) -> str:
        """hf:<id> + a hash of the config, chat template, weights' identity, dtype and params.

        The config alone does not identify a checkpoint (a fine-tune keeps it), so local
        weight files contribute their names, sizes and sampled bytes; a hub model
        contributes its commit hash when transformers reports one.
        """
        # Private keys (_name_or_path, _commit_hash...) and the library version describe
        # where and how the config was read, not the model.
        config = {k: v for k, v in self.network.config.to_dict().items() if not k.startswith("_")}
        config.pop("transformers_version", None)
        h = hashlib.sha256()
        h.update(json.dumps(config, sort_keys=True, default=str).encode())
        # The chat template turns the same prompt into different model input.
        h.update(str(getattr(self.processor, "chat_template", "")).encode())
        h.update(json.dumps(self.params, sort_keys=True, default=str).encode())
        h.update(str(self.dtype).encode())
        local = Path(self.model_id).expanduser()
        if local.is_dir():
            h.update(_weights_digest(local).encode())
        else:
            h.update(str(getattr(self.network.config, "_commit_hash", "") or "").encode())
        return f"hf:{self.model_id}:{h.hexdigest()[:16]}"

    # -- generation --------------------------------------------------------------------

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        out: list[Response] = []
        for start in range(0, len(requests), self.batch_size):
            chunk = list(requests[start : start + self.batch_size])
            try:
                out.extend(await asyncio.to_thread(self._run_batch, chunk))
            except Exception as e:  # noqa: BLE001 - a batch failure is data, not a crash
                out.extend(_error(f"hf generation failed: {type(e).__name__}: {_first_line(e)}") for _ in chunk)
        return out

    def _run_batch(self, requests: list[Request]) -> list[Response]:
        """Decode images, then generate by groups of identical params (runs in a thread)."""
        results: dict[int, Response] = {}
        images: dict[int, list[Image.Image]] = {}
        for i, r in enumerate(requests):
            try:
                images[i] = [self._decode(img.read()) for img in r.images]
            except Exception as e:  # noqa: BLE001 - one bad image fails one request
                results[i] = _error(f"cannot read the image of item {r.item_id}: {type(e).__name__}: {_first_line(e)}")
        groups: dict[str, list[int]] = {}
        for i in images:
            groups.setdefault(json.dumps(dict(requests[i].params), sort_keys=True, default=str), []).append(i)
        with self._gate:
            for idx in groups.values():
                gen = _generation_kwargs({**self.params, **dict(requests[idx[0]].params)})
                for i, resp in zip(idx, self._generate_split(idx, requests, images, gen), strict=True):
                    results[i] = resp
        return [results[i] for i in range(len(requests))]

    def _generate_split(
        self, idx: list[int], requests: list[Request], images: dict[int, list[Image.Image]], gen: dict[str, Any]
    ) -> list[Response]:
        try:
            return self._generate(idx, requests, images, gen)
        except torch.cuda.OutOfMemoryError:
            if len(idx) == 1:
                return [_error("hf generation ran out of GPU memory for a single request; lower image_max_side or use a smaller dtype")]
            gc.collect()
            torch.cuda.empty_cache()
            half = len(idx) // 2
            return self._generate_split(idx[:half], requests, images, gen) + self._generate_split(
                idx[half:], requests, images, gen
            )
        except Exception as e:  # noqa: BLE001
            return [_error(f"hf generation failed: {type(e).__name__}: {_first_line(e)}") for _ in idx]

    def _generate(
        self, idx: list[int], requests: list[Request], images: dict[int, list[Image.Image]], gen: dict[str, Any]
    ) -> list[Response]:
        t0 = time.perf_counter()
        # `option_scores: false` in the params turns the option scoring off (it keeps every
        # step's logits while generating: max_new_tokens x batch x vocabulary values).
        gen = dict(gen)
        score = bool(gen.pop("option_scores", True))
        texts, flat = [], []
        for i in idx:
            content: list[dict[str, Any]] = [{"type": "image"} for _ in images[i]]
            content.append({"type": "text", "text": requests[i].prompt})
            messages = [{"role": "user", "content": content}]
            texts.append(self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
            flat.extend(images[i])
        inputs = self.processor(text=texts, images=flat or None, padding=True, return_tensors="pt")
        inputs = inputs.to(self.network.device)
        if "pixel_values" in inputs and inputs["pixel_values"].is_floating_point():
            inputs["pixel_values"] = inputs["pixel_values"].to(self.network.dtype)
        with torch.inference_mode():
            # The raw logits of the first step are the option scores (models/confidence.py): the same
            # forward pass that starts the answer, no second one. (transformers keeps every
            # step's logits while generating; they are dropped as soon as this batch is read.)
            scored = dict(output_logits=True, return_dict_in_generate=True) if score else {}
            output = self.network.generate(**inputs, **gen, **scored)
        first_logits = output.logits[0] if score and output.logits else None
        output = output.sequences if score else output
        prompt_len = inputs["input_ids"].shape[1]
        new_tokens = output[:, prompt_len:]
        decoded = self.processor.batch_decode(new_tokens, skip_special_tokens=True)
        latency = time.perf_counter() - t0
        pad = self.processor.tokenizer.pad_token_id
        mask = inputs.get("attention_mask")
        limit = gen.get("max_new_tokens", getattr(self.network.generation_config, "max_new_tokens", None))
        stops = self._stop_ids() | ({pad} if pad is not None else set())
        out = []
        for row, text in enumerate(decoded):
            completion = int((new_tokens[row] != pad).sum()) if pad is not None else int(new_tokens.shape[1])
            prompt = int(mask[row].sum()) if mask is not None else prompt_len
            conf = None
            if first_logits is not None:
                conf = self.option_confidence(first_logits[row], len(requests[idx[row]].options))
            out.append(
                Response(
                    text=text.strip(),
                    latency_s=latency,  # the batch's wall time: what each request waited
                    usage={"prompt_tokens": prompt, "completion_tokens": completion},
                    confidence=conf,
                    # Cut at max_new_tokens, as an API's finish_reason "length": never graded.
                    truncated=_cut_at_limit(new_tokens[row].tolist(), limit, stops),
                )
            )
        return out

    def _stop_ids(self) -> set[int]:
        """The tokens that end an answer: the generation config's EOS ids and the tokenizer's."""
        ids = getattr(self.network.generation_config, "eos_token_id", None)
        found = set(ids if isinstance(ids, (list, tuple)) else [ids] if ids is not None else [])
        if self.processor.tokenizer.eos_token_id is not None:
            found.add(self.processor.tokenizer.eos_token_id)
        return {int(i) for i in found}

    def letter_token_ids(self, n_options: int) -> list[list[int]]:
        """Per option letter, the token ids that spell it alone ("A" and " A"), for scoring."""
        cache = self._letter_ids
        if n_options not in cache:
            tok = self.processor.tokenizer
            ids: list[list[int]] = []
            for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:n_options]:
                spelled = {t[0] for t in (tok.encode(s, add_special_tokens=False) for s in (letter, " " + letter))
                           if len(t) == 1}
                ids.append(sorted(spelled))
            cache[n_options] = ids
        return cache[n_options]

    def option_confidence(self, logits: Any, n_options: int) -> OptionConfidence | None:
        """Per-option probabilities from next-token logits: each letter's softmax mass over
        the whole vocabulary, normalised over the options (models/confidence.py)."""
        if n_options < 1:
            return None
        probs = torch.softmax(logits.float(), dim=-1)
        masses = [float(probs[ids].sum()) if ids else 0.0 for ids in self.letter_token_ids(n_options)]
        return from_letter_masses(masses)

    def _decode(self, data: bytes) -> Image.Image:
        img: Image.Image = Image.open(io.BytesIO(data))  # any image from here on (converted below)
        img.load()
        img = img.convert("RGB")
        if self.image_max_side and max(img.size) > self.image_max_side:
            img.thumbnail((self.image_max_side, self.image_max_side), Image.Resampling.LANCZOS)
        return img

    async def aclose(self) -> None:
        # Drop the weights now rather than at interpreter exit: a sweep loads models in turn.
        self.network = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


_CONVERT = (
    "Convert it once, on a machine and from a source you trust: "
    "`AutoModelForImageTextToText.from_pretrained(SRC).save_pretrained(DEST)` and "
    "`AutoProcessor.from_pretrained(SRC).save_pretrained(DEST)` (save_pretrained writes "
    "model.safetensors), then pass DEST"
)


def _require_safetensors(directory: Path, source: str) -> None:
    """Refuse a model directory whose weights are only pickled checkpoints (.bin, .pt,
    .pth): `use_safetensors=True` would fail on it with a bare "no file named
    model.safetensors", and loading them at all would mean unpickling untrusted data."""
    names = [f.name for f in directory.iterdir() if f.is_file()]
    if any(n.endswith((".safetensors", ".safetensors.index.json")) for n in names):
        return
    pickled = sorted(n for n in names if n.endswith(_PICKLE_WEIGHTS))
    if pickled:
        raise ModelSpecError(
            f"hf model {source!r}: its weights are only PyTorch pickle files ({', '.join(pickled[:3])}); "
            f"medrcube loads safetensors only, since unpickling a checkpoint can run arbitrary code. {_CONVERT}"
        )


def _choose_device(device: str | None) -> tuple[str, str | None]:
    """(device for inputs, device_map for from_pretrained)."""
    if device in (None, "auto"):
        if torch.cuda.is_available():
            if torch.cuda.device_count() > 1:
                return "cuda", "auto"  # spread layers over every GPU of this machine
            return "cuda", None
        return "cpu", None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelSpecError(f"device {device!r} was asked for but torch sees no CUDA device (a CPU build of torch?)")
    return device, None


def _choose_dtype(dtype: str | None, device: str) -> torch.dtype:
    if dtype in (None, "auto"):
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if dtype not in _DTYPES:
        raise ModelSpecError(f"dtype {dtype!r} is not one of auto, {', '.join(_DTYPES)}")
    return _DTYPES[dtype]


def _cut_at_limit(tokens: Sequence[int], limit: int | None, stops: set[int]) -> bool:
    """True when a generated row reached the token limit without a stop token: the
    answer was cut, as an API's finish_reason "length" says."""
    if not limit or len(tokens) < limit:
        return False
    return not any(t in stops for t in tokens[:limit])


def _generation_kwargs(params: Mapping[str, Any]) -> dict[str, Any]:
    """transformers generate() kwargs from params that may use OpenAI names."""
    gen = {k: v for k, v in params.items() if v is not None}
    for alias in ("max_completion_tokens", "max_tokens"):
        if alias in gen:
            gen["max_new_tokens"] = gen.pop(alias)
    if "temperature" in gen:
        t = gen["temperature"]
        if not t:  # 0 means greedy; transformers rejects temperature=0 with sampling
            gen.pop("temperature")
            gen["do_sample"] = False
        else:
            gen["do_sample"] = True
    if "seed" in gen:  # reproducibility of sampling is the caller's torch seed, not a kwarg
        gen.pop("seed")
    if not gen.get("do_sample"):
        for k in ("temperature", "top_p", "top_k"):  # meaningless when greedy, and warned about
            gen.pop(k, None)
    return gen


def _weights_digest(directory: Path) -> str:
    """Names, sizes and evenly spaced byte samples of the weight files: cheap (about 1 MB
    read per file) yet different for any fine-tune that touches more than a sliver."""
    h = hashlib.sha256()
    for f in sorted(directory.iterdir()):
        if f.suffix not in (".safetensors", ".bin", ".pt", ".pth", ".gguf") or not f.is_file():
            continue
        size = f.stat().st_size
        h.update(f"{f.name}\0{size}\0".encode())
        with f.open("rb") as fh:
            for k in range(_WEIGHT_SAMPLES):
                fh.seek(size * k // _WEIGHT_SAMPLES)
                h.update(fh.read(_SAMPLE_BYTES))
    return h.hexdigest()


def _error(message: str) -> Response:
    return Response(text=None, error=message, error_kind=ErrorKind.INTERNAL)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
