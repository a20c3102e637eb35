"""The build recipe: a YAML file saying which sources to read, what their labels mean, which
tasks to derive, how many items per cell, who reviews, and how to export.

The schema is strict: an unknown key, a wrong type or an unknown value is an error that
names the file, the key, the value, and the fix (with "did you mean" for near misses).
Paths are relative to the recipe file. `recipes/site-example.yaml` documents every key;
`recipes/mini.yaml` rebuilds the bundled mini cube.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrcube.taxonomy import TASK_NAMES, canonical_task, did_you_mean

SOURCE_KINDS: tuple[str, ...] = ("dicom-folder", "nifti-folder", "images-csv", "package-images")
PACKAGE_BUILDERS: tuple[str, ...] = ("mini",)
LABEL_FIELDS: tuple[str, ...] = (
    "path", "modality", "part", "organ", "view", "protocol", "diagnosis", "abnormality", "severity",
    "box", "box_label", "mask", "mask_label", "burned_in",
)  # fmt: skip
PLANES: tuple[str, ...] = ("axial", "coronal", "sagittal")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RecipeError(ValueError):
    """The recipe cannot be used; the message names the file, the key, the value and the fix."""


@dataclass(frozen=True, slots=True)
class LabelsFile:
    """A CSV of labels: one row per image (images-csv) or per file/folder (dicom, nifti)."""

    file: Path
    key: str  # the column that names the image, relative to the source path
    columns: Mapping[str, str]  # semantic field (LABEL_FIELDS) -> CSV column
    private: tuple[str, ...] = ()  # identifying columns: never read into items, searched for in the export


@dataclass(frozen=True, slots=True)
class SourceSpec:
    kind: str
    dataset: str
    path: Path | None = None
    builder: str | None = None
    modality: str | None = None  # documented modality (for files without one: NIfTI, PNG)
    part: str | None = None
    organ: str | None = None
    labels: LabelsFile | None = None
    slices: int = 1  # dicom: slices per series; nifti: slices per plane
    planes: tuple[str, ...] = PLANES


@dataclass(frozen=True, slots=True)
class SeveritySpec:
    scale: tuple[str, ...]
    values: Mapping[str, str] = field(default_factory=dict)  # raw label -> scale entry


@dataclass(frozen=True, slots=True)
class ReviewSpec:
    model: str
    models_file: Path | None = None
    retries: int = 2
    store: Path | None = None
    allow_remote: bool = False
    on_malformed: str = "hold_out"  # or "keep"
    expert_judgments: Path | None = None
    concurrency: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PrivacySpec:
    burned_in: str = "refuse"  # or "mask"
    mask: tuple[tuple[float, float, float, float], ...] = ()  # fractions of width/height
    text: str = "mask"  # text the OCR finds in any frame: "mask" its regions or "refuse" the frame


@dataclass(frozen=True, slots=True)
class ExportSpec:
    release: str | None = "release"
    hf: str | None = "hf"
    report: str | None = "report"
    max_side: int = 512


@dataclass(frozen=True, slots=True)
class Recipe:
    path: Path
    name: str
    sources: tuple[SourceSpec, ...]
    out: Path | None = None
    tasks: tuple[str, ...] = TASK_NAMES
    diagnosis_values: Mapping[str, str] = field(default_factory=dict)
    severity: SeveritySpec | None = None
    per_cell: int | None = None
    cell_targets: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    seed: str = "medrcube-build-v1"
    options: int = 4
    similar_fraction: float = 0.5
    templates: Mapping[str, str] = field(default_factory=dict)
    review: ReviewSpec | None = None
    privacy: PrivacySpec = PrivacySpec()
    export: ExportSpec = ExportSpec()
    ontology: Path | None = None
    vocabulary: Path | None = None

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def package_only(self) -> bool:
        return any(s.kind == "package-images" for s in self.sources)


# -- reading -------------------------------------------------------------------------------


class _Node:
    """A mapping being read: every key must be consumed or it is reported as unknown."""

    def __init__(self, data: Any, where: str, src: str):
        if not isinstance(data, Mapping):
            raise RecipeError(f"{src}: {where or 'the recipe'} is {type(data).__name__} {_short(data)}; expected a mapping (key: value lines)")
        self.data, self.where, self.src, self.seen = data, where, src, set()

    def key(self, k: str) -> str:
        return f"{self.where}.{k}" if self.where else k

    def fail(self, k: str, value: Any, problem: str, fix: str) -> RecipeError:
        return RecipeError(f"{self.src}: key {self.key(k)!r} {problem} (got {_short(value)}); {fix}")

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

    def node(self, k: str, *, required: bool = False) -> _Node | None:
        v = self.get(k)
        if v is None:
            if required:
                raise RecipeError(f"{self.src}: key {self.key(k)!r} is missing; add it as a mapping")
            return None
        return _Node(v, self.key(k), self.src)

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


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def load_recipe(path: str | Path) -> Recipe:
    """Read and check a recipe file; raises RecipeError naming the key and the fix.

    Read with the project's strict YAML reader (safe, duplicate keys refused).
    """
    from medrcube.yamlconf import YamlFileError, read_yaml_file

    p = Path(path)
    src = str(p)
    try:
        data = read_yaml_file(p, missing_fix="pass the path of a recipe YAML (see recipes/site-example.yaml)")
    except YamlFileError as exc:
        raise RecipeError(f"{src}: recipe {exc.problem}; {exc.fix}") from None
    return parse_recipe(data, p.resolve(), src)


_TOP = ("version", "name", "out", "sources", "tasks", "labels", "targets", "items", "templates", "review", "privacy",
        "export", "ontology", "vocabulary")  # fmt: skip


def parse_recipe(data: Any, path: Path, src: str | None = None) -> Recipe:
    src = src or str(path)
    base = path.parent
    top = _Node(data, "", src)
    version = top.get("version")
    if version != 1:
        raise top.fail("version", version, "must be 1", "write 'version: 1' at the top of the recipe")
    name = top.string("name", required=True, pattern=_NAME, fix="name the cube, e.g. 'name: site-chest'")
    assert name is not None
    out = top.path("out", base)
    raw_sources = top.get("sources")
    if not isinstance(raw_sources, list) or not raw_sources:
        raise top.fail("sources", raw_sources, "must be a non-empty list", "list at least one source, e.g. '- kind: dicom-folder'")
    kinds = [s.get("kind") if isinstance(s, Mapping) else None for s in raw_sources]
    if "package-images" in kinds and len(kinds) > 1:
        raise RecipeError(f"{src}: key 'sources': a package-images source builds a whole cube and cannot be combined with other sources")
    sources = tuple(_source(s, i, base, src, name) for i, s in enumerate(raw_sources))
    datasets = [s.dataset for s in sources]
    dup = sorted({d for d in datasets if datasets.count(d) > 1})
    if dup:
        raise RecipeError(f"{src}: key 'sources': dataset name {dup[0]!r} is used by several sources; give each source its own 'dataset'")
    export = _export(top.node("export"), src)
    if any(s.kind == "package-images" for s in sources):
        for k in ("tasks", "labels", "targets", "items", "templates", "review", "privacy", "ontology", "vocabulary"):
            if top.has(k):
                raise RecipeError(
                    f"{src}: key {k!r} does not apply to a package-images source (its builder fixes items, review "
                    "and privacy itself); remove it"
                )
        top.done(_TOP)
        return Recipe(path=path, name=name, sources=sources, out=out, export=export)

    tasks_raw = top.get("tasks")
    if tasks_raw is None or tasks_raw == "all":
        tasks = TASK_NAMES
    else:
        if isinstance(tasks_raw, str) or not isinstance(tasks_raw, list) or not tasks_raw:
            raise top.fail("tasks", tasks_raw, "must be 'all' or a list of task names", f"list some of: {', '.join(TASK_NAMES)}")
        found = []
        for t in tasks_raw:
            c = canonical_task(str(t))
            if not c.known:
                raise top.fail("tasks", t, f"names an unknown task{did_you_mean(str(t), TASK_NAMES)}", f"use task names or abbreviations: {', '.join(TASK_NAMES)}")
            found.append(c.value)
        tasks = tuple(t for t in TASK_NAMES if t in found)

    diagnosis_values: dict[str, str] = {}
    severity = None
    labels = top.node("labels")
    if labels is not None:
        dx = labels.node("diagnosis")
        if dx is not None:
            diagnosis_values = dx.str_map("values")
            dx.done(("values",))
        sev = labels.node("severity")
        if sev is not None:
            severity = _severity(sev, src)
        labels.done(("diagnosis", "severity"))

    per_cell, cell_targets, seed = None, {}, "medrcube-build-v1"
    targets = top.node("targets")
    if targets is not None:
        per_cell = targets.integer("per_cell", minimum=1)
        cell_targets = {}
        for k, v in targets.str_map("cells").items():
            parts = [x.strip() for x in k.split("/")]
            if len(parts) != 3 or not all(parts):
                raise targets.fail("cells", k, "has a key that is not PART/MODALITY/TASK", "write e.g. 'Chest/X-Ray/Disease Diagnosis: 40'")
            task = canonical_task(parts[2])
            if not task.known:
                raise targets.fail("cells", k, f"names an unknown task{did_you_mean(parts[2], TASK_NAMES)}", f"tasks: {', '.join(TASK_NAMES)}")
            if not v.isdigit() or int(v) < 1:
                raise targets.fail("cells", v, f"gives cell {k!r} a target that is not a positive integer", "write a whole number")
            cell_targets[(parts[0], parts[1], task.value)] = int(v)
        seed = targets.string("seed", default=seed) or seed
        targets.done(("per_cell", "cells", "seed"))

    options, similar_fraction = 4, 0.5
    items = top.node("items")
    if items is not None:
        options = items.integer("options", default=4, minimum=2, maximum=6) or 4
        similar_fraction = items.number("similar_fraction", default=0.5, low=0.0, high=1.0)
        items.done(("options", "similar_fraction"))

    templates = top.str_map("templates")
    if templates:
        from medrcube.construction.stages.templates import TemplateError, check_templates

        try:
            check_templates(templates, f"{src}: key 'templates'")
        except TemplateError as exc:
            raise RecipeError(str(exc)) from None

    review = _review(top.node("review"), base, src) if top.get("review") is not None else None
    privacy = _privacy(top.node("privacy"), src)
    onto = top.path("ontology", base, must_exist="file")
    vocab = top.path("vocabulary", base, must_exist="file")
    top.done(_TOP)
    return Recipe(
        path=path, name=name, sources=sources, out=out, tasks=tasks, diagnosis_values=diagnosis_values, severity=severity,
        per_cell=per_cell, cell_targets=cell_targets, seed=seed, options=options, similar_fraction=similar_fraction,
        templates=templates, review=review, privacy=privacy, export=export, ontology=onto, vocabulary=vocab,
    )  # fmt: skip


_SOURCE_KEYS: dict[str, tuple[str, ...]] = {
    "dicom-folder": ("kind", "dataset", "path", "modality", "part", "organ", "labels", "slices"),
    "nifti-folder": ("kind", "dataset", "path", "modality", "part", "organ", "labels", "slices", "planes"),
    "images-csv": ("kind", "dataset", "path", "modality", "part", "organ", "labels"),
    "package-images": ("kind", "dataset", "builder"),
}


def _source(raw: Any, i: int, base: Path, src: str, name: str) -> SourceSpec:
    n = _Node(raw, f"sources[{i}]", src)
    kind = n.string("kind", required=True, choices=SOURCE_KINDS, fix=f"say which kind of source: {', '.join(SOURCE_KINDS)}")
    assert kind is not None
    dataset = n.string("dataset", default=f"{name}-{i + 1}", pattern=_NAME) or f"{name}-{i + 1}"
    if kind == "package-images":
        builder = n.string("builder", required=True, choices=PACKAGE_BUILDERS, fix=f"name the builder: {', '.join(PACKAGE_BUILDERS)}")
        n.done(_SOURCE_KEYS[kind])
        return SourceSpec(kind=kind, dataset=dataset, builder=builder)
    path = n.path("path", base, required=True, must_exist="dir")
    from medrcube.taxonomy import MODALITIES

    modality = n.string("modality")
    if modality is not None:
        from medrcube.taxonomy import canonical_modality

        c = canonical_modality(modality)
        if not c.known:
            raise n.fail("modality", modality, f"is not a known modality{did_you_mean(modality, MODALITIES)}", f"use one of {', '.join(MODALITIES)}")
        modality = c.value
    part = n.string("part")
    if part is not None:
        from medrcube.taxonomy import canonical_part

        part = canonical_part(part).value
    organ = n.string("organ")
    labels = _labels(n.node("labels"), base, src, kind)
    if kind == "images-csv" and labels is None:
        raise RecipeError(f"{src}: key 'sources[{i}].labels' is missing; an images-csv source needs a labels CSV naming its images (file, key)")
    slices = n.integer("slices", default=1, minimum=1, maximum=64) or 1
    planes = n.str_list("planes", choices=PLANES) if kind == "nifti-folder" else None
    n.done(_SOURCE_KEYS[kind])
    return SourceSpec(
        kind=kind, dataset=dataset, path=path, modality=modality, part=part, organ=organ, labels=labels, slices=slices,
        planes=planes or PLANES,
    )  # fmt: skip


def _labels(n: _Node | None, base: Path, src: str, kind: str) -> LabelsFile | None:
    if n is None:
        return None
    file = n.path("file", base, required=True, must_exist="file")
    key = n.string("key", default="path") or "path"
    cols = n.str_map("columns")
    for semantic in cols:
        if semantic not in LABEL_FIELDS:
            raise n.fail("columns", semantic, f"maps an unknown label field{did_you_mean(semantic, LABEL_FIELDS)}", f"label fields: {', '.join(LABEL_FIELDS)}")
    private = n.str_list("private") or ()
    n.done(("file", "key", "columns", "private"))
    assert file is not None
    import csv

    with open(file, newline="", encoding="utf-8-sig") as f:
        header = next(csv.reader(f), [])
    for col in (key, *cols.values(), *private):
        if col not in header:
            raise RecipeError(f"{src}: key {n.where!r}: column {col!r} is not in {file} (columns: {', '.join(header)}){did_you_mean(col, header)}")
    clash = set(private) & ({key} | set(cols.values()))
    if clash:
        raise RecipeError(f"{src}: key {n.where + '.private'!r}: column {sorted(clash)[0]!r} is also read as a label; a private column is never read")
    return LabelsFile(file=file, key=key, columns={**cols, "path": key}, private=private)


def _severity(n: _Node, src: str) -> SeveritySpec:
    from medrcube.construction.stages.vocabulary import load_vocabulary

    raw = n.get("scale")
    if isinstance(raw, str):
        scales = load_vocabulary().severity_scales
        if raw not in scales:
            raise n.fail("scale", raw, f"is not a bundled scale{did_you_mean(raw, list(scales))}", f"name one of {', '.join(scales)} or list the grades, mildest first")
        scale = scales[raw]
    else:
        scale = n.str_list("scale") or ()
        if len(scale) < 2 or len(set(scale)) != len(scale):
            raise n.fail("scale", raw, "must name a bundled scale or list at least two distinct grades", "e.g. 'scale: three_grade' or 'scale: [Mild, Moderate, Severe]'")
    values = n.str_map("values")
    for raw_value, grade in values.items():
        if grade not in scale:
            raise n.fail("values", grade, f"maps {raw_value!r} to a grade not on the scale{did_you_mean(grade, scale)}", f"grades: {', '.join(scale)}")
    n.done(("scale", "values"))
    return SeveritySpec(scale=tuple(scale), values=values)


def _review(n: _Node | None, base: Path, src: str) -> ReviewSpec | None:
    if n is None:
        return None
    model = n.string("model", required=True, fix="name the reviewer model spec, e.g. 'model: openai:qwen2.5-vl@http://127.0.0.1:8000/v1'")
    assert model is not None
    params = n.get("params") or {}
    if not isinstance(params, Mapping):
        raise n.fail("params", params, "must be a mapping", "write generation parameters, e.g. '{temperature: 0}'")
    spec = ReviewSpec(
        model=model,
        models_file=n.path("models_file", base, must_exist="file"),
        retries=n.integer("retries", default=2, minimum=0, maximum=10) or 0,
        store=n.path("store", base),
        allow_remote=n.boolean("allow_remote", False),
        on_malformed=n.string("on_malformed", default="hold_out", choices=("hold_out", "keep")) or "hold_out",
        expert_judgments=n.path("expert_judgments", base, must_exist="file"),
        concurrency=n.integer("concurrency", minimum=1),
        params=dict(params),
    )
    n.done(("model", "models_file", "retries", "store", "allow_remote", "on_malformed", "expert_judgments", "concurrency", "params"))
    return spec


def _privacy(n: _Node | None, src: str) -> PrivacySpec:
    if n is None:
        return PrivacySpec()
    action = n.string("burned_in", default="refuse", choices=("refuse", "mask")) or "refuse"
    raw = n.get("mask") or []
    boxes = []
    if not isinstance(raw, list):
        raise n.fail("mask", raw, "must be a list of [x0, y0, x1, y1] boxes", "give fractions of the width and height, e.g. [[0, 0, 1, 0.1]]")
    for box in raw:
        ok = isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in box)
        if not ok or not (box[0] < box[2] and box[1] < box[3]):
            raise n.fail("mask", box, "has a box that is not [x0, y0, x1, y1] with 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1",
                         "give fractions of the width and height, e.g. [0, 0, 1, 0.1] for the top tenth")  # fmt: skip
        boxes.append(tuple(float(v) for v in box))
    if action == "mask" and not boxes:
        raise n.fail("mask", raw, "is empty while burned_in is 'mask'", "list the boxes where the scanner writes its text, or use 'burned_in: refuse'")
    text = n.string("text", default="mask", choices=("mask", "refuse")) or "mask"  # what the OCR finds in any frame
    n.done(("burned_in", "mask", "text"))
    return PrivacySpec(burned_in=action, mask=tuple(boxes), text=text)  # type: ignore[arg-type]


def _export(n: _Node | None, src: str) -> ExportSpec:
    if n is None:
        return ExportSpec()
    out: dict[str, Any] = {}
    for k in ("release", "hf", "report"):
        if n.has(k) and n.get(k) is None:
            out[k] = None
        else:
            v = n.string(k, default=getattr(ExportSpec(), k))
            if v is not None and (Path(v).is_absolute() or ".." in Path(v).parts):
                raise n.fail(k, v, "must be a folder inside the output directory", "write a relative name such as 'release', or '.' for the output directory itself")
            out[k] = v
    if out.get("release") is None:
        raise n.fail("release", None, "is empty", "the release layout is always written; give it a folder ('.' for the output directory)")
    out["max_side"] = n.integer("max_side", default=512, minimum=32, maximum=4096)
    n.done(("release", "hf", "report", "max_side"))
    return ExportSpec(**out)
