"""Stage II, item production: competencies -> display images and item drafts.

Each mapped image becomes one exported PNG (resampled to the recipe's size, square
pixels), plus one copy per labelled region with that region outlined in red (for the
ROI Grounding items that ask what the outlined region shows). Each competency becomes
a draft: a `questions.Fact` (question from `templates`, answer, distractors) with the
distractor strategy recorded. Answer letters are not assigned here: the export assigns
them after sampling, so that every letter is correct equally often in the final cube.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import ndimage

from medrcube.construction import imageio
from medrcube.construction.observation import ROI, Competency, Mapped
from medrcube.construction.stages import templates
from medrcube.construction.stages.distractors import StrategyPlan, choose
from medrcube.construction.stages.ontology import Ontology
from medrcube.construction.stages.questions import Fact, stable_seed
from medrcube.taxonomy import TASK_NAMES, task_abbrev

MARK_RGB = (1.0, 0.0, 0.0)  # the outline colour named by the roi_identify template ("outlined in red")


@dataclass
class OutImage:
    """An image as it will be exported: PNG bytes and where it goes."""

    dataset: str
    key: str  # path relative to the dataset folder: "images/007.png"
    png: bytes
    digest: str  # sha256 of the PNG bytes
    chain: str  # the source image it was made from: "dataset/007" (marked copies share it)
    marked: bool = False


@dataclass
class Draft:
    """An item before sampling, review and letter assignment."""

    id: str
    dataset: str
    image: str  # OutImage.key
    chain: str
    part: str
    modality: str
    fact: Fact
    strategy: str  # "similar", "normal" (ontology distractors) or "pool" (a fixed option set)
    meta: dict[str, Any] = field(default_factory=dict)
    answer_concept: str | None = None
    distractor_concepts: tuple[str, ...] = ()

    @property
    def cell(self) -> tuple[str, str, str]:
        return (self.part, self.modality, self.fact.task)

    @property
    def options(self) -> tuple[str, ...]:
        return (self.fact.answer, *self.fact.distractors)


def outline(img01: np.ndarray, roi: ROI, scale: tuple[float, float]) -> np.ndarray:
    """An RGB copy of the image with the region outlined in red, just outside its edge."""
    rgb = np.repeat(img01[..., None], 3, axis=2) if img01.ndim == 2 else img01.copy()
    h, w = rgb.shape[:2]
    sy, sx = scale
    thick = max(2, int(round(0.006 * max(h, w))))
    if roi.mask is not None:
        m = imageio.resize(roi.mask.astype(np.float64), (h, w)) > 0.5
        grown = ndimage.binary_dilation(m, iterations=thick + 1)
        ring = grown & ~ndimage.binary_dilation(m, iterations=1)
    else:
        x0, y0, x1, y1 = roi.box
        bx0, by0 = int(np.floor(x0 * sx)), int(np.floor(y0 * sy))
        bx1, by1 = int(np.ceil(x1 * sx)), int(np.ceil(y1 * sy))
        ring = np.zeros((h, w), dtype=bool)
        ox0, oy0, ox1, oy1 = max(0, bx0 - thick - 1), max(0, by0 - thick - 1), min(w, bx1 + thick + 1), min(h, by1 + thick + 1)
        ring[oy0:oy1, ox0:ox1] = True
        ring[max(0, by0 - 1) : min(h, by1 + 1), max(0, bx0 - 1) : min(w, bx1 + 1)] = False
    rgb[ring] = MARK_RGB
    return rgb


class Producer:
    """Stage II for one build: numbering, images, drafts; counts what could not be written."""

    def __init__(self, onto: Ontology, *, templates_: dict[str, str], options: int, similar_fraction: float, seed: str, max_side: int):
        self.onto = onto
        self.templates = templates_
        self.k = options - 1
        self.plan = StrategyPlan(similar_fraction)
        self.seed = seed
        self.max_side = max_side
        self.numbers: Counter[str] = Counter()  # dataset -> images numbered
        self.not_written: Counter[tuple[str, str]] = Counter()  # (task, why) -> competencies
        # Items whose question was phrased neutrally: (item id, task, the placeholders left out)
        # because another item of the same image has what they would name as its answer.
        self.neutral: list[tuple[str, str, tuple[str, ...]]] = []

    def _shape(self, pixels: np.ndarray, spacing: tuple[float, float]) -> tuple[int, int]:
        h, w = pixels.shape[:2]
        long = min(self.max_side, max(h, w))
        return imageio.fit_shape(h * spacing[0], w * spacing[1], long)

    def _png(self, dataset: str, key: str, pixels: np.ndarray, chain: str, marked: bool) -> OutImage:
        data = imageio.encode_png(imageio.to_uint8(pixels))
        return OutImage(dataset, key, data, hashlib.sha256(data).hexdigest(), chain, marked)

    def produce(self, m: Mapped) -> tuple[list[OutImage], list[Draft]]:
        img = m.image
        self.numbers[img.dataset] += 1
        stem = f"{self.numbers[img.dataset]:03d}"  # numbered files hint at no answer
        chain = f"{img.dataset}/{stem}"
        shape = self._shape(img.pixels, img.spacing)
        pixels = imageio.resize(img.pixels, shape)
        scale = (shape[0] / img.pixels.shape[0], shape[1] / img.pixels.shape[1])
        base = self._png(img.dataset, f"images/{stem}.png", pixels, chain, False)
        images = [base]
        marked: dict[int, OutImage] = {}
        drafts: list[Draft] = []
        ids: Counter[tuple[str, str]] = Counter()  # (image, task abbreviation) -> items
        source = {"kind": img.origin, "ref": img.ref}
        attributes = self._attributes(m)
        processing = "; ".join([*img.processing, f"resampled to {shape[1]}x{shape[0]}"])
        names = {id(c): self._answer_name(c).casefold() for c in m.competencies}
        for comp in sorted(m.competencies, key=lambda c: (TASK_NAMES.index(c.task), c.marked, c.roi or 0)):
            target = base
            if comp.marked and comp.roi is not None:
                if comp.roi not in marked:
                    copy = outline(pixels, img.rois[comp.roi], scale)
                    marked[comp.roi] = self._png(img.dataset, f"images/{stem}-r{comp.roi + 1}.png", copy, chain, True)
                    images.append(marked[comp.roi])
                target = marked[comp.roi]
            abbrev = task_abbrev(comp.task)
            ids[(target.key, abbrev)] += 1
            n = ids[(target.key, abbrev)]
            item_stem = target.key.rsplit("/", 1)[-1].removesuffix(".png")
            item_id = f"{img.dataset}-{item_stem}-{abbrev}" + (str(n) if n > 1 else "")
            neutral = self._neutral(comp, m.competencies, names)
            if neutral:
                self.neutral.append((item_id, comp.task, tuple(sorted(neutral))))
            draft = self._draft(comp, item_id, m, target, chain, source, processing, neutral)
            if draft is not None and attributes:
                draft.fact.extra["attributes"] = dict(attributes)
            if draft is not None:
                drafts.append(draft)
        used = {d.image for d in drafts}
        return [im for im in images if im.key in used], drafts

    def _attributes(self, m: Mapped) -> dict[str, str]:
        """The image's kept subgroup attributes; the protocol family from its derived protocol."""
        out = dict(m.image.attributes)
        if "protocol" in out:
            from medrcube.cube.attributes import normalise

            comp = next((c for c in m.competencies if c.task == "Imaging Protocol Recognition"), None)
            if comp is not None:
                try:
                    name = self.onto[comp.answer].name if comp.concept else comp.answer
                except KeyError:
                    name = comp.answer
                out["protocol"] = normalise("protocol", name)
        return out

    def _answer_name(self, comp: Competency) -> str:
        if comp.concept:
            try:
                return self.onto[comp.answer].name
            except KeyError:
                return comp.answer
        return comp.answer

    def _neutral(self, comp: Competency, siblings: list[Competency], names: dict[int, str]) -> frozenset[str]:
        """The placeholders of comp's question that would name another item's answer on the same
        image (a sibling leak: the modality item's answer in "this MR image", the organ item's in
        "of the brain", a diagnosis in "how severe is the pneumonia"): phrased neutrally instead."""
        used = set(templates.placeholders(self.templates[comp.kind]))
        others = [c for c in siblings if c is not comp]
        out = set()
        if "image" in used and any(c.kind == "modality" for c in others):
            out.add("image")
        if "region" in used and any(c.kind == "organ" for c in others):
            out.add("region")
        if "finding" in used and comp.finding is not None:
            f = comp.finding.casefold()
            if any(names[id(c)] and (names[id(c)] in f or f in names[id(c)]) for c in others):
                out.add("finding")
        return frozenset(out)

    def _draft(self, comp: Competency, item_id: str, m: Mapped, target: OutImage, chain: str, source: dict[str, str], processing: str,
               neutral: frozenset[str] = frozenset()) -> Draft | None:  # fmt: skip
        finding = comp.finding
        question = templates.render(self.templates, comp.kind, modality=m.modality, part=m.part, finding=finding, neutral=neutral)
        extra: dict[str, Any] = {"source": source, "processing": processing, "chain": chain}
        if comp.marked:
            extra["marked_region"] = "outlined in red"
        if comp.concept:
            strategy = self.plan.next(comp.task)
            choice = choose(self.onto, comp.answer, m.part, strategy, k=self.k, seed=f"{self.seed}/{item_id}")
            if choice is None:
                self.not_written[(comp.task, f"no mutually exclusive distractor for {comp.answer!r} in {m.part}")] += 1
                return None
            answer = self.onto[comp.answer].name
            distractors = tuple(self.onto[c].name for c in choice.distractors)
            extra["distractor_strategy"] = choice.strategy
            extra["concepts"] = {"answer": comp.answer, "distractors": list(choice.distractors)}
            strategy_used, concepts = choice.strategy, choice.distractors
        else:
            pool = list(comp.pool)
            k = min(len(pool), self.k)
            if k == 0:
                self.not_written[(comp.task, "empty option pool")] += 1
                return None
            rng = np.random.default_rng(stable_seed(self.seed, "pool", item_id))
            distractors = tuple(pool[i] for i in sorted(rng.choice(len(pool), size=k, replace=False)))
            answer = comp.answer
            extra["distractor_strategy"] = "pool"
            strategy_used, concepts = "pool", ()
        fact = Fact(comp.task, question, answer, distractors, comp.derivation, comp.original_task, synthetic=False, extra=extra)
        return Draft(
            id=item_id, dataset=m.image.dataset, image=target.key, chain=chain, part=m.part, modality=m.modality, fact=fact,
            strategy=strategy_used, answer_concept=comp.answer if comp.concept else None, distractor_concepts=tuple(concepts),
        )  # fmt: skip
