"""What a managed vLLM engine is started with: models.yaml's engine keys read into
`EngineArgs`, each checked (models/vllm_engine.py starts the process with them).

Apart from the process code so that reading models.yaml (which every run does, the
engine or not) does not import what starting a child process and waiting on its HTTP
port needs (subprocess, urllib, signal handling: ~5 ms before the gate's first request).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ENGINE_KEYS", "EngineArgs", "engine_args"]

# models.yaml keys of a `provider: vllm` entry that are engine arguments (the flag is the
# key with dashes); `engine_flags` adds any other flag verbatim.
ENGINE_KEYS: tuple[str, ...] = ("tensor_parallel_size", "data_parallel_size", "max_num_seqs", "max_model_len",
                                "limit_mm_per_prompt", "dtype", "seed", "engine_flags")
_INT_KEYS = ("tensor_parallel_size", "data_parallel_size", "max_num_seqs", "max_model_len")



@dataclass(frozen=True, slots=True)
class EngineArgs:
    """What the engine is started with: the model and the arguments that change answers or
    throughput. All of it is in the model's identity (the seal, the store's key)."""

    model: str
    tensor_parallel_size: int | None = None
    data_parallel_size: int | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    limit_mm_per_prompt: Mapping[str, int] | None = None
    dtype: str | None = None
    seed: int | None = None
    engine_flags: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        """The server's arguments (the port and host are the launcher's)."""
        out = ["--model", self.model]
        for key in (*_INT_KEYS, "dtype", "seed"):
            value = getattr(self, key)
            if value is not None:
                out += [f"--{key.replace('_', '-')}", str(value)]
        if self.limit_mm_per_prompt is not None:
            out += ["--limit-mm-per-prompt", json.dumps(dict(self.limit_mm_per_prompt), sort_keys=True)]
        return out + list(self.engine_flags)

    def record(self) -> dict[str, Any]:
        """The arguments given, JSON-ready (run.json, gate.json, the seal)."""
        out: dict[str, Any] = {"model": self.model}
        for key in (*_INT_KEYS, "dtype", "seed"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.limit_mm_per_prompt is not None:
            out["limit_mm_per_prompt"] = dict(self.limit_mm_per_prompt)
        if self.engine_flags:
            out["engine_flags"] = list(self.engine_flags)
        return out


def engine_args(model: str, raw: Mapping[str, Any], where: str) -> EngineArgs:
    """EngineArgs from models.yaml keys (`raw`), each checked; errors name `where` and the key."""
    kw: dict[str, Any] = {}
    for key in _INT_KEYS:
        v = raw.get(key)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{where}: key {key!r} is {v!r}; expected an integer >= 1, e.g. `{key}: 8`")
            kw[key] = v
    seed = raw.get("seed")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"{where}: key 'seed' is {seed!r}; expected an integer, e.g. `seed: 0`")
        kw["seed"] = seed
    dtype = raw.get("dtype")
    if dtype is not None:
        if dtype not in ("auto", "float32", "float16", "bfloat16"):
            raise ValueError(f"{where}: key 'dtype' is {dtype!r}; choices: auto, float32, float16, bfloat16")
        kw["dtype"] = dtype
    limit = raw.get("limit_mm_per_prompt")
    if limit is not None:
        if not isinstance(limit, Mapping) or not all(
                isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool) and n >= 0
                for k, n in limit.items()):
            raise ValueError(f"{where}: key 'limit_mm_per_prompt' is {limit!r}; expected a mapping of modality to "
                             "a count, e.g. `limit_mm_per_prompt: {image: 1}`")
        kw["limit_mm_per_prompt"] = dict(limit)
    flags = raw.get("engine_flags")
    if flags is not None:
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise ValueError(f"{where}: key 'engine_flags' is {flags!r}; expected a list of command-line words, "
                             "e.g. `engine_flags: [--enforce-eager, --kv-cache-dtype, auto]`")
        if any(f.split("=")[0] in ("--port", "--host", "--model") for f in flags):
            raise ValueError(f"{where}: key 'engine_flags' sets --port, --host or --model, which the gate sets itself")
        kw["engine_flags"] = tuple(flags)
    return EngineArgs(model=model, **kw)
