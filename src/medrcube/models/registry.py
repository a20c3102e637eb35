"""Spec string -> ModelAdapter.

The grammar is the providers' spec forms (models/providers.py: the registry, filled by
entry point) followed by a models.yaml name, first match wins, written once: the
`--model` help of the pytest plugin and of `medrcube run`, and every error here, read it
from there. A provider opens its own adapter (`Provider.open`), importing it only then;
an HTTP API provider (`Provider.api`) is opened here, one adapter per base URL, with the
install hint when its optional SDK is missing.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import importlib.util
import itertools
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medrcube.models import providers
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

__all__ = ["ModelSpecError", "ModelsFileError", "load_adapter", "spec_forms", "spec_help", "RoundRobinAdapter"]

_NAME_FORM = ("NAME", "an entry of models.yaml (./models.yaml or --models-file), else openai:NAME with the "
                      "OPENAI_API_KEY / OPENAI_BASE_URL environment")


def spec_forms() -> tuple[tuple[str, str], ...]:
    """(form, meaning): the model-spec grammar, in the order the forms are tried."""
    return (*((p.form, p.meaning) for p in providers.registered()), _NAME_FORM)


def spec_help() -> str:
    """The grammar on one line, for option help and error messages."""
    return ", ".join(form for form, _ in spec_forms()[:-1]) + ", or a name from models.yaml"


def needs_argument(spec: str) -> ModelSpecError:
    """The error of a provider's bare word given without the argument it needs."""
    return ModelSpecError(f"model spec {spec!r} needs an argument: {spec_help()}")


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
    context = providers.OpenContext(spec=spec, cube=cube, concurrency=concurrency)
    provider = providers.provider_of(prefix)
    if not sep:
        if provider is None:
            return _named(spec, models_file, concurrency)
        if provider.open is not None:
            return provider.open(None, context)
        raise needs_argument(spec)
    if provider is not None and provider.open is not None:
        return provider.open(rest, context)
    if provider is not None:
        name, base_url = split_url(prefix, rest, spec)
        return _api(provider, name, spec=spec, base_urls=(base_url,) if base_url else (), concurrency=concurrency)
    # A bare name never contains ':' by models.yaml's rules, so this is a mistyped
    # provider (or a model id with a colon, which must be spelled openai:NAME).
    names = providers.names()
    raise ModelSpecError(
        f"unknown model provider {prefix!r} in spec {spec!r}{did_you_mean(prefix, names)}; "
        f"providers: {', '.join(names)}. A model id that contains ':' is written openai:{spec}"
    )


def split_url(provider: str, rest: str, spec: str) -> tuple[str, str | None]:
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
    guarded = [p.name for p in providers.registered() if p.typo_guard]
    near = difflib.get_close_matches(name.casefold(), guarded, n=1, cutoff=0.75)
    if near:
        raise ModelSpecError(
            f"model spec {name!r} is neither a built-in model nor an entry of models.yaml: did you mean {near[0]!r}? "
            f"(a bare name is otherwise an OpenAI model id: write openai:{name} to ask an endpoint for it; "
            f"specs: {spec_help()})")
    # Not defined anywhere: the standard OpenAI environment, as the openai SDK itself does.
    return _api(_provider("openai"), name, spec=name, base_urls=(), concurrency=concurrency)


def _provider(name: str) -> providers.Provider:
    provider = providers.provider_of(name)
    if provider is None:  # a models.yaml entry is validated against the same registry
        raise ModelSpecError(f"unknown model provider {name!r}; providers: {', '.join(providers.names())}")
    return provider


def adapter_from_entry(entry: ModelEntry, *, concurrency: int | None = None) -> ModelAdapter:
    """The adapter for a validated models.yaml entry."""
    provider = _provider(entry.provider)
    if provider.from_entry is not None:
        return provider.from_entry(entry, concurrency)
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
        provider,
        entry.model,
        spec=entry.name,
        base_urls=entry.base_urls,
        concurrency=concurrency or entry.concurrency,
        **kwargs,
    )


def _api(
    provider: providers.Provider, model: str, *, spec: str, base_urls: Sequence[str], concurrency: int | None,
    **kwargs: Any
) -> ModelAdapter:
    api = provider.api
    if api is None:
        raise ModelSpecError(f"model {spec!r}: provider {provider.name!r} is not an HTTP API provider")
    try:
        if importlib.util.find_spec(api.sdk) is None:
            raise ImportError(f"no module named {api.sdk!r}")
        adapter_class = api.adapter_class()
    except ImportError as e:  # an optional SDK not installed (or a broken install): say how to get it
        raise ModelSpecError(
            f"cannot load the {provider.name} adapter for {spec!r}: {e}; pip install '{api.package}'") from e

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


def _split(total: int, k: int) -> list[int]:
    base, extra = divmod(total, k)
    return [max(1, base + (1 if i < extra else 0)) for i in range(k)]


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
