"""The ontology subset that items name and that distractors are chosen from.

A concept (a disease, a radiological finding, an MRI sequence...) has a category, the body
regions where it occurs, an anatomical site, and three relations: `is_a` (a concept is
never a distractor of its ancestor or descendant), `similar` (a similar imaging
phenotype: the "similar" distractor strategy) and `overlaps` (two terms that can describe
the same image: never options of one item). `similar` and `overlaps` are symmetric; the
loader closes them. The bundled file is `ontology.yaml` beside this module; a recipe may
name another file with the same schema.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrcube.taxonomy import did_you_mean

BUNDLED = Path(__file__).with_name("ontology.yaml")
CATEGORIES: tuple[str, ...] = ("disease", "finding", "lesion_class", "mr_protocol", "ct_protocol", "us_mode")
ANY_REGION = "any"
_KEYS = ("id", "name", "synonyms", "category", "regions", "site", "is_a", "similar", "overlaps")
_ID = re.compile(r"^[a-z0-9][a-z0-9_]*$")


class OntologyError(ValueError):
    """The ontology file breaks the schema; the message names the file, the concept and the key."""


def norm_term(text: str) -> str:
    """How labels are matched to names and synonyms: case-, space-, hyphen- and apostrophe-insensitive."""
    t = str(text).replace("'", "").replace("\u2019", "").replace("-", " ").replace("_", " ")
    return " ".join(t.split()).casefold()


@dataclass(frozen=True, slots=True)
class Concept:
    id: str
    name: str
    category: str
    regions: tuple[str, ...]
    site: str
    synonyms: tuple[str, ...] = ()
    is_a: tuple[str, ...] = ()
    similar: frozenset[str] = field(default_factory=frozenset)  # closed under symmetry by the loader
    overlaps: frozenset[str] = field(default_factory=frozenset)

    def in_region(self, region: str) -> bool:
        return ANY_REGION in self.regions or norm_term(region) in {norm_term(r) for r in self.regions}


@dataclass(frozen=True, slots=True)
class Lookup:
    """The result of matching a label to the ontology: a concept, or why there is none."""

    concept: Concept | None
    reason: str = ""  # "no concept named ..." / "ambiguous: ..." when concept is None


class Ontology:
    """Concepts by id with the relations distractors need."""

    def __init__(self, concepts: Iterable[Concept], source: str):
        self.source = source
        self.concepts: dict[str, Concept] = {c.id: c for c in concepts}
        self._terms: dict[str, list[str]] = {}
        for c in self.concepts.values():
            for term in (c.name, *c.synonyms):
                ids = self._terms.setdefault(norm_term(term), [])
                if c.id not in ids:
                    ids.append(c.id)

    def __len__(self) -> int:
        return len(self.concepts)

    def __getitem__(self, cid: str) -> Concept:
        try:
            return self.concepts[cid]
        except KeyError:
            raise KeyError(f"{self.source}: no concept {cid!r}{did_you_mean(cid, list(self.concepts))}") from None

    def lookup(self, term: str, *, region: str | None = None, categories: Iterable[str] | None = None) -> Lookup:
        """The concept a label names (an id, a name or a synonym), restricted to a region and categories.

        Several matches that the region and categories do not separate are ambiguous:
        no concept is guessed.
        """
        raw = str(term).strip()
        ids = [raw] if raw in self.concepts else list(self._terms.get(norm_term(raw), []))
        if not ids:
            return Lookup(None, f"no concept named {raw!r} in {self.source}")
        cats = set(categories) if categories is not None else None
        fits = [
            self.concepts[i] for i in ids
            if (region is None or self.concepts[i].in_region(region)) and (cats is None or self.concepts[i].category in cats)
        ]  # fmt: skip
        if len(fits) == 1:
            return Lookup(fits[0])
        if not fits:
            where = f" in region {region!r}" if region else ""
            kinds = f" of category {'/'.join(sorted(cats))}" if cats else ""
            return Lookup(None, f"{raw!r} names {', '.join(ids)}, none{kinds}{where}")
        return Lookup(None, f"{raw!r} is ambiguous: {', '.join(c.id for c in fits)}")

    @functools.cache  # noqa: B019 - the ontology is immutable and long-lived
    def ancestors(self, cid: str) -> frozenset[str]:
        out: set[str] = set()
        todo = list(self.concepts[cid].is_a)
        while todo:
            p = todo.pop()
            if p not in out:
                out.add(p)
                todo.extend(self.concepts[p].is_a)
        return frozenset(out)

    def related_by_is_a(self, a: str, b: str) -> bool:
        return a in self.ancestors(b) or b in self.ancestors(a)

    def exclusive(self, a: str, b: str) -> bool:
        """Whether two concepts can be options of one item: different, neither an ancestor of
        the other, not overlapping, not sharing a name."""
        if a == b:
            return False
        ca, cb = self.concepts[a], self.concepts[b]
        if norm_term(ca.name) == norm_term(cb.name):
            return False
        return not self.related_by_is_a(a, b) and b not in ca.overlaps and a not in cb.overlaps

    def similar_to(self, cid: str) -> tuple[str, ...]:
        """Similar-phenotype concepts first, then others at the same anatomical site (same category)."""
        c = self.concepts[cid]
        direct = sorted(c.similar)
        site = sorted(
            o.id for o in self.concepts.values()
            if o.id != cid and o.category == c.category and o.site == c.site and o.id not in c.similar
            and o.site != "acquisition"
        )  # fmt: skip
        return tuple(direct + site)

    def same_region(self, cid: str, region: str) -> tuple[str, ...]:
        """Concepts of the same category in `region` (the answer itself excluded), sorted by id."""
        c = self.concepts[cid]
        return tuple(sorted(o.id for o in self.concepts.values() if o.id != cid and o.category == c.category and o.in_region(region)))


# -- loading -------------------------------------------------------------------------------


def _strs(value: Any, where: str, key: str, src: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise OntologyError(f"{src}: {where} key {key!r} is {value!r}; expected a list of strings")
    return tuple(str(v) for v in value)


def parse_ontology(data: Any, src: str) -> Ontology:
    """Check an ontology document (parsed YAML) and build the Ontology."""
    if not isinstance(data, Mapping) or not isinstance(data.get("concepts"), list):
        raise OntologyError(f"{src}: expected a mapping with a 'concepts' list")
    raw: list[dict[str, Any]] = []
    ids: set[str] = set()
    for i, entry in enumerate(data["concepts"]):
        where = f"concept #{i + 1}"
        if not isinstance(entry, Mapping):
            raise OntologyError(f"{src}: {where} is {entry!r}; expected a mapping with keys {', '.join(_KEYS)}")
        cid = entry.get("id")
        if not isinstance(cid, str) or not _ID.match(cid):
            raise OntologyError(f"{src}: {where} has id {cid!r}; expected lower_snake_case letters, digits and '_'")
        where = f"concept {cid!r}"
        if cid in ids:
            raise OntologyError(f"{src}: {where} is defined twice; ids must be unique")
        ids.add(cid)
        for key in entry:
            if key not in _KEYS:
                raise OntologyError(f"{src}: {where} has unknown key {key!r}{did_you_mean(str(key), _KEYS)}; keys: {', '.join(_KEYS)}")
        for key in ("name", "category", "site"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise OntologyError(f"{src}: {where} key {key!r} is {entry.get(key)!r}; expected a non-empty string")
        if entry["category"] not in CATEGORIES:
            raise OntologyError(
                f"{src}: {where} key 'category' is {entry['category']!r}{did_you_mean(entry['category'], CATEGORIES)}; "
                f"expected one of {', '.join(CATEGORIES)}"
            )
        regions = _strs(entry.get("regions"), where, "regions", src)
        if not regions:
            raise OntologyError(f"{src}: {where} key 'regions' is empty; expected the regions (cube parts) it occurs in, or [any]")
        raw.append({**entry, "regions": regions})
    names: dict[tuple[str, str], str] = {}
    for e in raw:
        k = (e["category"], norm_term(e["name"]))
        if k in names:
            raise OntologyError(f"{src}: concepts {names[k]!r} and {e['id']!r} share the name {e['name']!r} in category {e['category']!r}")
        names[k] = e["id"]
    similar: dict[str, set[str]] = {e["id"]: set() for e in raw}
    overlaps: dict[str, set[str]] = {e["id"]: set() for e in raw}
    for e in raw:
        for key, table in (("similar", similar), ("overlaps", overlaps), ("is_a", None)):
            for other in _strs(e.get(key), f"concept {e['id']!r}", key, src):
                if other not in ids:
                    raise OntologyError(f"{src}: concept {e['id']!r} key {key!r} names {other!r}, which is not defined{did_you_mean(other, sorted(ids))}")
                if other == e["id"]:
                    raise OntologyError(f"{src}: concept {e['id']!r} key {key!r} names itself")
                if table is not None:
                    table[e["id"]].add(other)
                    table[other].add(e["id"])
    concepts = [
        Concept(
            id=e["id"], name=e["name"].strip(), category=e["category"], regions=e["regions"], site=e["site"].strip(),
            synonyms=_strs(e.get("synonyms"), f"concept {e['id']!r}", "synonyms", src),
            is_a=_strs(e.get("is_a"), f"concept {e['id']!r}", "is_a", src),
            similar=frozenset(similar[e["id"]]), overlaps=frozenset(overlaps[e["id"]]),
        )  # fmt: skip
        for e in raw
    ]
    onto = Ontology(concepts, src)
    for c in concepts:  # a cycle would make ancestors() loop: find it here, by name
        seen, todo = set(), list(c.is_a)
        while todo:
            p = todo.pop()
            if p == c.id:
                raise OntologyError(f"{src}: concept {c.id!r} is its own ancestor through is_a; remove the cycle")
            if p not in seen:
                seen.add(p)
                todo.extend(onto.concepts[p].is_a)
        for s in c.similar:
            if onto.related_by_is_a(c.id, s):
                raise OntologyError(f"{src}: concepts {c.id!r} and {s!r} are related by is_a and cannot also be 'similar'")
    return onto


def load_ontology(path: str | Path | None = None) -> Ontology:
    """The bundled ontology (cached), or the file at `path`."""
    if path is None:
        return _bundled()
    return _read(Path(path))


@functools.lru_cache(maxsize=1)
def _bundled() -> Ontology:
    return _read(BUNDLED)


def _read(path: Path) -> Ontology:
    from medrcube.yamlconf import YamlFileError, read_yaml_file

    try:
        data = read_yaml_file(path, missing_fix="give the path of an ontology file (see the bundled ontology.yaml)")
    except YamlFileError as exc:
        raise OntologyError(f"{path}: ontology {exc.problem}; {exc.fix}") from None
    return parse_ontology(data, str(path))
