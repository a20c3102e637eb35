"""The plan of a run: every (item, variant instance) to put to the model, fully prepared.

A planned ask carries what the runner needs to ask (the Request, its store key) and what
grading needs afterwards (the options as shown, the answer index as shown, the axes), so
that neither has to re-derive anything from the cube.

An item whose image is unavailable (restricted in the release) is planned as
unavailable in every image variant (not asked, outcome `unavailable`) and asked normally
in `blind`, which shows no image anyway.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrcube.cube.item import Cube, Item
from medrcube.models.base import ImageInput, Request
from medrcube.run.prompts import prompt_hash, render_prompt
from medrcube.run.store import make_key
from medrcube.run.variants import ABSTAIN, Variant, parse_variants, rotate, with_abstention


@dataclass(frozen=True, slots=True)
class PlannedAsk:
    """One (item, variant, rotation) of a run."""

    item: Item
    variant: str  # "standard", "blind", "shuffled" or "abstain"
    rotation: int
    options: tuple[str, ...]  # as shown to the model (rotated for "shuffled")
    answer: int  # index of the correct option as shown
    prompt: str
    prompt_hash: str
    images: tuple[ImageInput, ...]
    image_digest: str | None  # the item's image digest (kept for records even in blind)
    params: Mapping[str, Any] = field(default_factory=dict)
    key: str = ""  # the response-store key; "" when not asked
    available: bool = True  # False: the image variant of an item without its image

    @property
    def variant_label(self) -> str:
        """The variant as adapters see it: "shuffled:2" carries its rotation."""
        return f"{self.variant}:{self.rotation}" if self.variant == "shuffled" else self.variant

    def request(self) -> Request:
        return Request(
            key=self.key,
            item_id=self.item.id,
            prompt=self.prompt,
            images=self.images,
            params=self.params,
            variant=self.variant_label,
            task=self.item.task,
            options=self.options,
        )


def as_variants(variants: str | Variant | Iterable[str | Variant]) -> tuple[Variant, ...]:
    """Variants from a spec ("standard,blind,shuffled:3"), Variant objects or a mix."""
    return parse_variants(variants)


def plan_asks(
    cube: Cube,
    variants: str | Variant | Iterable[str | Variant] = ("standard",),
    *,
    fingerprint: str,
    params: Mapping[str, Any] | None = None,
    template: str = "default",
    keyed_by_item: bool = False,
) -> list[PlannedAsk]:
    """Every ask of a run, variant by variant, items in cube order within a variant (so a
    run killed early has whole variants done first). `fingerprint` is the model's (part
    of every key); `params` the generation parameters sent with every request;
    `keyed_by_item` puts the item id into every key (ModelAdapter docstring)."""
    params = dict(params or {})
    plan: list[PlannedAsk] = []
    for variant in as_variants(variants):
        for item in cube.items:
            for name, rotation in variant.instances(len(item.options)):
                plan.append(
                    _plan_one(cube, item, variant, name, rotation, fingerprint, params, template, keyed_by_item)
                )
    return plan


def _plan_one(
    cube: Cube,
    item: Item,
    variant: Variant,
    name: str,
    rotation: int,
    fingerprint: str,
    params: Mapping[str, Any],
    template: str,
    keyed_by_item: bool = False,
) -> PlannedAsk:
    options, answer = rotate(item.options, item.answer, rotation)
    if name == ABSTAIN:  # the added last option whose choice is a deferral (run/variants.py)
        options = with_abstention(options)
    prompt = render_prompt(item.question, options, template)
    available = cube.image_available(item)
    digest = cube.image_digest(item) if available else None
    images: tuple[ImageInput, ...] = ()
    if variant.uses_image and available:
        assert item.image is not None and digest is not None
        images = (ImageInput(digest, functools.partial(cube.read_image, item.image)),)
    asked = available or not variant.uses_image
    key = (
        make_key(
            fingerprint,
            prompt,
            [i.digest for i in images],
            params,
            name,
            rotation,
            item_id=item.id if keyed_by_item else None,
        )
        if asked
        else ""
    )
    return PlannedAsk(
        item=item,
        variant=name,
        rotation=rotation,
        options=options,
        answer=answer,
        prompt=prompt,
        prompt_hash=prompt_hash(prompt),
        images=images,
        image_digest=digest,
        params=params,
        key=key,
        available=asked,
    )


def variant_specs(variants: Sequence[Variant]) -> list[str]:
    """["standard", "shuffled:3"]: how run.json records the variants."""
    return [v.spec for v in variants]
