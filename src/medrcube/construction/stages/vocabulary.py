"""The vocabulary of Stage I: the bundled (or a site's) table of terms -> the cube's terms.

`vocabulary.yaml` maps the raw values of metadata and label columns (modalities, body
parts, view positions, protocol words, normal/abnormal labels) to canonical names, with
the answer options of the organ and projection questions and the severity scales. This
module parses and checks it; the mapper (mapping.py) looks terms up in it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrcube.construction.stages.ontology import Ontology, norm_term
from medrcube.taxonomy import canonical_modality, canonical_part

BUNDLED_VOCABULARY = Path(__file__).with_name("vocabulary.yaml")


class VocabularyError(ValueError):
    """The vocabulary file breaks its schema; the message names the file and the key."""


@dataclass(frozen=True)
class Vocabulary:
    source: str
    modality: Mapping[str, str]  # norm term -> modality axis value
    body_part: Mapping[str, tuple[str, str]]  # norm term -> (part, organ answer)
    organ_options: Mapping[str, tuple[str, ...]]  # organ answer -> distractors
    view_position: Mapping[str, tuple[str, str]]  # norm term -> (projection set, answer)
    projection_sets: Mapping[str, tuple[str, ...]]
    protocol_terms: Mapping[str, str]  # norm term -> ontology concept id
    normal_labels: frozenset[str]
    abnormal_labels: frozenset[str]
    severity_scales: Mapping[str, tuple[str, ...]]

    def organ(self, raw: str) -> str | None:
        """An organ answer (an organ_options key) from an organ name or a body-part term."""
        for name in self.organ_options:
            if norm_term(name) == norm_term(raw):
                return name
        hit = self.body_part.get(norm_term(raw))
        return hit[1] if hit else None


def term_key(term: Any) -> str:
    return norm_term(str(term))


def parse_vocabulary(data: Any, src: str) -> Vocabulary:
    if not isinstance(data, Mapping):
        raise VocabularyError(f"{src}: expected a mapping of tables")
    need = ("modality", "body_part", "organ_options", "view_position", "projection_sets", "protocol_terms",
            "normal_labels", "abnormal_labels", "severity_scales")  # fmt: skip
    for k in need:
        if k not in data:
            raise VocabularyError(f"{src}: table {k!r} is missing")
    organ_options = {str(k): tuple(str(x) for x in v) for k, v in data["organ_options"].items()}
    body = {}
    for term, entry in data["body_part"].items():
        if not isinstance(entry, Mapping) or "part" not in entry or "organ" not in entry:
            raise VocabularyError(f"{src}: body_part {term!r} is {entry!r}; expected {{part: ..., organ: ...}}")
        if entry["organ"] not in organ_options:
            raise VocabularyError(f"{src}: body_part {term!r} names organ {entry['organ']!r}, which has no organ_options entry")
        body[term_key(term)] = (canonical_part(str(entry["part"])).value, str(entry["organ"]))
    sets = {str(k): tuple(str(x) for x in v) for k, v in data["projection_sets"].items()}
    views = {}
    for term, entry in data["view_position"].items():
        if entry.get("set") not in sets or entry.get("answer") not in sets[entry["set"]]:
            raise VocabularyError(f"{src}: view_position {term!r} names {entry!r}, which is not in projection_sets")
        views[term_key(term)] = (str(entry["set"]), str(entry["answer"]))
    modality = {}
    for term, value in data["modality"].items():
        c = canonical_modality(str(value))
        if not c.known:
            raise VocabularyError(f"{src}: modality {term!r} maps to {value!r}, not a canonical modality")
        modality[term_key(term)] = c.value
    return Vocabulary(
        source=src,
        modality=modality,
        body_part=body,
        organ_options=organ_options,
        view_position=views,
        projection_sets=sets,
        protocol_terms={term_key(k): str(v) for k, v in data["protocol_terms"].items()},
        normal_labels=frozenset(term_key(x) for x in data["normal_labels"]),
        abnormal_labels=frozenset(term_key(x) for x in data["abnormal_labels"]),
        severity_scales={str(k): tuple(str(x) for x in v) for k, v in data["severity_scales"].items()},
    )


def load_vocabulary(path: str | Path | None = None) -> Vocabulary:
    """The bundled vocabulary (cached) or the file at `path`."""
    return _bundled_vocabulary() if path is None else _read_vocabulary(Path(path))


@functools.lru_cache(maxsize=1)
def _bundled_vocabulary() -> Vocabulary:
    return _read_vocabulary(BUNDLED_VOCABULARY)


def _read_vocabulary(path: Path) -> Vocabulary:
    from medrcube.yamlconf import YamlFileError, read_yaml_file

    try:
        data = read_yaml_file(path, missing_fix="give the path of a vocabulary file (see the bundled vocabulary.yaml)")
    except YamlFileError as exc:
        raise VocabularyError(f"{path}: vocabulary {exc.problem}; {exc.fix}") from None
    return parse_vocabulary(data, str(path))


def check_vocabulary_against(vocab: Vocabulary, onto: Ontology) -> None:
    """Every protocol term must name an acquisition concept of the ontology."""
    for term, cid in vocab.protocol_terms.items():
        if cid not in onto.concepts or onto.concepts[cid].category not in ("mr_protocol", "ct_protocol", "us_mode"):
            raise VocabularyError(f"{vocab.source}: protocol term {term!r} names {cid!r}, not an acquisition concept of {onto.source}")
