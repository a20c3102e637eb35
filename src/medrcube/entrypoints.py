"""Extensions found by entry point: check kinds, model providers, image perturbations.

Each registry of the house (gate/kinds.py, models/providers.py, run/perturbations.py)
fills itself from one entry-point group the first time it is read, never at import:

    group                    an entry point names              read by
    medrcube.kinds           a KindEntry, a sequence of them,  gate/kinds.py
                             or a module that registers its
                             kinds when imported
    medrcube.providers       a Provider, or a sequence         models/providers.py
    medrcube.perturbations   a PerturbationKind, or a sequence run/perturbations.py

The product's own kinds, providers and perturbations are declared in pyproject.toml
under these groups and load through this same path as a site package's. The order is
fixed whatever order the installed metadata lists them in: medrcube's own first (its
entry named `core` first, the rest by name), then other distributions by name.

An install made before a group was declared (an editable install of an older tree) lists
none of medrcube's own entry points for it; `BUILTIN` repeats pyproject.toml's
declarations for that case (tests/architecture checks that the two agree), and they are
loaded as the same EntryPoint objects.

A broken entry point (its module does not import, its object is of the wrong type) is an
error naming the group, the entry point, its distribution and the fix: a qualification
gate does not run with a site's check or model silently missing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata
from types import ModuleType
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)

OWN = "medrcube"

# pyproject.toml's [project.entry-points."GROUP"] tables, in the same order.
BUILTIN: dict[str, tuple[tuple[str, str], ...]] = {
    "medrcube.kinds": (
        ("core", "medrcube.gate.kinds:CORE"),
        ("subgroups", "medrcube.gate.subgroups"),
    ),
    "medrcube.providers": (
        ("core", "medrcube.models.builtin_providers:BUILTIN"),
    ),
    "medrcube.perturbations": (
        ("core", "medrcube.run.builtin_perturbations:BUILTIN"),
    ),
}


class ExtensionError(RuntimeError):
    """An entry point that cannot be loaded, or names an object of the wrong type."""


def _dist_name(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return (dist.metadata["Name"] or "") if dist is not None else OWN


@functools.cache
def _installed() -> tuple[metadata.EntryPoint, ...]:
    """Every installed entry point of the three groups, read once per process (one scan
    of the installed distributions serves them all; a distribution found twice on the
    path counts once, the first, as importlib.metadata.entry_points does)."""
    seen: set[str] = set()
    out: list[metadata.EntryPoint] = []
    for dist in metadata.distributions():
        # The name from the metadata directory's own name where there is one: reading and
        # parsing every METADATA file would cost the start-up about 30 ms.
        name = getattr(dist, "_normalized_name", None) or (dist.metadata["Name"] or "")
        key = name.casefold().replace("-", "_")
        if key in seen:
            continue
        seen.add(key)
        text = dist.read_text("entry_points.txt")
        if text and "[medrcube." in text:  # parsed only where one of the groups is declared
            out.extend(ep for ep in dist.entry_points if ep.group in BUILTIN)
    return tuple(out)


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The group's entry points in the house's fixed order (module docstring)."""
    found = [ep for ep in _installed() if ep.group == group]
    own = [ep for ep in found if _dist_name(ep).casefold() == OWN]
    others = [ep for ep in found if _dist_name(ep).casefold() != OWN]
    if not own:  # an install older than the group's declaration (module docstring)
        own = [metadata.EntryPoint(name, value, group) for name, value in BUILTIN.get(group, ())]
    seen: set[tuple[str, str]] = set()
    unique_own = []
    for ep in own:
        if (ep.name, ep.value) not in seen:
            seen.add((ep.name, ep.value))
            unique_own.append(ep)
    unique_own.sort(key=lambda ep: (ep.name != "core", ep.name))
    others = [ep for ep in others if (ep.name, ep.value) not in seen]
    others.sort(key=lambda ep: (_dist_name(ep).casefold(), ep.name))
    return unique_own + others


def load(group: str, cls: type[T]) -> Iterator[tuple[metadata.EntryPoint, list[T]]]:
    """Every entry point of `group` loaded in turn (the next one after the caller has
    registered what this one names): per entry point, the `cls` objects it names (none
    for a module, which registered what it holds when imported)."""
    for ep in entry_points(group):
        where = f"entry point {ep.name} = {ep.value!r} of group {group!r} (distribution {_dist_name(ep)!r})"
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - whatever a site package raises on import
            raise ExtensionError(
                f"{where} cannot be loaded: {type(exc).__name__}: {exc}; fix or uninstall that package"
            ) from exc
        yield ep, _objects(obj, cls, where)


def _objects(obj: object, cls: type[T], where: str) -> list[T]:
    if isinstance(obj, ModuleType):
        return []
    if isinstance(obj, cls):
        return [obj]
    if isinstance(obj, Iterable) and not isinstance(obj, (str, bytes)):
        items = list(obj)
        if all(isinstance(i, cls) for i in items):
            return items
    raise ExtensionError(
        f"{where} names a {type(obj).__name__}; it must name a {cls.__name__}, a sequence of them, or a module"
    )


class Registry(Generic[N]):
    """Objects of one class by their `name`, filled from one entry-point group the first time
    it is read (never at import), in `entry_points`' order. Two entry points naming the same
    name, or an object `check` refuses (it returns the reason and the fix), is an
    ExtensionError naming the entry point."""

    def __init__(self, group: str, cls: type[N], what: str, check: Callable[[N], str | None] | None = None) -> None:
        self.group, self.cls, self.what, self.check = group, cls, what, check
        self._by_name: dict[str, N] | None = None

    def _filled(self) -> dict[str, N]:
        if self._by_name is None:
            self._by_name = found = {}
            for ep, objs in load(self.group, self.cls):
                where = f"entry point {ep.name} = {ep.value!r} of group {self.group!r}"
                for obj in objs:
                    if obj.name in found:
                        raise ExtensionError(f"{where} names {self.what} {obj.name!r}, which another entry point "
                                             "names already; rename one of them")
                    why = self.check(obj) if self.check is not None else None
                    if why:
                        raise ExtensionError(f"{where}: {self.what} {obj.name!r} {why}")
                    found[obj.name] = obj
        return self._by_name

    def all(self) -> tuple[N, ...]:
        return tuple(self._filled().values())

    def get(self, name: str) -> N | None:
        return self._filled().get(name)
