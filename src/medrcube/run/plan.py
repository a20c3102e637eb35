"""The plan of a run: every (item, variant instance) to put to the model, fully prepared.

A planned ask carries what the runner needs to ask (the Request, its store key) and what
grading needs afterwards (the options as shown, the answer index as shown, the axes), so
that neither has to re-derive anything from the cube.

An item whose image is unavailable (restricted in the release) is planned as
unavailable in every image variant (not asked, outcome `unavailable`) and asked normally
in `blind`, which shows no image anyway.

An image-perturbation variant (run/perturb.py) shows the perturbed image: its ImageInput
carries the sha256 of the perturbed bytes, so the store key is that of the bytes sent;
the record keeps the item's own image digest. The perturbed images are made here, at plan
time (on a few threads), because the key needs their digest before the store is asked.
An item the perturbation does not apply to (a flip of a laterality-dependent item, a
crop or rotation that would lose the region of interest) is not planned in that variant.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrcube.cube.item import Cube, Item
from medrcube.models.base import ImageInput, Request
from medrcube.run.perturb import DEFAULT_MAX_SIDE, PerturbationError, PerturbedImages
from medrcube.run.prompts import prompt_hash, render_prompt
from medrcube.run.store import make_key
from medrcube.run.variants import ABSTAIN, Variant, parse_variants, rotate, with_abstention


@dataclass(frozen=True, slots=True)
class PlannedAsk:
    """One (item, variant, rotation) of a run."""

    item: Item
    variant: str  # "standard", "blind", "shuffled", "abstain" or a perturbation's spec ("jpeg:30")
    rotation: int
    options: tuple[str, ...]  # as shown to the model (rotated for "shuffled")
    answer: int  # index of the correct option as shown
    prompt: str
    prompt_hash: str
    images: tuple[ImageInput, ...]
    image_digest: str | None  # the item's image digest (kept for records even in blind)
    params: Mapping[str, Any] = field(default_factory=dict)
    key: str = ""  # the response-store key; "" when not asked
    image_key: str | None = None  # the image by content (Cube.image_of): the records' image
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


# A planned ask's place in `plan_asks`' list: (variant, item, instance), each by its index.
Position = tuple[int, int, int]


def plan_asks(
    cube: Cube,
    variants: str | Variant | Iterable[str | Variant] = ("standard",),
    *,
    fingerprint: str,
    params: Mapping[str, Any] | None = None,
    template: str = "default",
    keyed_by_item: bool = False,
    image_max_side: int | None = DEFAULT_MAX_SIDE,
) -> list[PlannedAsk]:
    """Every ask of a run, variant by variant, items in cube order within a variant (the
    records' order; the run sends them grouped by image across the variants unless
    `RunOptions.order` is "plan": run/order.py `image_runs`). `fingerprint` is the model's (part
    of every key); `params` the generation parameters sent with every request;
    `keyed_by_item` puts the item id into every key (ModelAdapter docstring);
    `image_max_side` the largest side of a perturbed image (the model's limit)."""
    variant_objs = as_variants(variants)
    perturbed = PerturbedImages(max_side=image_max_side or DEFAULT_MAX_SIDE)
    _prepare_perturbed(cube, variant_objs, perturbed)
    return [ask for _, ask in _plan_items(cube, variant_objs, range(len(cube.items)), fingerprint, dict(params or {}),
                                          template, keyed_by_item, perturbed)]


def _plan_items(
    cube: Cube,
    variants: Sequence[Variant],
    indices: range,
    fingerprint: str,
    params: Mapping[str, Any],
    template: str,
    keyed_by_item: bool,
    perturbed: PerturbedImages | None = None,
) -> Iterator[tuple[Position, PlannedAsk]]:
    """The asks of the items at `indices`, variant by variant, each with its position (an
    ask a perturbation drops is left out)."""
    for v_index, variant in enumerate(variants):
        for i_index in indices:
            item = cube.items[i_index]
            for n, (name, rotation) in enumerate(variant.instances(len(item.options))):
                ask = _plan_one(cube, item, variant, name, rotation, fingerprint, params, template, keyed_by_item,
                                perturbed)
                if ask is not None:
                    yield (v_index, i_index, n), ask


def plan_in_chunks(
    cube: Cube,
    variants: Sequence[Variant],
    *,
    fingerprint: str,
    params: Mapping[str, Any] | None = None,
    template: str = "default",
    keyed_by_item: bool = False,
    first: int = 32,
    size: int = 64,
) -> Iterator[list[tuple[Position, PlannedAsk]]]:
    """The asks of `plan_asks`, planned `size` items at a time (`first` for the first chunk),
    every variant of those items together, each with its position: sorted by position,
    they are `plan_asks`' list. A run sends the first chunk's requests while it plans the
    next ones (run/runner.py): at paper scale with five variants the whole plan (36,478
    asks, each keyed) took about half a second before anything was sent. Variants without
    a perturbation only (`plan_asks` makes every perturbed image first): a ValueError
    otherwise."""
    if any(v.perturbation is not None for v in variants):
        raise ValueError("plan_in_chunks plans variants without a perturbation; plan_asks plans the others")
    params = dict(params or {})
    n_items = len(cube.items)
    start, step = 0, max(1, first)
    while start < n_items:
        yield list(_plan_items(cube, variants, range(start, min(start + step, n_items)), fingerprint, params,
                               template, keyed_by_item))
        start, step = start + step, max(1, size)


def planned_count(cube: Cube, variants: Sequence[Variant]) -> int:
    """How many asks `plan_in_chunks` plans: one per item, variant and instance."""
    by_options = Counter(len(item.options) for item in cube.items)
    return sum(k * len(variant.instances(n)) for variant in variants for n, k in by_options.items())


def _perturbed_jobs(cube: Cube, variants: Sequence[Variant]) -> list[tuple[Variant, Item, str]]:
    """One (variant, an item showing the image, image digest) per perturbed image to make."""
    jobs: dict[tuple[str, str], tuple[Variant, Item, str]] = {}
    for v in variants:
        p = v.perturbation
        if p is None:
            continue
        for item in cube.items:
            if cube.image_available(item) and p.applies_to_item(item.task, item.question, item.options):
                digest = cube.image_digest(item)
                assert digest is not None and item.image is not None
                jobs.setdefault((p.spec, digest), (v, item, digest))
    return list(jobs.values())


def _prepare_perturbed(cube: Cube, variants: Sequence[Variant], perturbed: PerturbedImages) -> None:
    """Make every perturbed image of the plan once, on a few threads (Pillow and numpy
    release the GIL for the heavy parts); a failure is left for `_plan_one` to report."""
    jobs = _perturbed_jobs(cube, variants)
    if not jobs:
        return

    def one(job: tuple[Variant, Item, str]) -> None:
        v, item, digest = job
        assert v.perturbation is not None and item.image is not None
        try:
            perturbed.digest_of(v.perturbation, digest, functools.partial(cube.read_image, item.image),
                                item.meta, item.task)
        except Exception:  # noqa: BLE001 - reported per item by _plan_one
            pass

    workers = max(1, min(4, os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, jobs))


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
    perturbed: PerturbedImages | None = None,
) -> PlannedAsk | None:
    p = variant.perturbation
    if p is not None and not p.applies_to_item(item.task, item.question, item.options):
        return None
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
        if p is not None:
            assert perturbed is not None
            read = images[0].read
            try:
                sent = perturbed.digest_of(p, digest, read, item.meta, item.task)
            except (PerturbationError, OSError, ValueError) as exc:
                images = (_failing_image(digest, p.spec, item.id, exc),)
            else:
                if sent is None:
                    return None  # the region of interest would be lost
                images = (ImageInput(sent, perturbed.reader(p, digest, read)),)
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
        image_key=cube.image_of(item),
        available=asked,
    )


def _failing_image(digest: str, spec: str, item_id: str, exc: Exception) -> ImageInput:
    """An image whose read raises: the adapter reports it as this item's error, and the
    key (never stored, as errors are not) cannot collide with a real image's."""
    message = f"cannot make the {spec} image of item {item_id}: {exc}"

    def fail() -> bytes:
        raise PerturbationError(message)

    return ImageInput(f"unreadable:{spec}:{digest}", fail)


def variant_specs(variants: Sequence[Variant]) -> list[str]:
    """["standard", "shuffled:3"]: how run.json records the variants."""
    return [v.spec for v in variants]
