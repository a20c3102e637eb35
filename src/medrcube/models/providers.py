"""The registry of model providers: one `Provider` per spec word, found by entry point.

A provider says what the house needs of it: its word (`openai` of `openai:NAME`), its
spec form and meaning (the `--model` help of the gate and of `medrcube run`, and every
error, read them from here), how a spec naming it opens an adapter (`open`, given the
spec's argument, None for the bare word), and, for an HTTP API, its SDK, its pip package
and its adapter class (`api`: imported when chosen; such a provider may be named in
models.yaml, whose HTTP keys it takes, and the registry opens it, one adapter per base
URL, itself).

The registry fills itself from the entry-point group `medrcube.providers`
(entrypoints.py) the first time it is read: the product's own providers
(models/builtin_providers.py) and a site package's by the same path, in that order,
which is also the order in which the spec forms are listed. A new provider is one
`Provider` named by an entry point of that group, with its adapter on models/base.py's
contract (for an HTTP API, on models/api_base.py's); nothing else changes. The module
that declares a provider is imported when the help is written, at every start: it
imports its adapter inside `open` (or names it in `api`), not at its top.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from medrcube import entrypoints

if TYPE_CHECKING:
    from medrcube.cube.item import Cube
    from medrcube.models.base import ModelAdapter

GROUP = "medrcube.providers"


@dataclass(frozen=True, slots=True)
class OpenContext:
    """What a provider's `open` is given besides the spec's argument."""

    spec: str  # the whole spec as written ("random:3")
    cube: Cube | None  # the cube being run (the prior baseline and the simulation read it)
    concurrency: int | None  # the caller's concurrency, None: the adapter's own


@dataclass(frozen=True, slots=True)
class Api:
    """An HTTP API provider: its SDK's import name, what to pip install for it, and its
    adapter class as "module:Class" (imported only when the provider is chosen)."""

    sdk: str
    package: str
    adapter: str
    transport: bool = False  # models.yaml's `transport` (the light HTTP client) applies

    def adapter_class(self) -> Callable[..., ModelAdapter]:
        """The adapter class `adapter` names (on the adapter contract: the contract suite runs every one)."""
        module, _, name = self.adapter.partition(":")
        found: Callable[..., ModelAdapter] = getattr(importlib.import_module(module), name)
        if not isinstance(found, type):
            raise TypeError(f"provider API {self.adapter!r} names a {type(found).__name__}, not an adapter class; "
                            "name the adapter class as 'module:Class'")
        return found


@dataclass(frozen=True, slots=True)
class Provider:
    """One model provider (module docstring)."""

    name: str
    form: str  # "random[:SEED]", "openai:NAME[@BASE_URL]"
    meaning: str
    # (the spec's argument, None for the bare word; the context) -> the adapter; None for
    # an HTTP API provider (`api`), which the registry opens.
    open: Callable[[str | None, OpenContext], ModelAdapter] | None = None
    api: Api | None = None
    # A bare name close to this word is a typo, not an OpenAI model id (`randm`).
    typo_guard: bool = False
    # (a models.yaml entry naming it (models_file.ModelEntry, which reads this registry),
    # the caller's concurrency) -> the adapter: such a provider may be named in models.yaml
    # (an HTTP API provider may always be).
    from_entry: Callable[[Any, int | None], ModelAdapter] | None = None


def _gives_a_way_to_open(p: Provider) -> str | None:
    return "gives neither `open` nor `api`; give one of them" if p.open is None and p.api is None else None


_REGISTRY = entrypoints.Registry(GROUP, Provider, "provider", check=_gives_a_way_to_open)


def registered() -> tuple[Provider, ...]:
    """Every provider, in the order the spec forms are tried and listed."""
    return _REGISTRY.all()


def names() -> tuple[str, ...]:
    return tuple(p.name for p in registered())


def provider_of(name: str) -> Provider | None:
    return _REGISTRY.get(name)


def api_names() -> tuple[str, ...]:
    """The HTTP API providers (models.yaml's HTTP keys apply to them)."""
    return tuple(p.name for p in registered() if p.api is not None)


def file_names() -> tuple[str, ...]:
    """The providers a models.yaml entry may name."""
    return tuple(p.name for p in registered() if p.api is not None or p.from_entry is not None)
