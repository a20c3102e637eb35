"""The product's own model providers (models/providers.py), named by the entry point
`core` of the group `medrcube.providers` in pyproject.toml, in the order their spec
forms are tried and listed.

Each adapter module is imported inside its provider's `open`: choosing `random` must not
pay for the openai client, and nothing but `hf:` may import torch. The SDK of a native
adapter (`anthropic:`, `gemini:`) is an optional extra: a spec naming it without the SDK
installed is a ModelSpecError with the install hint (models/registry.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medrcube.models.base import ModelAdapter
from medrcube.models.models_file import ModelEntry, ModelSpecError
from medrcube.models.providers import Api, OpenContext, Provider
from medrcube.models.registry import needs_argument, split_url

HF_INSTALL_HINT = (
    "the hf: provider needs torch and transformers: pip install 'medrcube[hf]' "
    "(on a machine without a GPU, install the CPU build of torch first: "
    "pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)


def _random(arg: str | None, ctx: OpenContext) -> ModelAdapter:
    from medrcube.models.baselines import RandomAdapter

    try:
        value = int(arg if arg is not None else "0")
    except ValueError:
        raise ModelSpecError(
            f"in model spec {ctx.spec!r}: the random seed must be an integer, as in random:42") from None
    return RandomAdapter(value, spec=ctx.spec, concurrency=ctx.concurrency)


def _prior(arg: str | None, ctx: OpenContext) -> ModelAdapter:
    from medrcube.models.baselines import PriorAdapter

    if arg is not None:
        raise ModelSpecError(
            "the prior baseline takes no argument: write `prior` (it is built from the cube being run)")
    if ctx.cube is None:
        raise ModelSpecError(
            "the prior baseline learns answer priors from the cube being run; "
            "pass cube= to load_adapter (the CLI and the pytest plugin do this for you)"
        )
    return PriorAdapter(ctx.cube, concurrency=ctx.concurrency)


def _simulate(arg: str | None, ctx: OpenContext) -> ModelAdapter:
    from medrcube.models.simulate import SimulatedAdapter, SimulationSpecError, parse_simulation

    if arg is None:
        raise needs_argument(ctx.spec)
    try:
        params = parse_simulation(arg)
    except SimulationSpecError as e:
        raise ModelSpecError(f"in model spec {ctx.spec!r}: {e}") from None
    if ctx.cube is None:
        raise ModelSpecError("the simulation answers from the cube's answers; pass cube= to load_adapter")
    return SimulatedAdapter(params, ctx.cube, spec=ctx.spec, concurrency=ctx.concurrency)


def _replay(arg: str | None, ctx: OpenContext) -> ModelAdapter:
    from medrcube.models.replay import ReplayAdapter

    if arg is None:
        raise needs_argument(ctx.spec)
    if not arg:
        raise ModelSpecError("replay needs a file: replay:PATH/TO/results.jsonl")
    return ReplayAdapter(arg, concurrency=ctx.concurrency)


def _hf_open(arg: str | None, ctx: OpenContext) -> ModelAdapter:
    if arg is None:
        raise needs_argument(ctx.spec)
    if not arg:
        raise ModelSpecError("hf needs a model directory or hub id: hf:PATH_OR_ID")
    return _hf(arg, spec=ctx.spec, concurrency=ctx.concurrency)


def _hf_entry(entry: ModelEntry, concurrency: int | None) -> ModelAdapter:
    return _hf(entry.model, spec=entry.name, concurrency=concurrency or entry.concurrency, params=entry.params,
               batch_size=entry.batch_size, dtype=entry.dtype, device=entry.device,
               image_max_side=entry.image_max_side, price=entry.price)


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


def _vllm_open(arg: str | None, ctx: OpenContext) -> ModelAdapter:
    if arg is None:
        raise needs_argument(ctx.spec)
    if not arg:
        raise ModelSpecError("vllm needs a model directory (or a hub id): vllm:PATH, or vllm:NAME@BASE_URL")
    name, url = split_url("vllm", arg, ctx.spec) if "@" in arg else (arg, None)
    return _vllm(name, spec=ctx.spec, url=url, concurrency=ctx.concurrency)


def _vllm_entry(entry: ModelEntry, concurrency: int | None) -> ModelAdapter:
    given = {key: getattr(entry, key) for key in ("timeout", "max_retries", "image_max_side", "strict_model",
                                                  "breaker_failures", "breaker_seconds", "transport")}
    if entry.max_response_mib is not None:
        given["max_response_bytes"] = int(entry.max_response_mib * 1024 * 1024)
    return _vllm(entry.model, spec=entry.name, url=entry.base_urls[0] if entry.base_urls else None,
                 concurrency=concurrency or entry.concurrency, executable=entry.executable, args=entry.engine,
                 start_timeout=entry.start_timeout, params=dict(entry.params), price=entry.price,
                 **{k: v for k, v in given.items() if v is not None})


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


BUILTIN: tuple[Provider, ...] = (
    Provider("random", "random[:SEED]", "uniform over the item's own options (baselines.py)", _random,
             typo_guard=True),
    Provider("prior", "prior", "text-only answer prior, leave-one-out (needs the cube)", _prior, typo_guard=True),
    Provider("simulate", "simulate:accuracy=P[,icc=R,seed=S,grounded=true]",
             "a SIMULATED model of known accuracy and image correlation (simulate.py)", _simulate, typo_guard=True),
    Provider("replay", "replay:FILE", "recorded responses: JSON Lines or a reference results.json", _replay,
             typo_guard=True),
    Provider("openai", "openai:NAME[@BASE_URL]", "an OpenAI-compatible chat completions endpoint (OPENAI_API_KEY)",
             api=Api("openai", "openai", "medrcube.models.openai_adapter:OpenAIAdapter", transport=True)),
    Provider("anthropic", "anthropic:NAME[@BASE_URL]",
             "Anthropic's Messages API (ANTHROPIC_API_KEY; pip install 'medrcube[anthropic]')",
             api=Api("anthropic", "medrcube[anthropic]", "medrcube.models.anthropic_adapter:AnthropicAdapter")),
    Provider("gemini", "gemini:NAME[@BASE_URL]", "Google's Gemini API (GEMINI_API_KEY; pip install 'medrcube[gemini]')",
             api=Api("google.genai", "medrcube[gemini]", "medrcube.models.gemini_adapter:GeminiAdapter")),
    Provider("hf", "hf:PATH_OR_ID", "an in-process transformers model (pip install 'medrcube[hf]')", _hf_open,
             from_entry=_hf_entry),
    Provider("vllm", "vllm:PATH[@BASE_URL]", "a vLLM engine the gate starts on a checkpoint and stops after the run, "
             "or one already running at BASE_URL (vLLM in its own environment: scripts/setup-vllm)", _vllm_open,
             from_entry=_vllm_entry),
)
