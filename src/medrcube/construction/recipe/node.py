"""The strict reader of one mapping of the recipe: typed getters whose errors name the
file, the key, the value and the fix, and `done`, which refuses every key not consumed
(with "did you mean" for near misses).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medrcube.construction.recipe.spec import RecipeError
from medrcube.taxonomy import did_you_mean


class Node:
    """A mapping being read: every key must be consumed or it is reported as unknown."""

    def __init__(self, data: Any, where: str, src: str):
        if not isinstance(data, Mapping):
            raise RecipeError(f"{src}: {where or 'the recipe'} is {type(data).__name__} {short(data)}; expected a mapping (key: value lines)")
        self.data, self.where, self.src = data, where, src
        self.seen: set[str] = set()

    def key(self, k: str) -> str:
        return f"{self.where}.{k}" if self.where else k

    def fail(self, k: str, value: Any, problem: str, fix: str) -> RecipeError:
        return RecipeError(f"{self.src}: key {self.key(k)!r} {problem} (got {short(value)}); {fix}")

    def get(self, k: str, default: Any = None) -> Any:
        self.seen.add(k)
        return self.data.get(k, default)

    def has(self, k: str) -> bool:
        return k in self.data

    def string(self, k: str, *, required: bool = False, default: str | None = None, choices: tuple[str, ...] | None = None,
               pattern: re.Pattern[str] | None = None, fix: str = "") -> str | None:  # fmt: skip
        v = self.get(k)
        if v is None:
            if required:
                raise RecipeError(f"{self.src}: key {self.key(k)!r} is missing; {fix or 'add it'}")
            return default
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise self.fail(k, v, "must be a string", fix or "write a plain value")
        v = str(v).strip()
        if choices is not None and v not in choices:
            raise self.fail(k, v, f"is not one of {', '.join(choices)}{did_you_mean(v, choices)}", f"use one of {', '.join(choices)}")
        if pattern is not None and not pattern.match(v):
            raise self.fail(k, v, "is not a valid name", fix or "use letters, digits, '.', '-' and '_'")
        return v

    def integer(self, k: str, *, default: int | None = None, minimum: int = 0, maximum: int | None = None) -> int | None:
        v = self.get(k)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum or (maximum is not None and v > maximum):
            bound = f"{minimum}..{maximum}" if maximum is not None else f"at least {minimum}"
            raise self.fail(k, v, f"must be an integer {bound}", f"write a whole number {bound}")
        return v

    def number(self, k: str, *, default: float, low: float, high: float) -> float:
        v = self.get(k)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not low <= v <= high:
            raise self.fail(k, v, f"must be a number in [{low}, {high}]", f"write a number between {low} and {high}")
        return float(v)

    def boolean(self, k: str, default: bool) -> bool:
        v = self.get(k)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self.fail(k, v, "must be true or false", "write true or false (unquoted)")
        return v

    def path(self, k: str, base: Path, *, required: bool = False, must_exist: str | None = None) -> Path | None:
        v = self.string(k, required=required, fix="give a path relative to the recipe file")
        if v is None:
            return None
        p = Path(v).expanduser()
        p = Path(os.path.normpath(p if p.is_absolute() else base / p))
        if must_exist == "file" and not p.is_file():
            raise self.fail(k, v, f"names no file ({p} does not exist)", "give a path relative to the recipe file")
        if must_exist == "dir" and not p.is_dir():
            raise self.fail(k, v, f"names no folder ({p} is not a directory)", "give a folder path relative to the recipe file")
        return p

    def node(self, k: str, *, required: bool = False) -> Node | None:
        v = self.get(k)
        if v is None:
            if required:
                raise RecipeError(f"{self.src}: key {self.key(k)!r} is missing; add it as a mapping")
            return None
        return Node(v, self.key(k), self.src)

    def str_list(self, k: str, *, choices: tuple[str, ...] | None = None) -> tuple[str, ...] | None:
        v = self.get(k)
        if v is None:
            return None
        if isinstance(v, str) or not isinstance(v, list) or not all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v):
            raise self.fail(k, v, "must be a list of strings", "write [a, b] or one '- item' per line")
        out = tuple(str(x).strip() for x in v)
        for x in out:
            if choices is not None and x not in choices:
                raise self.fail(k, x, f"has {x!r}, not one of {', '.join(choices)}{did_you_mean(x, choices)}", f"use values from {', '.join(choices)}")
        return out

    def str_map(self, k: str) -> dict[str, str]:
        v = self.get(k)
        if v is None:
            return {}
        if not isinstance(v, Mapping) or not all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in (*v.keys(), *v.values())):
            raise self.fail(k, v, "must map strings to strings", "write 'raw value: meaning' lines")
        return {str(a).strip(): str(b).strip() for a, b in v.items()}

    def done(self, allowed: tuple[str, ...]) -> None:
        for k in self.data:
            if k not in self.seen:
                kk = str(k)
                raise RecipeError(
                    f"{self.src}: unknown key {self.key(kk)!r}{did_you_mean(kk, allowed)}; "
                    f"{'keys here: ' + ', '.join(allowed) if allowed else 'this section takes no keys'}"
                )


def short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."
