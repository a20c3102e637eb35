"""Variants: the ways one item is put to a model.

- `standard`: the image and the options in their cube order.
- `blind`: the same prompt without the image, the paper's text-only baseline (Table 4).
  It measures how much of an accuracy the question text alone explains.
- `shuffled:K`: K cyclic rotations of the options, with the image, for circular
  evaluation (an item counts as solved only when every rotation is answered correctly)
  and for position bias.
- `abstain`: the image and the options in cube order plus an added last option,
  "Cannot be determined from this image" (`ABSTAIN_OPTION`), offered on every item. Its
  choice is graded DEFERRED (records.Outcome): never a wrong answer, never a refusal;
  metrics.selective weighs it against errors with the policy's costs.

Rotation convention (chosen so that circular accuracy is a function of the `shuffled`
records alone): `shuffled:K` yields rotations 0, 1, ..., K-1, all named "shuffled".
Rotation 0 shows the options in cube order, the same prompt as `standard`, so a run of
`shuffled:K` without `standard` is still complete, and circular accuracy groups records
by (item, variant "shuffled") without consulting any other variant. K is capped at the
item's option count when instances are made (a 2-option item has only 2 distinct
rotations), so `shuffled:4` on a 2-option item gives rotations 0 and 1. A large K (such
as `shuffled:26`) therefore means "every rotation of every item".

Image perturbations (run/perturb.py): `jpeg:30`, `lowres:256`, `noise:0.03`,
`poisson:0.05`, `window:0.8`, `brightness:0.1`, `rotate:5`, `crop:0.9`, `flip`, each
optionally `@SEED`. The same kind may be asked at several levels (`jpeg:30,jpeg:70`); the
records of a perturbation carry its spec as their variant ("jpeg:30"), rotation 0, the
options in cube order, and are paired with the standard records by metrics.

`rotate(options, answer, r)` shifts the options left by r: the option at position r
comes first. `original_index(shown, r, n)` maps a position in the rotated prompt back
to the cube order, which position-bias analysis needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from medrcube.records import TEXT_VARIANTS
from medrcube.run.perturb import Perturbation, PerturbationError, is_kind, parse_perturbation
from medrcube.run.perturbations import names as perturbation_names
from medrcube.run.perturbations import registered as perturbation_kinds
from medrcube.taxonomy import did_you_mean

STANDARD = "standard"
BLIND = "blind"
SHUFFLED = "shuffled"
ABSTAIN = "abstain"
ABSTAIN_OPTION = "Cannot be determined from this image"
assert TEXT_VARIANTS == (STANDARD, BLIND, SHUFFLED, ABSTAIN)


def variant_names() -> tuple[str, ...]:
    """The text variants, then every registered image perturbation's kind."""
    return (*TEXT_VARIANTS, *perturbation_names())


def choices_text() -> str:
    """The variants' grammar, for option help and every error."""
    return ("standard, blind, shuffled:K (K >= 2 cyclic rotations of the options), "
            "abstain (an added last option: cannot be determined), or an image perturbation: "
            + ", ".join(k.form for k in perturbation_kinds()) + " (optionally @SEED)")
_SHUFFLED_RE = re.compile(r"^shuffled(?::(.*))?$")


@dataclass(frozen=True, slots=True)
class Variant:
    """One variant of a run. `k` is the rotation count of `shuffled` and 1 otherwise;
    `perturbation` is set for (and only for) an image-perturbation variant, whose `name`
    is the perturbation's kind."""

    name: str
    k: int = 1
    perturbation: Perturbation | None = None

    def __post_init__(self) -> None:
        if self.perturbation is not None or self.name in perturbation_names():
            if self.perturbation is None or self.perturbation.kind != self.name or self.k != 1:
                raise ValueError(
                    f"variant {self.name!r} is an image perturbation: make it with parse_variants, e.g. "
                    "parse_variants('jpeg:30')"
                )
            return
        if self.name not in variant_names():
            raise ValueError(
                f"unknown variant {self.name!r}{did_you_mean(self.name, variant_names())}; "
                f"choices: {choices_text()}"
            )
        if self.name == SHUFFLED:
            if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 2:
                raise ValueError(
                    f"variant 'shuffled' needs K >= 2 rotations, got k={self.k!r}; "
                    "write it as shuffled:K, e.g. shuffled:4"
                )
        elif self.k != 1:
            raise ValueError(f"variant {self.name!r} takes no rotation count, got k={self.k!r}")

    @property
    def spec(self) -> str:
        """The spec text that parses back to this variant ("shuffled:3", "blind", "jpeg:30")."""
        if self.perturbation is not None:
            return self.perturbation.spec
        return f"{self.name}:{self.k}" if self.name == SHUFFLED else self.name

    def __str__(self) -> str:
        return self.spec

    @property
    def uses_image(self) -> bool:
        """False only for `blind`, which asks the question without its image."""
        return self.name != BLIND

    def instances(self, n_options: int | None = None) -> list[tuple[str, int]]:
        """(variant name, rotation) pairs to ask for one item with `n_options` options.

        standard -> [("standard", 0)], blind -> [("blind", 0)],
        shuffled:K -> [("shuffled", 0), ..., ("shuffled", min(K, n_options) - 1)].
        Without `n_options` the rotation count is not capped.
        """
        if self.perturbation is not None:
            return [(self.perturbation.spec, 0)]  # records carry the spec: levels stay apart
        if self.name != SHUFFLED:
            return [(self.name, 0)]
        k = self.k
        if n_options is not None:
            if n_options < 1:
                raise ValueError(f"an item needs at least one option, got n_options={n_options}")
            k = min(k, n_options)
        return [(SHUFFLED, r) for r in range(k)]


def _parse_one(token: str, spec: str) -> Variant:
    word = token.strip().casefold()
    m = _SHUFFLED_RE.match(word)
    if m:
        raw_k = m.group(1)
        if raw_k is None or not raw_k.strip().isdigit() or int(raw_k) < 2:
            got = "nothing" if raw_k is None else repr(raw_k)
            raise ValueError(
                f"variant {token.strip()!r} in spec {spec!r}: K must be an integer >= 2 "
                f"(got {got}); write shuffled:K, e.g. shuffled:4; choices: {choices_text()}"
            )
        return Variant(SHUFFLED, int(raw_k))
    if word in (STANDARD, BLIND, ABSTAIN):
        return Variant(word)
    if is_kind(word):
        try:
            p = parse_perturbation(word)
        except PerturbationError as exc:
            raise ValueError(f"variant {token.strip()!r} in spec {spec!r}: {exc}") from None
        return Variant(p.kind, perturbation=p)
    head = word.split(":", 1)[0]
    if head in (STANDARD, BLIND, ABSTAIN):
        raise ValueError(
            f"variant {token.strip()!r} in spec {spec!r}: {head!r} takes no ':K' suffix; "
            f"choices: {choices_text()}"
        )
    hint = did_you_mean(head, variant_names())
    raise ValueError(
        f"unknown variant {token.strip()!r} in spec {spec!r}{hint}; choices: {choices_text()}"
    )


def parse_variants(spec: str | Variant | Iterable[str | Variant]) -> tuple[Variant, ...]:
    """Parse "standard,blind,shuffled:3" (or an iterable of such strings or Variants).

    Names are case-insensitive and surrounding spaces are ignored. An empty spec, an
    unknown name, a bad K or a variant named twice is a ValueError naming the spec and
    the choices. Order is kept: it is the order the runner asks in.
    """
    if isinstance(spec, Variant):
        return (spec,)
    if isinstance(spec, str):
        parts: list[str | Variant] = [p for p in spec.split(",")]
        shown = spec
    else:
        items = list(spec)
        parts = []
        for it in items:
            parts.extend(it.split(",") if isinstance(it, str) else [it])
        shown = ",".join(str(it) for it in items)
    out: list[Variant] = []
    seen: dict[str, str] = {}
    for part in parts:
        if isinstance(part, Variant):
            v = part
        elif not part.strip():
            raise ValueError(
                f"empty variant in spec {shown!r}; write a comma-separated list of: {choices_text()}"
            )
        else:
            v = _parse_one(part, shown)
        # A perturbation kind may come at several levels; the same level twice is a mistake.
        name = v.spec if v.perturbation is not None else v.name
        if name in seen:
            raise ValueError(
                f"variant {name!r} appears twice in spec {shown!r} ({seen[name]!r} and "
                f"{v.spec!r}); name each variant once"
            )
        seen[name] = v.spec
        out.append(v)
    if not out:
        raise ValueError(f"no variant in spec {shown!r}; choices: {choices_text()}")
    return tuple(out)


def rotate(options: Sequence[str], answer: int, r: int) -> tuple[tuple[str, ...], int]:
    """Cyclically shift `options` left by `r`; return (rotated options, new answer index).

    The option at position r comes first: rotate(("a", "b", "c"), 0, 1) ==
    (("b", "c", "a"), 2). r may be any integer (taken modulo the option count).
    """
    n = len(options)
    if n == 0:
        raise ValueError("cannot rotate an empty option list")
    if not 0 <= answer < n:
        raise ValueError(f"answer index {answer} is outside the {n} options")
    s = r % n
    rotated = tuple(options[s:]) + tuple(options[:s])
    return rotated, (answer - s) % n


def original_index(shown: int, r: int, n_options: int) -> int:
    """The cube-order index of the option shown at position `shown` under rotation `r`."""
    if not 0 <= shown < n_options:
        raise ValueError(f"position {shown} is outside the {n_options} options")
    return (shown + r) % n_options


def with_abstention(options: Sequence[str]) -> tuple[str, ...]:
    """The options of the `abstain` variant: as given, then `ABSTAIN_OPTION` last (the
    correct answer's index is unchanged). An item that already offers it keeps one copy
    only in the sense that the added one is the one graded as a deferral."""
    return (*options, ABSTAIN_OPTION)
