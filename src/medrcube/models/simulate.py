"""`simulate:...`: a SIMULATED model of known behaviour, for operating characteristics and tests.

    simulate:accuracy=0.8,icc=0.3,seed=1[,grounded=true][,DD=0.6,MR=0.95,Heart=0,US=chance,...][,manufacturer.GE=-0.25]

It is not a model: it knows each item's answer (from the cube) and answers right with
the stated probability. Its spec, fingerprint and every response name it a simulation,
so no output can pass it off as a model.

- accuracy: the probability of a right answer on every task (default 0.7); a task's own
  accuracy by its abbreviation or name (`DD=0.6`, `Disease Diagnosis=0.6`), a part's or a
  modality's by its name (`Heart=0`, `X-Ray=0.5`); `chance` instead of a number answers
  that value's items uniformly at random (`VR=chance`). Where several apply to an item,
  chance wins, else the lowest (a subgroup's ATTRIBUTE.VALUE then applies to it).
- icc: the correlation of items on one image (a latent image effect: a right answer is
  sqrt(icc) u_image + sqrt(1 - icc) e_item < Phi^-1(accuracy)), default 0.
- grounded: false (default) draws the diagnosis-level items (AD, DD, SG) from an image
  effect independent of the perception-level items': diagnosis and perception are
  independent whatever the accuracies. true makes them share one image effect with a
  correlation of at least 0.6, so a right perception goes with a right diagnosis.
- ATTRIBUTE.VALUE: the accuracy on the images whose subgroup attribute has that value
  (`manufacturer.GE=0.6`, `age_band.90+=0.5`), or a signed shift of it (`sex.female=-0.25`:
  0.25 below the item's accuracy otherwise), for a model worse on one stratum.
- seed: every draw is a hash of (seed, image or item, item): reproducible across runs,
  worker counts and request orders.
- blind requests (no image) are answered uniformly at random; rotations of the options
  do not change whether an item is right.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING

from medrcube.models.base import AdapterBase, ErrorKind, Request, Response
from medrcube.records import ATTRIBUTE_NAMES, Attributes
from medrcube.taxonomy import Level, canonical_modality, canonical_part, canonical_task, task_level

if TYPE_CHECKING:
    from medrcube.cube.item import Cube

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_N = NormalDist()
GROUNDED_MIN_CORRELATION = 0.6


class SimulationSpecError(ValueError):
    """A malformed simulate: spec; the message names the key and the fix."""


@dataclass(frozen=True)
class SimulationParams:
    accuracy: float = 0.7
    icc: float = 0.0
    seed: int = 0
    grounded: bool = False
    task_accuracy: Mapping[str, float] = field(default_factory=dict)
    # (attribute, value) -> (accuracy or shift, whether it is a shift)
    stratum_accuracy: Mapping[tuple[str, str], tuple[float, bool]] = field(default_factory=dict)
    # Per part and per modality; and the values answered at chance ("part:Heart", "task:View Recognition").
    part_accuracy: Mapping[str, float] = field(default_factory=dict)
    modality_accuracy: Mapping[str, float] = field(default_factory=dict)
    at_chance: frozenset[str] = frozenset()

    def accuracy_of(self, task: str, attributes: Attributes | None = None, part: str | None = None,
                    modality: str | None = None) -> float | None:
        """The item's probability of a right answer; None: answered at chance."""
        if any(k in self.at_chance for k in (f"task:{task}", f"part:{part}", f"modality:{modality}")):
            return None
        given = [v for v in (self.task_accuracy.get(task), self.part_accuracy.get(part or ""),
                             self.modality_accuracy.get(modality or "")) if v is not None]
        acc = min(given) if given else self.accuracy
        if attributes is not None:
            for (name, value), (v, shift) in self.stratum_accuracy.items():
                if attributes.get(name) == value:
                    acc = min(1.0, max(0.0, acc + v)) if shift else v
        return acc


def _prob(key: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise SimulationSpecError(f"simulate: {key}={text!r} is not a number; write e.g. {key}=0.7") from None
    if not 0.0 <= v <= 1.0:
        raise SimulationSpecError(f"simulate: {key}={text} must be between 0 and 1")
    return v


def parse_simulation(rest: str) -> SimulationParams:
    """The parameters of `simulate:REST` (REST: comma-separated key=value)."""
    acc, icc, seed, grounded = 0.7, 0.0, 0, False
    overrides: dict[str, dict[str, float]] = {"task": {}, "part": {}, "modality": {}}
    chance: set[str] = set()
    strata: dict[tuple[str, str], tuple[float, bool]] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise SimulationSpecError(f"simulate: {part!r} is not key=value; e.g. simulate:accuracy=0.8,icc=0.3,seed=1")
        if key == "accuracy":
            acc = _prob(key, value)
        elif key == "icc":
            icc = _prob(key, value)
        elif key == "seed":
            try:
                seed = int(value)
            except ValueError:
                raise SimulationSpecError(f"simulate: seed={value!r} must be an integer") from None
        elif key == "grounded":
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise SimulationSpecError(f"simulate: grounded={value!r} must be true or false")
            grounded = value.lower() in ("true", "1", "yes")
        elif key.partition(".")[0] in ATTRIBUTE_NAMES and key.partition(".")[2]:
            name, _, stratum = key.partition(".")
            shift = value[:1] in "+-"
            try:
                v = float(value)
            except ValueError:
                raise SimulationSpecError(f"simulate: {key}={value!r} is not a number; write {key}=0.6 (an accuracy) "
                                          f"or {key}=-0.25 (a shift)") from None
            if not (-1.0 <= v <= 1.0 if shift else 0.0 <= v <= 1.0):
                raise SimulationSpecError(f"simulate: {key}={value} must be an accuracy in [0, 1] or a shift in [-1, 1]")
            strata[(name, stratum.strip())] = (v, shift)
        else:
            axis, name = _axis_value(key)
            if value.lower() == "chance":
                chance.add(f"{axis}:{name}")
            else:
                overrides[axis][name] = _prob(key, value)
    return SimulationParams(acc, icc, seed, grounded, overrides["task"], strata, overrides["part"],
                            overrides["modality"], frozenset(chance))


def _axis_value(key: str) -> tuple[str, str]:
    """The axis and canonical name of an override's key (a task, a part or a modality)."""
    for axis, read in (("task", canonical_task), ("modality", canonical_modality), ("part", canonical_part)):
        hit = read(key)
        if hit.known:
            return axis, hit.value
    raise SimulationSpecError(
        f"simulate: unknown key {key!r}; use accuracy, icc, seed, grounded, a task (DD=0.6), a part (Heart=0), "
        f"a modality (US=chance) or ATTRIBUTE.VALUE (manufacturer.GE=-0.25; attributes: {', '.join(ATTRIBUTE_NAMES)})")


def _uniform(*parts: object) -> float:
    material = "\x1f".join(map(str, parts)).encode("utf-8")
    h = int.from_bytes(hashlib.sha256(material).digest()[:8], "big")
    return (h + 0.5) / 2.0**64


def _normal(*parts: object) -> float:
    return _N.inv_cdf(_uniform(*parts))


class SimulatedAdapter(AdapterBase):
    """A simulated model (see the module doc). Needs the cube to know the answers."""

    keyed_by_item = True

    def __init__(self, params: SimulationParams, cube: Cube, *, spec: str, concurrency: int | None = None,
                 batch_size: int = 256) -> None:
        self.params = params
        self.spec = spec
        self.fingerprint = f"simulation:{spec}"  # never mistaken for a model's
        self.batch_size = batch_size
        self.concurrency = concurrency or 4
        self._items = {it.id: it for it in cube.items}

    def correct(self, item_id: str, image: str | None, task: str, part: str | None = None,
                modality: str | None = None, n_options: int | None = None) -> bool:
        """Whether the simulation answers this item right (any rotation); the item's part,
        modality and options are the cube's, or those given for an item it does not hold."""
        p = self.params
        item = self._items.get(item_id)
        if item is not None:
            part, modality, n_options = item.part, item.modality, len(item.options)
        acc = p.accuracy_of(task, item.attributes if item is not None else None, part, modality)
        if acc is None:  # at chance: a uniform pick among the options, seeded per item
            n = n_options or 4
            return int(_uniform(p.seed, "chance", item_id) * n) % n == 0
        if acc <= 0.0:
            return False
        if acc >= 1.0:
            return True
        high = task_level(task) is Level.HIGH
        cluster = image or f"item:{item_id}"
        # Diagnosis draws its image effect from its own stream unless grounded.
        stream = "perception" if (p.grounded or not high) else "diagnosis"
        rho = p.icc
        if p.grounded and high:
            rho = max(rho, GROUNDED_MIN_CORRELATION)
        u = _normal(p.seed, stream, cluster)
        e = _normal(p.seed, "item", item_id)
        latent = math.sqrt(rho) * u + math.sqrt(1.0 - rho) * e
        return latent < _N.inv_cdf(acc)

    def answer(self, req: Request) -> Response:
        if not req.options:
            return Response(text=None, error=f"the simulation needs the options of item {req.item_id!r}",
                            error_kind=ErrorKind.INTERNAL)
        n = len(req.options)
        item = self._items.get(req.item_id)
        if item is None or not req.images:
            # Not in the cube, or blind: a uniform guess, seeded.
            pick = int(_uniform(self.params.seed, "guess", req.item_id, req.variant, *req.options) * n) % n
            return Response(text=LETTERS[pick])
        right = req.options.index(item.answer_text) if item.answer_text in req.options else 0
        if self.correct(item.id, item.image, item.task) or n < 2:
            return Response(text=LETTERS[right])
        wrong = [i for i in range(n) if i != right]
        pick = wrong[int(_uniform(self.params.seed, "wrong", item.id) * len(wrong)) % len(wrong)]
        return Response(text=LETTERS[pick])

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        return [self.answer(r) for r in requests]

    async def aclose(self) -> None:
        return None
