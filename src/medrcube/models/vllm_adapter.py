"""`vllm:PATH`: an open-weight checkpoint served by a vLLM engine the gate manages.

`open_vllm` starts `vllm serve` on the checkpoint as a child process (models/vllm_engine.py),
waits until it answers /health and lists the model, and returns a `VLLMAdapter`: the
chat-completions wire vLLM serves (models/openai_wire.py, with the API base's retries,
breaker, bounded bodies and pre-flight) pointed at it, a sibling of the OpenAI adapter.
`vllm:PATH@URL` attaches to a vLLM server already running there instead. A process
started later by the one that started the engine (an xdist worker) attaches to it too.

What the adapter adds to the wire:

- identity: the engine's name and version and every engine argument (`engine`, recorded
  in run.json, gate.json, the seal and the summary), and a digest of the checkpoint's
  files, make the fingerprint: the port changes every start, the answers' key does not;
- greedy decoding (`temperature: 0`) unless models.yaml sets it;
- the image goes before the text in each message, so that the questions of one image,
  asked back to back (run/order.py `image_runs`), share a prompt prefix that the engine's
  prefix cache reuses;
- a crash of the engine opens the breaker at once, and its message quotes the engine's
  exit status and last log lines: the run stops UNDECIDED with the items left unasked,
  and a rerun on the same store asks only those.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from medrcube.models.base import Request
from medrcube.models.openai_wire import ChatCompletionsAdapter
from medrcube.models.provider_errors import Attempt
from medrcube.models.vllm_engine import (
    DEFAULT_MAX_NUM_SEQS,
    Engine,
    EngineArgs,
    EngineError,
    announce,
    attached,
    engine_key,
    find_python,
    installed_version,
    served_version,
)

__all__ = ["EngineError", "VLLMAdapter", "checkpoint_digest", "open_vllm"]

_CHECKPOINT_FILES = (".json", ".jinja", ".model", ".safetensors", ".bin", ".pt", ".pth", ".gguf", ".txt")
_SAMPLES, _SAMPLE_BYTES = 64, 16 * 1024


class VLLMAdapter(ChatCompletionsAdapter):
    """The chat-completions wire (models/openai_wire.py) on a vLLM engine (module docstring)."""

    provider = "vllm"
    default_key_env = "VLLM_API_KEY"  # vLLM's own variable for its --api-key; unset: no key is sent
    base_url_env = "MEDRCUBE_VLLM_URL"
    base_url_hint = "a vLLM server's base URL ends in /v1"

    def __init__(self, model: str, *, base_url: str, engine: Mapping[str, Any],
                 process: Engine | None = None, **kwargs: Any) -> None:
        self.engine: Mapping[str, Any] | None = dict(engine)
        self.process = process  # None when attached to an engine this process did not start
        kwargs.setdefault("endpoint_identity", _identity(engine))
        super().__init__(model, base_url=base_url, **kwargs)

    def _fingerprint(self) -> str:
        # The engine is in the endpoint identity; the image's place in the message changes
        # what the model reads, so it is stated too.
        base = super()._fingerprint()
        digest = hashlib.sha256(f"{base}\0image-first".encode()).hexdigest()[:16]
        return f"vllm:{self.model}:{digest}"

    async def _messages(self, request: Request) -> list[dict[str, Any]]:
        messages = await super()._messages(request)
        content = messages[0]["content"]
        if isinstance(content, list):  # images first, then the text: a prefix shared by one image's questions
            messages[0]["content"] = [p for p in content if p["type"] != "text"] + \
                [p for p in content if p["type"] == "text"]
        return messages

    def _unreachable(self, exc: Exception) -> Attempt:
        attempt = super()._unreachable(exc)
        process = self.process
        if process is not None and not process.alive and process.proc is not None:
            why = process.exit_text()
            self.breaker.trip(why)  # every further request would fail the same way
            return replace(attempt, message=f"{attempt.message}: {why}")
        return attempt


def _identity(engine: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in engine.items() if k not in ("url", "pid", "log")}
    return "vllm " + json.dumps(shown, sort_keys=True, default=str)


def checkpoint_digest(directory: Path) -> str:
    """Names, sizes and sampled bytes of a checkpoint's files (config, tokenizer, chat
    template, weights): a fine-tune that keeps the config still changes it."""
    h = hashlib.sha256()
    for f in sorted(directory.iterdir()):
        if not f.is_file() or f.suffix not in _CHECKPOINT_FILES:
            continue
        size = f.stat().st_size
        h.update(f"{f.name}\0{size}\0".encode())
        with f.open("rb") as fh:
            for k in range(_SAMPLES if size > _SAMPLES * _SAMPLE_BYTES else 1):
                fh.seek(size * k // _SAMPLES)
                h.update(fh.read(_SAMPLE_BYTES if size > _SAMPLES * _SAMPLE_BYTES else size))
    return h.hexdigest()[:16]


def open_vllm(model: str, *, spec: str, url: str | None = None, executable: str | None = None,
              args: EngineArgs | None = None, start_timeout: float | None = None,
              **kwargs: Any) -> VLLMAdapter:
    """The adapter of `vllm:MODEL` (starting its engine) or `vllm:MODEL@URL` (attaching).
    Raises EngineError (vLLM missing, the engine did not start or serves another model)."""
    local = Path(model).expanduser()
    name = str(local.absolute()) if local.is_dir() else model
    checkpoint = checkpoint_digest(local) if local.is_dir() else None
    kwargs.setdefault("strict_model", True)  # the engine serves one model: another name is a fault
    # Greedy unless models.yaml says otherwise: vLLM samples at temperature 1 by default,
    # and a gate's answers must not change from one run to the next.
    kwargs["params"] = {"temperature": 0, **dict(kwargs.get("params") or {})}
    if url is not None:
        engine = {"engine": served_version(url) or "vllm (version not stated)", "managed": False,
                  "checkpoint": checkpoint}
        return VLLMAdapter(name, base_url=url, engine=engine, spec=spec, **kwargs)
    args = EngineArgs(model=name) if args is None else EngineArgs(**{**_fields(args), "model": name})
    if args.max_num_seqs is None:
        # The engine batches at most what one process of the gate sends at once (--concurrency,
        # models.yaml's `concurrency`, else DEFAULT_MAX_NUM_SEQS), and the record says how many:
        # the batch can change answers at temperature 0, and vLLM's own default (128 on a CPU,
        # more on a GPU) would be neither used nor recorded.
        seqs = int(kwargs.get("concurrency") or DEFAULT_MAX_NUM_SEQS)
        args = EngineArgs(**{**_fields(args), "max_num_seqs": seqs})
    python = find_python(executable)
    process = Engine(python, args, installed_version(python) or "vllm")
    if start_timeout is not None:
        process.start_timeout = start_timeout
    # The same record whether this process starts the engine or attaches to the one its
    # parent started (an xdist worker): the fingerprint, and so the stored answers' keys, agree.
    engine_info = {"engine": process.version, "managed": True, "args": args.record(), "checkpoint": checkpoint,
                   "environment": process.environment()}
    kwargs.setdefault("concurrency", args.max_num_seqs)
    there = attached(engine_key(python, args))
    if there is not None:  # started by the process that started this one
        return VLLMAdapter(name, base_url=there["url"], engine=engine_info, spec=spec, **kwargs)
    process.start()
    try:
        process.wait_ready(served_name=name)
        adapter = VLLMAdapter(name, base_url=process.url, engine=engine_info, process=process, spec=spec, **kwargs)
    except BaseException:  # a failed check, Ctrl-C while waiting: no engine is left behind
        process.stop()
        raise
    announce(process)
    return adapter


def _fields(args: EngineArgs) -> dict[str, Any]:
    return {k: getattr(args, k) for k in EngineArgs.__slots__}

