"""The cube's values: Item (one multiple-choice question), Problem (one validation finding)
and Cube (validated items plus where they came from).

Everything here is immutable. Loaders (cube/loaders_*.py) build these; every later layer
reads them and nothing else.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any

from medrcube.records import Attributes

LETTERS = string.ascii_uppercase


def _freeze(meta: Mapping[str, Any] | None) -> Mapping[str, Any]:
    # A JSON round trip both deep-copies and proves the metadata is serialisable. `_plain`
    # gives the same copy without the text for the values JSON itself is made of (what
    # every loader yields), at a third of the CPU; anything else takes the round trip,
    # which also raises what it raised.
    if not meta:
        return _NO_META  # most items carry none: one shared empty view instead of a copy each
    top = dict(meta)
    try:
        return MappingProxyType(_plain(top))
    except (_NotPlain, RecursionError):
        return MappingProxyType(json.loads(json.dumps(top, sort_keys=True)))


_NO_META: Mapping[str, Any] = MappingProxyType({})  # never written through: no one holds the dict


class _NotPlain(Exception):
    """A value `_plain` leaves to the JSON round trip."""


_SAFE_INT = 2**63  # far below the integer-string limit json.dumps would raise at


def _plain(x: Any) -> Any:
    """json.loads(json.dumps(x, sort_keys=True)) for a value of exactly the JSON types
    (str keys; no subclass, whose JSON may differ), else _NotPlain: a new dict (keys
    sorted) or list (for a list or a tuple) at every level, the same scalars."""
    t = type(x)
    if t is str or t is bool or t is float or x is None:
        return x
    if t is int:
        if -_SAFE_INT < x < _SAFE_INT:
            return x
        raise _NotPlain
    if t is dict:
        if not all(type(k) is str for k in x):
            raise _NotPlain
        return {k: _plain(x[k]) for k in sorted(x)}
    if t is list or t is tuple:
        return [_plain(v) for v in x]
    raise _NotPlain


@dataclass(frozen=True, slots=True)
class Item:
    """One multiple-choice image question.

    `image` is a key the cube resolves to bytes (a posix path relative to the cube root
    for directory cubes); None means the image is unavailable (restricted in the release).
    `task`, `modality` and `part` are canonical names where the taxonomy knows the value,
    otherwise the value as written (validation reports it). `attributes` are the image's
    subgroup attributes (sex, age band, manufacturer, model, site, protocol family; see
    cube/attributes.py), None when the cube states none.
    """

    id: str
    dataset: str
    image: str | None
    question: str
    options: tuple[str, ...]
    answer: int
    task: str
    modality: str
    part: str
    original_task: str = ""
    restricted: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict)
    attributes: Attributes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(self.options))
        object.__setattr__(self, "meta", _freeze(self.meta))

    @property
    def answer_letter(self) -> str:
        return LETTERS[self.answer]

    @property
    def answer_text(self) -> str:
        return self.options[self.answer]

    @property
    def cell(self) -> tuple[str, str, str]:
        """(part, modality, task): the item's voxel of the cube."""
        return (self.part, self.modality, self.task)

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON Lines record (cube/jsonl.py); `from_dict` inverts it exactly.
        `attributes` is written only when the item has some (an older cube's records, and
        so its fingerprint, are unchanged)."""
        d = {
            "id": self.id,
            "dataset": self.dataset,
            "image": self.image,
            "question": self.question,
            "options": list(self.options),
            "answer": self.answer,
            "task": self.task,
            "modality": self.modality,
            "part": self.part,
            "original_task": self.original_task,
            "restricted": self.restricted,
            "meta": dict(self.meta),
        }
        if self.attributes is not None:
            d["attributes"] = self.attributes.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Item:
        return cls(
            id=d["id"],
            dataset=d["dataset"],
            image=d["image"],
            question=d["question"],
            options=tuple(d["options"]),
            answer=d["answer"],
            task=d["task"],
            modality=d["modality"],
            part=d["part"],
            original_task=d.get("original_task", ""),
            restricted=d.get("restricted", False),
            meta=d.get("meta", {}),
            attributes=Attributes.from_dict(d["attributes"]) if d.get("attributes") is not None else None,
        )


@dataclass(frozen=True, slots=True)
class Problem:
    """One validation finding, phrased so that an engineer can act on it.

    `severity` is "error" (the item is skipped, or the whole load fails under --strict)
    or "warning" (the item is kept: an unknown axis value, an unavailable image).
    """

    source: str  # the file (or dataset) the finding is about
    item_id: str | None
    field: str | None
    message: str  # what was found and what was expected
    reason: str  # a short stable code for counting: "duplicate_id", "missing_field", ...
    severity: str = "error"

    def __str__(self) -> str:
        where = self.source
        if self.item_id is not None:
            where += f" item {self.item_id!r}"
        if self.field is not None:
            where += f" field {self.field!r}"
        return f"{where}: {self.message}"


class CubeError(Exception):
    """A cube cannot be loaded at all (or, under --strict, has a problem). Carries the problems."""

    def __init__(self, problems: Sequence[Problem] | str, message: str | None = None):
        # `message` (an extension) heads the listed problems, e.g. "no loadable item".
        if isinstance(problems, str):
            self.problems: tuple[Problem, ...] = ()
            super().__init__(problems)
        else:
            self.problems = tuple(problems)
            lines = [str(p) for p in self.problems]
            super().__init__("\n".join(([message] if message else []) + lines))


ImageReader = Callable[[str], bytes]


@dataclass(frozen=True, slots=True)
class Content:
    """An image by its decoded pixels (cube/content.py)."""

    key: str  # sha256 of the canonical decoded pixels
    dhash: int  # 64-bit difference hash (near duplicates)


@dataclass(frozen=True)
class Cube:
    """A validated sequence of Items and where they came from.

    `read_image(key)` returns the encoded bytes of an item's image (PNG, JPEG...), read on
    demand: a cube never holds decoded images. `fingerprint` is a content hash over the
    items and the image bytes (cube/fingerprint.py), stable across loads.
    """

    items: tuple[Item, ...]
    source: str
    fingerprint: str
    read_image: ImageReader
    digests: Mapping[str, str] = field(default_factory=dict)  # image key -> sha256 of its bytes
    problems: tuple[Problem, ...] = ()
    root: str | None = None  # directory of a directory cube (for thumbnails, paths in reports)
    # image key -> its decoded content (cube/content.py); copies share one content key
    contents: Mapping[str, Content] = field(default_factory=dict)
    # image key -> the first key (in sort order) whose pixels are the same: the image's identity
    same_image: Mapping[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Item]:
        return iter(self.items)

    @property
    def skipped(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    def image_available(self, item: Item) -> bool:
        return item.image is not None

    def image_of(self, item: Item) -> str | None:
        """The item's image by content: the first of the keys whose decoded pixels equal
        its image's (cube/content.py), so that copies under other names are one image."""
        return None if item.image is None else self.same_image.get(item.image, item.image)

    @cached_property
    def items_by_content(self) -> tuple[Item, ...]:
        """The items with each image key replaced by `image_of` (the items themselves when
        no two keys share their pixels): for whatever groups items by image (the audit,
        feasibility, clustering plans), so that copies are one image."""
        if all(k == v for k, v in self.same_image.items()):
            return self.items
        return tuple(it if it.image is None or self.same_image.get(it.image, it.image) == it.image
                     else replace(it, image=self.same_image[it.image]) for it in self.items)

    def image_digest(self, item: Item) -> str | None:
        """sha256 of the image bytes (part of the response store's key); computed at load."""
        return None if item.image is None else self.digests[item.image]
