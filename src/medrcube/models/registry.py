"""Spec string -> ModelAdapter.

The grammar is `SPEC_FORMS` below (first match wins), written once: the `--model` help
of the pytest plugin and of `medrcube run`, and every error here, read it from there.

Provider modules are imported inside their branch: choosing `random` must not pay for
the openai client, and nothing but `hf:` may import torch. The SDK of a native adapter
(`anthropic:`, `gemini:`) is an optional extra: a spec naming it without the SDK
installed is a ModelSpecError with the install hint.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import importlib.util
import itertools
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medrcube.models.base import ModelAdapter, Preflight, Request, Response
from medrcube.models.models_file import (
    ModelEntry,
    ModelsFileError,
    ModelSpecError,
    default_models_file,
    load_models_file,
)
from medrcube.models.urls import credential_parts, endpoint_identity, refusal_hint
from medrcube.taxonomy import did_you_mean

if TYPE_CHECKING:
    from medrcube.cube.item import Cube
    from medrcube.models.openai_adapter import OpenAIAdapter

__all__ = ["PROVIDERS", "SPEC_FORMS", "ModelSpecError", "ModelsFileError", "load_adapter", "spec_help",
           "RoundRobinAdapter"]

# (form, meaning): the model-spec grammar, in the order the forms are tried.
SPEC_FORMS: tuple[tuple[str, str], ...] = (
    ("random[:SEED]", "uniform over the item's own options (baselines.py)"),
    ("prior", "text-only answer prior, leave-one-out (needs the cube)"),
    ("simulate:accuracy=P[,icc=R,seed=S,grounded=true]",
     "a SIMULATED model of known accuracy and image correlation (simulate.py)"),
    ("replay:FILE", "recorded responses: JSON Lines or a reference results.json"),
    ("openai:NAME[@BASE_URL]", "an OpenAI-compatible chat completions endpoint (OPENAI_API_KEY)"),
    ("anthropic:NAME[@BASE_URL]", "Anthropic's Messages API (ANTHROPIC_API_KEY; pip install 'medrcube[anthropic]')"),
    ("gemini:NAME[@BASE_URL]", "Google's Gemini API (GEMINI_API_KEY; pip install 'medrcube[gemini]')"),
    ("hf:PATH_OR_ID", "an in-process transformers model (pip install 'medrcube[hf]')"),
    ("vllm:PATH[@BASE_URL]", "a vLLM engine the gate starts on a checkpoint and stops after the run, or one "
                             "already running at BASE_URL (vLLM in its own environment: scripts/setup-vllm)"),
    ("NAME", "an entry of models.yaml (./models.yaml or --models-file), else openai:NAME with the "
             "OPENAI_API_KEY / OPENAI_BASE_URL environment"),
)
PROVIDERS: tuple[str, ...] = ("random", "prior", "simulate", "replay", "openai", "anthropic", "gemini", "hf", "vllm")
# The HTTP API providers: provider -> (the SDK's import name, what to pip install for it).
API_PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("openai", "openai"),
    "anthropic": ("anthropic", "medrcube[anthropic]"),
    "gemini": ("google.genai", "medrcube[gemini]"),
}


def spec_help() -> str:
    """The grammar on one line, for option help and error messages."""
    return ", ".join(form for form, _ in SPEC_FORMS[:-1]) + ", or a name from models.yaml"

HF_INSTALL_HINT = (
    "the hf: provider needs torch and transformers: pip install 'medrcube[hf]' "
    "(on a machine without a GPU, install the CPU build of torch first: "
    "pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)


def load_adapter(
    spec: str,
    *,
    cube: Cube | None = None,
    models_file: str | os.PathLike[str] | None = None,
    concurrency: int | None = None,
) -> ModelAdapter:
    """Build the adapter a spec string names (grammar in the module docstring).

    `cube` is needed by `prior` only. `models_file` overrides `./models.yaml`.
    `concurrency` overrides the adapter's (or the models.yaml entry's) concurrency.
    Raises ModelSpecError (ModelsFileError for a bad models.yaml) with the fix in the message.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ModelSpecError(f"empty model spec; use one of: {spec_help()}")
    spec = spec.strip()
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1):
        raise ModelSpecError(f"concurrency must be a positive integer, got {concurrency!r}")

    prefix, sep, rest = spec.partition(":")
    if not sep:
        if spec == "random":
            return _random("0", spec, concurrency)
        if spec == "prior":
            return _prior(cube, concurrency)
        if spec in ("replay", "hf", "vllm", *API_PROVIDERS):
            raise ModelSpecError(f"model spec {spec!r} needs an argument: {spec_help()}")
        return _named(spec, models_file, concurrency)

    if prefix == "random":
        return _random(rest, spec, concurrency)
    if prefix == "prior":
        raise ModelSpecError("the prior baseline takes no argument: write `prior` (it is built from the cube being run)")
    if prefix == "simulate":
        return _simulate(rest, spec, cube, concurrency)
    if prefix == "replay":
        from medrcube.models.replay import ReplayAdapter

        if not rest:
            raise ModelSpecError("replay needs a file: replay:PATH/TO/results.jsonl")
        return ReplayAdapter(rest, concurrency=concurrency)
    if prefix in API_PROVIDERS:
        name, base_url = _split_url(prefix, rest, spec)
        return _api(prefix, name, spec=spec, base_urls=(base_url,) if base_url else (), concurrency=concurrency)
    if prefix == "hf":
        if not rest:
            raise ModelSpecError("hf needs a model directory or hub id: hf:PATH_OR_ID")
        return _hf(rest, spec=spec, concurrency=concurrency)
    if prefix == "vllm":
        if not rest:
            raise ModelSpecError("vllm needs a model directory (or a hub id): vllm:PATH, or vllm:NAME@BASE_URL")
        name, url = _split_url(prefix, rest, spec) if "@" in rest else (rest, None)
        return _vllm(name, spec=spec, url=url, concurrency=concurrency)
    # A bare name never contains ':' by models.yaml's rules, so this is a mistyped
    # provider (or a model id with a colon, which must be spelled openai:NAME).
    raise ModelSpecError(
        f"unknown model provider {prefix!r} in spec {spec!r}{did_you_mean(prefix, PROVIDERS)}; "
        f"providers: {', '.join(PROVIDERS)}. A model id that contains ':' is written openai:{spec}"
    )


def _random(seed: str, spec: str, concurrency: int | None) -> ModelAdapter:
    from medrcube.models.baselines import RandomAdapter

    try:
        value = int(seed)
    except ValueError:
        raise ModelSpecError(f"in model spec {spec!r}: the random seed must be an integer, as in random:42") from None
    return RandomAdapter(value, spec=spec, concurrency=concurrency)


def _simulate(rest: str, spec: str, cube: Cube | None, concurrency: int | None) -> ModelAdapter:
    from medrcube.models.simulate import SimulatedAdapter, SimulationSpecError, parse_simulation

    try:
        params = parse_simulation(rest)
    except SimulationSpecError as e:
        raise ModelSpecError(f"in model spec {spec!r}: {e}") from None
    if cube is None:
        raise ModelSpecError("the simulation answers from the cube's answers; pass cube= to load_adapter")
    return SimulatedAdapter(params, cube, spec=spec, concurrency=concurrency)


def _prior(cube: Cube | None, concurrency: int | None) -> ModelAdapter:
    from medrcube.models.baselines import PriorAdapter

    if cube is None:
        raise ModelSpecError(
            "the prior baseline learns answer priors from the cube being run; "
            "pass cube= to load_adapter (the CLI and the pytest plugin do this for you)"
        )
    return PriorAdapter(cube, concurrency=concurrency)


def _split_url(provider: str, rest: str, spec: str) -> tuple[str, str | None]:
    # The base URL is everything after the first '@' that starts a URL; a model id may
    # itself contain ':' (ollama-style tags), so split on '@' only.
    name, at, url = rest.partition("@")
    if not name:
        raise ModelSpecError(f"in model spec {spec!r}: missing model name, as in {provider}:MODEL_NAME")
    parts = credential_parts(url) if at else []
    if parts:  # checked first: the messages below quote the spec
        raise ModelSpecError(refusal_hint(f"in model spec '{provider}:{name}@...': the base URL", url, parts))
    if at and not (url.startswith("http://") or url.startswith("https://")):
        raise ModelSpecError(
            f"in model spec {spec!r}: the part after '@' must be a base URL such as http://127.0.0.1:8000/v1"
        )
    return name, (url.rstrip("/") if at else None)


def _named(name: str, models_file: str | os.PathLike[str] | None, concurrency: int | None) -> ModelAdapter:
    path = Path(models_file) if models_file is not None else default_models_file()
    if path is not None:
        entries = load_models_file(path)
        if name in entries:
            return adapter_from_entry(entries[name], concurrency=concurrency)
        hint = did_you_mean(name, list(entries))
        if hint:
            # Not an error: a bare name is a valid OpenAI model id. But a near miss of a
            # defined name is usually a typo that would otherwise surface as a 404 later.
            warnings.warn(
                f"model {name!r} is not defined in {path}{hint}; using it as an OpenAI model id "
                "with the OPENAI_API_KEY / OPENAI_BASE_URL environment",
                stacklevel=3,
            )
    # A near miss of a built-in spec (`randm`, `simulte:...` has a ':' and is caught above)
    # is a typo, not an OpenAI model id: said before asking for a key it would not need.
    near = difflib.get_close_matches(name.casefold(), BUILT_IN_NAMES, n=1, cutoff=0.75)
    if near:
        raise ModelSpecError(
            f"model spec {name!r} is neither a built-in model nor an entry of models.yaml: did you mean {near[0]!r}? "
            f"(a bare name is otherwise an OpenAI model id: write openai:{name} to ask an endpoint for it; "
            f"specs: {spec_help()})")
    # Not defined anywhere: the standard OpenAI environment, as the openai SDK itself does.
    return _api("openai", name, spec=name, base_urls=(), concurrency=concurrency)


# The spec words a bare name is checked against for a typo (SPEC_FORMS).
BUILT_IN_NAMES: tuple[str, ...] = ("random", "prior", "simulate", "replay")


def adapter_from_entry(entry: ModelEntry, *, concurrency: int | None = None) -> ModelAdapter:
    """The adapter for a validated models.yaml entry."""
    if entry.provider == "vllm":
        given = {key: getattr(entry, key) for key in ("timeout", "max_retries", "image_max_side", "strict_model",
                                                      "breaker_failures", "breaker_seconds", "transport")}
        if entry.max_response_mib is not None:
            given["max_response_bytes"] = int(entry.max_response_mib * 1024 * 1024)
        return _vllm(entry.model, spec=entry.name, url=entry.base_urls[0] if entry.base_urls else None,
                     concurrency=concurrency or entry.concurrency, executable=entry.executable, args=entry.engine,
                     start_timeout=entry.start_timeout, params=dict(entry.params), price=entry.price,
                     **{k: v for k, v in given.items() if v is not None})
    if entry.provider == "hf":
        return _hf(
            entry.model,
            spec=entry.name,
            concurrency=concurrency or entry.concurrency,
            params=entry.params,
            batch_size=entry.batch_size,
            dtype=entry.dtype,
            device=entry.device,
            image_max_side=entry.image_max_side,
            price=entry.price,
        )
    kwargs: dict[str, Any] = {"params": dict(entry.params), "price": entry.price}
    for key in ("api_key_env", "rpm", "timeout", "max_retries", "image_max_side", "strict_model", "api_key_header",
                "breaker_failures", "breaker_seconds", "retry_after_max", "retry_wait_max", "transport"):
        value = getattr(entry, key)
        if value is not None:
            kwargs[key] = value
    if entry.max_response_mib is not None:
        kwargs["max_response_bytes"] = int(entry.max_response_mib * 1024 * 1024)
    if entry.endpoint_identity is not None:
        kwargs["endpoint_identity"] = entry.endpoint_identity
    elif len(entry.base_urls) > 1:
        # Replicas listed in one entry are one model by the user's own word: one identity
        # for them all (adding a replica changes it; give endpoint_identity to keep it).
        kwargs["endpoint_identity"] = " | ".join(sorted(endpoint_identity(u) for u in entry.base_urls))
    return _api(
        entry.provider,
        entry.model,
        spec=entry.name,
        base_urls=entry.base_urls,
        concurrency=concurrency or entry.concurrency,
        **kwargs,
    )


def _api(
    provider: str, model: str, *, spec: str, base_urls: Sequence[str], concurrency: int | None, **kwargs: Any
) -> ModelAdapter:
    sdk, package = API_PROVIDERS[provider]
    try:
        if importlib.util.find_spec(sdk) is None:
            raise ImportError(f"no module named {sdk!r}")
        adapter_class = _api_class(provider)
    except ImportError as e:  # an optional SDK not installed (or a broken install): say how to get it
        raise ModelSpecError(f"cannot load the {provider} adapter for {spec!r}: {e}; pip install '{package}'") from e

    def build(url: str | None, **kw: Any) -> ModelAdapter:
        try:
            return adapter_class(model, base_url=url, spec=spec, **kw)
        except ValueError as e:  # a missing key variable, a bad limit: the spec cannot be served
            raise ModelSpecError(f"model {spec!r}: {e}") from e

    if len(base_urls) <= 1:
        if concurrency is not None:
            kwargs["concurrency"] = concurrency
        return build(base_urls[0] if base_urls else None, **kwargs)
    # Several servers for one model: one adapter (client, limits) per URL, requests spread
    # round-robin. The total concurrency is split so the whole stays within the bound.
    shares = _split(concurrency, len(base_urls)) if concurrency is not None else [None] * len(base_urls)
    children = []
    for url, share in zip(base_urls, shares, strict=True):
        kw = dict(kwargs)
        if share is not None:
            kw["concurrency"] = share
        children.append(build(url, **kw))
    return RoundRobinAdapter(children, spec=spec)


def _api_class(provider: str) -> type[OpenAIAdapter]:
    """The adapter class of an API provider, imported only when chosen."""
    if provider == "anthropic":
        from medrcube.models.anthropic_adapter import AnthropicAdapter

        return AnthropicAdapter
    if provider == "gemini":
        from medrcube.models.gemini_adapter import GeminiAdapter

        return GeminiAdapter
    from medrcube.models.openai_adapter import OpenAIAdapter

    return OpenAIAdapter


def _vllm(model: str, *, spec: str, url: str | None, concurrency: int | None, **kwargs: Any) -> ModelAdapter:
    """A vLLM engine started on `model` (or attached at `url`): models/vllm_adapter.py."""
    from medrcube.models.vllm_adapter import EngineError, open_vllm

    if concurrency is not None:
        kwargs["concurrency"] = concurrency
    try:
        return open_vllm(model, spec=spec, url=url, **kwargs)
    except EngineError as e:  # vLLM missing, or its engine did not start: the message says why
        raise ModelSpecError(f"model {spec!r}: {e}") from e
    except ValueError as e:  # a bad limit
        raise ModelSpecError(f"model {spec!r}: {e}") from e


def _split(total: int, k: int) -> list[int]:
    base, extra = divmod(total, k)
    return [max(1, base + (1 if i < extra else 0)) for i in range(k)]


def _hf(model: str, *, spec: str, concurrency: int | None, price: Mapping[str, Any] | None = None,
        **kwargs: Any) -> ModelAdapter:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        raise ModelSpecError(f"cannot load {spec!r}: {HF_INSTALL_HINT} ({e})") from e
    from medrcube.models.hf_adapter import HFAdapter

    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    adapter = HFAdapter(model, spec=spec, concurrency=concurrency, **kwargs)
    adapter.price = price  # models.yaml's, for the run's cost
    return adapter


class RoundRobinAdapter:
    """One model served at several base URLs: each request goes to the next server in turn.

    Requests are dealt one by one (not batch by batch), so that even a runner sending one
    request per call spreads evenly. The fingerprint is the children's when they agree
    (the same model answers wherever it is served), so adding a server keeps the cache.
    """

    def __init__(self, children: Sequence[ModelAdapter], *, spec: str):
        if not children:
            raise ModelSpecError(f"{spec!r}: no servers to spread requests over")
        self.children = list(children)
        self.spec = spec
        prints = sorted({c.fingerprint for c in self.children})
        self.fingerprint = (
            prints[0] if len(prints) == 1 else "multi:" + hashlib.sha256("\n".join(prints).encode()).hexdigest()[:16]
        )
        self.batch_size = max(c.batch_size for c in self.children)
        self.concurrency = sum(c.concurrency for c in self.children)
        self._turn = itertools.cycle(range(len(self.children)))
        first = self.children[0]  # one models.yaml entry: one model, price and image size
        self.model, self.price, self.image_max_side = first.model, first.price, first.image_max_side
        self.engine = first.engine
        self.keyed_by_item = any(c.keyed_by_item for c in self.children)
        self.endpoints = tuple(e for c in self.children for e in c.endpoints)

    async def preflight(self) -> Preflight:
        """Every server's pre-flight: the problems of all, the served name of the first that names one."""
        checks = await asyncio.gather(*(c.preflight() for c in self.children))
        problems = [p.problem for p in checks if p.problem]
        served = next((p.served for p in checks if p.served), None)
        self.model = self.children[0].model  # as the first server lists it, when it resolved the name
        return Preflight(problem="\n".join(problems) or None, served=served,
                         resolved=any(p.resolved for p in checks))

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        groups: dict[int, list[int]] = {}
        for i in range(len(requests)):
            groups.setdefault(next(self._turn), []).append(i)
        results = await asyncio.gather(
            *(self.children[c].generate([requests[i] for i in idx]) for c, idx in groups.items())
        )
        # strict: gather gives one result per group, and an adapter one response per request
        # (a child breaking that raises here, and the runner reports it, rather than a hole).
        out: dict[int, Response] = {}
        for idx, responses in zip(groups.values(), results, strict=True):
            for i, r in zip(idx, responses, strict=True):
                out[i] = r
        return [out[i] for i in range(len(requests))]

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self.children))
