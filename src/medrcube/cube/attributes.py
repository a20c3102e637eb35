"""Subgroup attributes: what each may hold, how a source's value is read into it, and the
mapping a cube declares from its own columns.

An item's attributes (`medrcube.records.Attributes`) are coarse and non-identifying, each
from a closed vocabulary or a short code, never free text; anything else is "unknown":

- sex: female, male, other (DICOM PatientSex F, M, O);
- age_band: decades "0-9" ... "80-89", and "90+" for every age over 89 (HIPAA safe harbor
  aggregates those ages into one band);
- manufacturer: a vendor of the closed list `MANUFACTURERS` (a header's "GE MEDICAL SYSTEMS"
  is GE, "TOSHIBA" is Canon);
- model, site, protocol: short codes (`CODE_RE`): a site code the hospital chooses, the
  scanner model as the recipe names it, the protocol family of the build's vocabulary.

Where they come from:
- a cube built by `medrcube build` writes them per record (`meta.attributes` in the release
  layout, `attributes` in JSON Lines), and `load_cube` reads them into `Item.attributes`;
- a cube with its own columns (JSON Lines keys, release record keys, dataset columns: all
  kept in `Item.meta` by the loaders) declares a mapping, `attributes.yaml` beside the cube
  (in a directory cube's root, or in the folder of a .jsonl file), or passed to
  `load_cube(..., attributes=...)`:

      sex: {column: patient_sex, values: {W: female}}   # the column, and the cube's own spellings
      age_band: {column: age}                           # years (a number) or a band already
      manufacturer: vendor                              # short form: the column only
      site: {column: hospital, values: {"North Campus": NORTH}}

A value that is not in the vocabulary after its mapping becomes "unknown", with a warning
naming the item, the column and the value (a cube's problem list, as `medrcube validate`
shows it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from medrcube.records import ATTRIBUTE_NAMES, UNKNOWN, Attributes

MAPPING_FILE = "attributes.yaml"

SEXES: tuple[str, ...] = ("female", "male", "other")
AGE_BANDS: tuple[str, ...] = (*(f"{d}-{d + 9}" for d in range(0, 90, 10)), "90+")
MANUFACTURERS: dict[str, tuple[str, ...]] = {  # vocabulary term -> lower-case spellings it matches (substrings)
    "GE": ("ge medical", "ge healthcare", "general electric", "gehc", "ge "),
    "Siemens": ("siemens",),
    "Philips": ("philips",),
    "Canon": ("canon", "toshiba"),
    "Fujifilm": ("fujifilm", "fuji"),
    "Hologic": ("hologic",),
    "Agfa": ("agfa",),
    "Carestream": ("carestream", "kodak"),
    "Konica Minolta": ("konica",),
    "Samsung": ("samsung",),
    "Mindray": ("mindray",),
    "Esaote": ("esaote",),
    "United Imaging": ("united imaging", "uih"),
    "Hitachi": ("hitachi",),
    "Shimadzu": ("shimadzu",),
}
CODE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._+-]{0,31}$")
_SEX_WORDS = {"f": "female", "female": "female", "woman": "female", "w": "female",
              "m": "male", "male": "male", "man": "male", "o": "other", "other": "other"}
_AGE_AS = re.compile(r"^(\d{1,3})\s*([DWMY]?)$")  # DICOM AS ("045Y", "006M") or plain years


class AttributeMappingError(ValueError):
    """A declared attribute mapping cannot be used; the message names the file, key and fix."""


def age_band(years: float | None) -> str:
    """The decade band of an age in years; every age over 89 is "90+"."""
    if years is None or years != years or years < 0:
        return UNKNOWN
    if years >= 90:
        return "90+"
    d = int(years) // 10 * 10
    return f"{d}-{d + 9}"


def age_years(value: Any) -> float | None:
    """Years from a number, or from a DICOM age string ("045Y", "006M", "010W", "003D")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    m = _AGE_AS.match(value.strip().upper())
    if not m:
        return None
    n = float(m.group(1))
    return n / {"": 1.0, "Y": 1.0, "M": 12.0, "W": 52.18, "D": 365.25}[m.group(2)]


def manufacturer(value: Any) -> str:
    """The vocabulary's vendor for a header's Manufacturer, else unknown."""
    if not isinstance(value, str) or not value.strip():
        return UNKNOWN
    text = " ".join(value.lower().replace("_", " ").split()) + " "
    for term, spellings in MANUFACTURERS.items():
        if text.strip() == term.lower() or any(s in text for s in spellings):
            return term
    return UNKNOWN


def normalise(name: str, value: Any) -> str:
    """The vocabulary's value of attribute `name` for a source value (unknown if none)."""
    if value is None:
        return UNKNOWN
    if name == "sex":
        return _SEX_WORDS.get(str(value).strip().lower(), UNKNOWN)
    if name == "age_band":
        if isinstance(value, str) and value.strip() in AGE_BANDS:
            return value.strip()
        return age_band(age_years(value))
    if name == "manufacturer":
        return manufacturer(value)
    if isinstance(value, bool) or not isinstance(value, str | int):
        return UNKNOWN
    text = str(value).strip()
    if name == "protocol":
        text = text.lower()
    return text if CODE_RE.match(text) else UNKNOWN


def valid(name: str, value: str) -> bool:
    """Whether `value` is a value attribute `name` may hold."""
    if value == UNKNOWN:
        return True
    if name == "sex":
        return value in SEXES
    if name == "age_band":
        return value in AGE_BANDS
    if name == "manufacturer":
        return value in MANUFACTURERS
    return bool(CODE_RE.match(value)) and (name != "protocol" or value == value.lower())


@dataclass(frozen=True, slots=True)
class ColumnMap:
    """Where one attribute comes from in a cube's own columns, and its own spellings."""

    column: str
    values: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AttributeMapping:
    """A cube's declared mapping: attribute -> its column (see the module docstring)."""

    columns: Mapping[str, ColumnMap]
    source: str = ""

    def read(self, meta: Mapping[str, Any]) -> tuple[Attributes, list[tuple[str, str, Any]]]:
        """The attributes of one item's columns, and the (attribute, column, value) read as unknown."""
        out: dict[str, str] = {}
        odd: list[tuple[str, str, Any]] = []
        for name, cm in self.columns.items():
            raw = meta.get(cm.column)
            if raw is None:
                continue
            mapped = cm.values.get(str(raw), raw)
            v = normalise(name, mapped)
            if v == UNKNOWN and str(mapped).strip().lower() != UNKNOWN:
                odd.append((name, cm.column, raw))
            out[name] = v
        return Attributes(**out), odd


def parse_mapping(data: Any, source: str) -> AttributeMapping:
    """An AttributeMapping from its YAML/JSON value; errors name the key and the fix."""
    if not isinstance(data, Mapping):
        raise AttributeMappingError(f"{source}: expected a mapping of attribute -> column, found "
                                    f"{type(data).__name__}; e.g. `sex: patient_sex`")
    cols: dict[str, ColumnMap] = {}
    for name, spec in data.items():
        if name not in ATTRIBUTE_NAMES:
            raise AttributeMappingError(f"{source}: key {name!r} is not an attribute; choose from "
                                        f"{', '.join(ATTRIBUTE_NAMES)}")
        if isinstance(spec, str) and spec:
            cols[name] = ColumnMap(spec)
            continue
        if not isinstance(spec, Mapping) or not isinstance(spec.get("column"), str) or not spec["column"]:
            raise AttributeMappingError(f"{source}: {name} is {spec!r}; expected a column name or "
                                        "{column: NAME, values: {CUBE_VALUE: VALUE}}")
        extra = set(spec) - {"column", "values"}
        if extra:
            raise AttributeMappingError(f"{source}: {name} has unknown key(s) {sorted(extra)}; expected column, values")
        values = spec.get("values") or {}
        if not isinstance(values, Mapping):
            raise AttributeMappingError(f"{source}: {name}.values is {values!r}; expected {{CUBE_VALUE: VALUE}}")
        for k, v in values.items():
            if not valid(name, normalise(name, v)) or normalise(name, v) == UNKNOWN and str(v) != UNKNOWN:
                raise AttributeMappingError(f"{source}: {name}.values.{k} maps to {v!r}, not a value {name} may hold"
                                            f"{_choices(name)}")
        cols[name] = ColumnMap(spec["column"], {str(k): str(v) for k, v in values.items()})
    return AttributeMapping(cols, source)


def _choices(name: str) -> str:
    if name == "sex":
        return f" (choose from {', '.join(SEXES)})"
    if name == "age_band":
        return f" (years, or one of {', '.join(AGE_BANDS)})"
    if name == "manufacturer":
        return f" (choose from {', '.join(MANUFACTURERS)})"
    return " (a short code: letters, digits, space . _ + -, at most 32 characters)"


def load_mapping(path: str | os.PathLike[str]) -> AttributeMapping:
    from medrcube.yamlconf import YamlFileError, read_yaml_file

    shown = os.fspath(path)
    try:
        data = read_yaml_file(shown, missing_fix="give the path of the cube's attribute mapping")
    except YamlFileError as exc:
        raise AttributeMappingError(f"cannot read the attribute mapping: {exc}") from None
    return parse_mapping(data, shown)


def sidecar(spec: str) -> str | None:
    """The mapping file beside a cube source, if there is one."""
    folder = spec if os.path.isdir(spec) else os.path.dirname(os.path.abspath(spec)) if os.path.isfile(spec) else None
    if folder is None:
        return None
    path = os.path.join(folder, MAPPING_FILE)
    return path if os.path.isfile(path) else None


def stated(raw: Any) -> tuple[Attributes | None, list[tuple[str, Any]]]:
    """Attributes a record states itself (`attributes` object), and the values refused."""
    if not isinstance(raw, Mapping):
        return None, [("attributes", raw)]
    out: dict[str, str] = {}
    odd: list[tuple[str, Any]] = []
    for k, v in raw.items():
        if k not in ATTRIBUTE_NAMES:
            odd.append((str(k), v))
            continue
        n = normalise(k, v)
        if n == UNKNOWN and str(v) != UNKNOWN or not valid(k, n):
            odd.append((k, v))
            n = UNKNOWN
        out[k] = n
    return Attributes(**out), odd


def attach(items: Iterable[Any], mapping: AttributeMapping | None, source: str) -> tuple[list[Any], list[Any]]:
    """The items with their attributes read (an `attributes` object kept in meta by the
    loaders, else the mapping's columns), and warnings (cube Problems) for values read as
    unknown. Items are returned unchanged when neither applies."""
    from medrcube.cube.item import Problem

    out: list[Any] = []
    problems: list[Any] = []
    for it in items:
        raw = it.meta.get("attributes") if it.attributes is None else None
        if raw is not None:
            attrs, odd = stated(raw)
            meta = {k: v for k, v in it.meta.items() if k != "attributes"}
            for key, value in odd:
                problems.append(Problem(source, it.id, f"attributes.{key}", f"attribute {key} = {value!r} is not in "
                                        f"the vocabulary{_choices(key) if key in ATTRIBUTE_NAMES else ''}; read as "
                                        "unknown", "unknown_attribute", severity="warning"))
            out.append(replace(it, attributes=attrs, meta=meta))
        elif it.attributes is None and mapping is not None:
            attrs, odd2 = mapping.read(it.meta)
            for name, column, value in odd2:
                problems.append(Problem(source, it.id, column, f"column {column!r} = {value!r} maps to no {name}"
                                        f"{_choices(name)}; read as unknown (add it to `{name}.values` in "
                                        f"{mapping.source or MAPPING_FILE})", "unknown_attribute", severity="warning"))
            out.append(replace(it, attributes=attrs))
        elif "attributes" in it.meta:  # `attributes: null`: no attributes stated, as when the key is absent
            out.append(replace(it, meta={k: v for k, v in it.meta.items() if k != "attributes"}))
        else:
            out.append(it)
    return out, problems


def strata(items: Iterable[Any]) -> dict[str, dict[str, int]]:
    """Images per value of each attribute over the items that have attributes (an image
    counted once per value, its first item's)."""
    seen: dict[str, Any] = {}
    for it in items:
        if it.attributes is not None:
            seen.setdefault(it.image or f"item:{it.id}", it.attributes)
    out: dict[str, dict[str, int]] = {}
    for attrs in seen.values():
        for name in ATTRIBUTE_NAMES:
            v = attrs.get(name)
            out.setdefault(name, {})
            out[name][v] = out[name].get(v, 0) + 1
    return out
