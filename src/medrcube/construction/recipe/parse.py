"""Reading a recipe file: `load_recipe` (the file) and `parse_recipe` (its data), one pass
over the keys that checks each and builds the values of spec.py; the per-source entries
are read by sources.py, each mapping through node.py's strict reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medrcube.construction.recipe.node import Node
from medrcube.construction.recipe.sources import read_source
from medrcube.construction.recipe.spec import (
    ATTRIBUTE_KEYS,
    NAME_RE,
    SITE_RE,
    AttributesSpec,
    AuditSpec,
    ExportSpec,
    PrivacySpec,
    Recipe,
    RecipeError,
    ReviewSpec,
    SeveritySpec,
)
from medrcube.taxonomy import TASK_NAMES, canonical_task, did_you_mean


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
        "export", "ontology", "vocabulary", "audit", "attributes")  # fmt: skip


def parse_recipe(data: Any, path: Path, src: str | None = None) -> Recipe:
    src = src or str(path)
    base = path.parent
    top = Node(data, "", src)
    version = top.get("version")
    if version != 1:
        raise top.fail("version", version, "must be 1", "write 'version: 1' at the top of the recipe")
    name = top.string("name", required=True, pattern=NAME_RE, fix="name the cube, e.g. 'name: site-chest'")
    assert name is not None
    out = top.path("out", base)
    raw_sources = top.get("sources")
    if not isinstance(raw_sources, list) or not raw_sources:
        raise top.fail("sources", raw_sources, "must be a non-empty list", "list at least one source, e.g. '- kind: dicom-folder'")
    kinds = [s.get("kind") if isinstance(s, Mapping) else None for s in raw_sources]
    if "package-images" in kinds and len(kinds) > 1:
        raise RecipeError(f"{src}: key 'sources': a package-images source builds a whole cube and cannot be combined with other sources")
    sources = tuple(read_source(s, i, base, src, name) for i, s in enumerate(raw_sources))
    datasets = [s.dataset for s in sources]
    dup = sorted({d for d in datasets if datasets.count(d) > 1})
    if dup:
        raise RecipeError(f"{src}: key 'sources': dataset name {dup[0]!r} is used by several sources; give each source its own 'dataset'")
    export = read_export(top.node("export"), src)
    audit = read_audit(top.node("audit"))
    if any(s.kind == "package-images" for s in sources):
        for k in ("tasks", "labels", "targets", "items", "templates", "review", "privacy", "ontology", "vocabulary"):
            if top.has(k):
                raise RecipeError(
                    f"{src}: key {k!r} does not apply to a package-images source (its builder fixes items, review "
                    "and privacy itself); remove it"
                )
        top.done(_TOP)
        return Recipe(path=path, name=name, sources=sources, out=out, export=export, audit=audit)

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
            severity = read_severity(sev, src)
        labels.done(("diagnosis", "severity"))

    per_cell, seed = None, "medrcube-build-v1"
    cell_targets: dict[tuple[str, str, str], int] = {}
    targets = top.node("targets")
    if targets is not None:
        per_cell = targets.integer("per_cell", minimum=1)
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

    review = read_review(top.node("review"), base, src) if top.get("review") is not None else None
    privacy = read_privacy(top.node("privacy"), src, base)
    onto = top.path("ontology", base, must_exist="file")
    vocab = top.path("vocabulary", base, must_exist="file")
    attributes = read_attributes(top.node("attributes")) if top.get("attributes") is not None else None
    if attributes is not None:
        from dataclasses import replace

        sources = tuple(replace(s, attributes=attributes) for s in sources)
    top.done(_TOP)
    return Recipe(
        path=path, name=name, sources=sources, out=out, tasks=tasks, diagnosis_values=diagnosis_values, severity=severity,
        per_cell=per_cell, cell_targets=cell_targets, seed=seed, options=options, similar_fraction=similar_fraction,
        templates=templates, review=review, privacy=privacy, export=export, ontology=onto, vocabulary=vocab, audit=audit,
        attributes=attributes,
    )  # fmt: skip


def read_attributes(n: Node | None) -> AttributesSpec | None:
    """The `attributes` section: the subgroup attributes kept per image (keep, site, models)."""
    if n is None:
        return None
    keep = n.str_list("keep", choices=ATTRIBUTE_KEYS) or ATTRIBUTE_KEYS
    site = n.string("site", pattern=SITE_RE, fix="a short code of the site: letters, digits, _ or -, at most 16, "
                    "e.g. 'site: MAIN'")
    models = n.str_map("models")
    from medrcube.cube.attributes import CODE_RE

    for raw, code in models.items():
        if not CODE_RE.match(code):
            raise n.fail("models", code, f"gives model {raw!r} a code that is not a short code",
                         "letters, digits, space . _ + -, at most 32 characters, e.g. 'CT750'")
    n.done(("keep", "site", "models"))
    return AttributesSpec(keep=keep, site=site, models=models)


def read_severity(n: Node, src: str) -> SeveritySpec:
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


def read_review(n: Node | None, base: Path, src: str) -> ReviewSpec | None:
    if n is None:
        return None
    model = n.string("model", required=True, fix="name the reviewer model spec, e.g. 'model: openai:qwen2.5-vl@http://127.0.0.1:8000/v1'")
    assert model is not None
    params = n.get("params") or {}
    if not isinstance(params, Mapping):
        raise n.fail("params", params, "must be a mapping", "write generation parameters, e.g. '{temperature: 0}'")
    from medrcube.models.models_file import ModelsFileError, check_params

    try:  # the same rule as models.yaml's params: JSON carries no NaN, no negative temperature
        check_params(params, src, n.key("params"))
    except ModelsFileError as exc:
        raise RecipeError(str(exc)) from None
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


def read_privacy(n: Node | None, src: str, base: Path | None = None) -> PrivacySpec:
    if n is None:
        return PrivacySpec()
    action = n.string("burned_in", default="refuse", choices=("refuse", "mask")) or "refuse"
    raw = n.get("mask") or []
    boxes: list[tuple[float, float, float, float]] = []
    if not isinstance(raw, list):
        raise n.fail("mask", raw, "must be a list of [x0, y0, x1, y1] boxes", "give fractions of the width and height, e.g. [[0, 0, 1, 0.1]]")
    for box in raw:
        ok = isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in box)
        if not ok or not (box[0] < box[2] and box[1] < box[3]):
            raise n.fail("mask", box, "has a box that is not [x0, y0, x1, y1] with 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1",
                         "give fractions of the width and height, e.g. [0, 0, 1, 0.1] for the top tenth")  # fmt: skip
        x0, y0, x1, y1 = (float(v) for v in box)
        boxes.append((x0, y0, x1, y1))
    if action == "mask" and not boxes:
        raise n.fail("mask", raw, "is empty while burned_in is 'mask'", "list the boxes where the scanner writes its text, or use 'burned_in: refuse'")
    text = n.string("text", default="mask", choices=("mask", "refuse")) or "mask"  # what the OCR finds in any frame
    # Known annotation zones blanked before the OCR reads a frame (privacy/regions.py): the
    # default table, `none`, or a table of the site's own (its content is checked by `prepare`).
    rules = n.string("region_rules", default="default") or "default"
    table, off = None, rules.strip().lower() == "none"
    if rules.strip().lower() not in ("default", "none"):
        table = n.path("region_rules", base if base is not None else Path("."), must_exist="file")
    review_frames = n.integer("review_frames", default=30, minimum=1, maximum=10_000) or 30
    n.done(("burned_in", "mask", "text", "region_rules", "review_frames"))
    return PrivacySpec(burned_in=action, mask=tuple(boxes), text=text, region_rules=table, region_rules_off=off, review_frames=review_frames)


def read_audit(n: Node | None) -> AuditSpec:
    """The `audit:` section: the leakage audit's bounds and what a leak does to the build."""
    if n is None:
        return AuditSpec()
    d = AuditSpec()
    spec = AuditSpec(
        on_leak=n.string("on_leak", default=d.on_leak, choices=("text", "fail", "flag", "off")) or d.on_leak,
        prior_margin=n.number("prior_margin", default=d.prior_margin, low=0.0, high=1.0),
        sibling_margin=n.number("sibling_margin", default=d.sibling_margin, low=0.0, high=1.0),
        length_margin=n.number("length_margin", default=d.length_margin, low=0.0, high=1.0),
        letter_band=n.number("letter_band", default=d.letter_band, low=0.5, high=0.9999),
        constant_letter_grounding=n.number("constant_letter_grounding", default=d.constant_letter_grounding, low=-1.0, high=1.0),
    )
    n.done(("on_leak", "prior_margin", "sibling_margin", "length_margin", "letter_band", "constant_letter_grounding"))
    return spec


def read_export(n: Node | None, src: str) -> ExportSpec:
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
