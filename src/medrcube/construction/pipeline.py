"""The construction pipeline: recipe -> sources -> Stage I -> Stage II -> review -> sampling -> export.

    plan = prepare("recipes/site.yaml", out="build/site")   # checks the recipe, builds the reviewer
    print(plan.notice())                                    # says whether anything leaves the machine
    result = run(plan, progress=True)

`prepare` fails before anything is read when the recipe is wrong or when a remote
reviewer was not explicitly allowed (`review.allow_remote: true` or `--allow-remote`).
`run` reads and de-identifies every source, maps it (mapping.Mapper), writes items
(production.Producer), reviews them (review.Reviewer: only the items sampling would
keep, refilling cells from the pool as reviewed items fail), samples a balanced cube
(sampling.select), and exports the release layout, a Hugging Face dataset, the
de-identification manifest and the build report. Last, every byte of every exported file
is searched for every identifying value met in the sources; any hit deletes the export
and fails the build.

A recipe whose source is `package-images` (the bundled mini cube) runs its builder
instead of the generic stages, and writes exactly the builder's files.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medrcube.construction.audit_stage import run_audit
from medrcube.construction.privacy import safeguards as privacy
from medrcube.construction.recipe import Recipe, load_recipe
from medrcube.taxonomy import Level, task_level

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tqdm import tqdm

    from medrcube.construction.mini.assembly import BuildReport as MiniBuildReport
    from medrcube.construction.observation import SourceImage
    from medrcube.construction.privacy.regions import RegionTable
    from medrcube.construction.privacy.textscreen import TextScreen
    from medrcube.construction.readers.tabular import SourceLog
    from medrcube.construction.recipe import PrivacySpec, SourceSpec
    from medrcube.construction.report import BuildReport
    from medrcube.construction.stages.production import Draft
    from medrcube.cube.audit import Audit
    from medrcube.models.base import ModelAdapter

    # A source kind's reader: (source, privacy, manifest, identifying values met so far, log) -> images.
    SourceReader = Callable[[SourceSpec, PrivacySpec, privacy.Manifest, dict[str, str], SourceLog], Iterator[SourceImage]]

MARKER = ".medrcube-build"


class BuildError(RuntimeError):
    """The build cannot go on; the message says why and what to do."""


class PrivacyLeakError(BuildError):
    """An identifying value was found in the export (which has been deleted)."""


@dataclass
class Plan:
    recipe: Recipe
    out: Path
    adapter: ModelAdapter | None = None  # the reviewer, if the recipe has one
    remote: list[str] = field(default_factory=list)  # remote endpoints the reviewer sends to
    local: list[str] = field(default_factory=list)
    store_dir: Path | None = None
    text_screen: TextScreen | None = None  # the pixel text screen; None: the recipe's own

    def notice(self) -> str:
        """What this build sends off the machine (said before it starts)."""
        r = self.recipe
        if r.package_only:
            return f"Nothing leaves this machine: the {r.sources[0].builder} cube is rebuilt from installed packages into {self.out}."
        if self.adapter is None:
            return f"Nothing leaves this machine: no reviewer model in the recipe; the cube is written to {self.out}."
        if self.remote:
            return (
                f"REMOTE REVIEWER: {self.adapter.spec} sends requests to {', '.join(self.remote)}. The de-identified item "
                "texts and exported PNG images (never DICOM headers, source files or label files) WILL leave this machine."
            )
        where = ", ".join(self.local) if self.local else "in this process"
        return f"Nothing leaves this machine: the reviewer {self.adapter.spec} runs locally ({where}); the cube is written to {self.out}."


@dataclass
class BuildResult:
    out: Path
    release: Path
    hf: Path | None
    report_dir: Path | None
    report: BuildReport | MiniBuildReport  # the mini builder writes its own
    review_errors: int = 0
    audit: Audit | None = None  # the leakage audit of the written cube (audit_stage)


def prepare(recipe: Recipe | str | Path, out: str | Path | None = None, *, reviewer: ModelAdapter | None = None, allow_remote: bool = False,
            store_dir: str | Path | None = None) -> Plan:  # fmt: skip
    """Check everything that can be checked before reading a source; build the reviewer.

    `reviewer` (an adapter) replaces the recipe's reviewer model; `store_dir` its
    response store.
    """
    r = recipe if isinstance(recipe, Recipe) else load_recipe(recipe)
    target = Path(out) if out is not None else r.out
    if target is None:
        raise BuildError(f"{r.path}: no output directory; pass --out DIR or set 'out:' in the recipe")
    plan = Plan(r, target)
    if r.package_only:
        if reviewer is not None:
            raise BuildError(f"{r.path}: a package-images recipe is not reviewed (its builder fixes its items); drop --reviewer")
        return plan
    from medrcube.construction.stages.ontology import load_ontology
    from medrcube.construction.stages.vocabulary import check_vocabulary_against, load_vocabulary

    check_vocabulary_against(load_vocabulary(r.vocabulary), load_ontology(r.ontology))
    _region_table(r)  # a wrong region-rule table fails before any source is read
    if reviewer is None and r.review is not None:
        from medrcube.models.registry import ModelSpecError, load_adapter

        try:
            reviewer = load_adapter(r.review.model, models_file=r.review.models_file, concurrency=r.review.concurrency)
        except ModelSpecError as exc:
            raise BuildError(f"{r.path}: key 'review.model': {exc}") from None
    if reviewer is not None:
        from medrcube.construction.stages.review import destinations, is_remote

        dests = destinations(reviewer)
        plan.adapter = reviewer
        plan.remote = [d for d in dests if is_remote(d)]
        plan.local = [d for d in dests if not is_remote(d)]
        allowed = allow_remote or (r.review is not None and r.review.allow_remote)
        if plan.remote and not allowed:
            raise BuildError(
                f"{r.path}: the reviewer {reviewer.spec} is remote ({', '.join(plan.remote)}): item texts and images would leave "
                "this machine. Set 'review.allow_remote: true' in the recipe (or pass --allow-remote) to allow it, or use a "
                "local model (openai:NAME@http://127.0.0.1:PORT/v1, hf:PATH)"
            )
        if store_dir is not None:
            plan.store_dir = Path(store_dir)
        elif r.review is not None and r.review.store is not None:
            plan.store_dir = r.review.store
    return plan


def _bar(enabled: bool, desc: str, unit: str, total: int | None = None) -> tqdm:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=not enabled, dynamic_ncols=True, leave=False)


def _prepare_out(out: Path, keep: AbstractSet[str] = frozenset()) -> None:
    """Empty `out` when it is a previous build (or empty); refuse anything else."""
    if out.exists():
        if not out.is_dir():
            raise BuildError(f"{out}: exists and is not a directory; choose another --out")
        entries = [p for p in out.iterdir() if p.name not in keep]
        if entries and not (out / MARKER).is_file():
            raise BuildError(f"{out}: not empty and not a previous medrcube build; choose an empty or new directory")
        for p in entries:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    out.mkdir(parents=True, exist_ok=True)


def run(plan: Plan, *, progress: bool = False, echo: Callable[[str], None] | None = None) -> BuildResult:
    """Run a prepared build; see the module docstring."""
    echo = echo or (lambda msg: print(msg, file=sys.stderr))
    if plan.recipe.package_only:
        return _run_package(plan)
    return _run_generic(plan, progress, echo)


def build(recipe: Recipe | str | Path, out: str | Path | None = None, **kwargs: Any) -> BuildResult:
    """prepare + run, for callers that need no notice in between."""
    progress = kwargs.pop("progress", False)
    echo = kwargs.pop("echo", None)
    return run(prepare(recipe, out, **kwargs), progress=progress, echo=echo)


# -- package-images: the mini cube -------------------------------------------------------------


def _run_package(plan: Plan) -> BuildResult:
    from medrcube.construction.dicom_attributes import SourceError
    from medrcube.construction.mini import cube as mini
    from medrcube.cube import CubeError, load_cube

    r = plan.recipe
    release = plan.out / (r.export.release or ".")
    # The builder reads every source before it looks at its output directory: check first.
    readme = release / "README.md"
    if release.is_dir() and any(release.iterdir()) and not (
        readme.is_file() and readme.read_text(encoding="utf-8").startswith(mini.mini_docs.README_TITLE)
    ):
        raise BuildError(f"{release}: not empty and not a previous mini-cube build; choose an empty or new directory")
    try:
        report = mini.build(release)
    except SystemExit as exc:  # the builder refuses a directory that is not its own
        raise BuildError(str(exc)) from None
    except SourceError as exc:
        raise BuildError(f"{r.path}: {exc}") from None
    try:
        cube = load_cube(release, strict=True)
    except CubeError as exc:
        raise BuildError(f"the rebuilt cube at {release} does not validate:\n{exc}") from None
    if len(cube) != report.items:
        raise BuildError(f"the rebuilt cube at {release} holds {len(cube)} items; the builder wrote {report.items}")
    hf = None
    if r.export.hf is not None:
        from medrcube.construction.export import write_hf

        hf = plan.out / r.export.hf
        if hf.exists():
            shutil.rmtree(hf)
        write_hf(release, hf)
    return BuildResult(plan.out, release, hf, None, report, audit=run_audit(release, r.audit, None))


# -- the generic pipeline ------------------------------------------------------------------------


def _readers() -> dict[str, SourceReader]:
    from medrcube.construction.readers.dicom_folder import read_dicom_folder
    from medrcube.construction.readers.nifti_folder import read_nifti_folder
    from medrcube.construction.readers.tabular import read_images_csv

    return {"dicom-folder": read_dicom_folder, "nifti-folder": read_nifti_folder, "images-csv": read_images_csv}


def _run_generic(plan: Plan, progress: bool, echo: Callable[[str], None]) -> BuildResult:
    from medrcube.construction import export as exporter
    from medrcube.construction.readers.tabular import SourceDataError, SourceLog
    from medrcube.construction.report import BuildReport
    from medrcube.construction.stages.mapping import Mapper
    from medrcube.construction.stages.ontology import load_ontology
    from medrcube.construction.stages.production import OutImage, Producer
    from medrcube.construction.stages.review import Reviewer, ReviewOutcome, pass_rates
    from medrcube.construction.stages.sampling import select
    from medrcube.construction.stages.templates import check_templates
    from medrcube.construction.stages.vocabulary import load_vocabulary

    r = plan.recipe
    onto, vocab = load_ontology(r.ontology), load_vocabulary(r.vocabulary)
    mapper = Mapper(vocab, onto, tasks=r.tasks, diagnosis_values=r.diagnosis_values,
                    severity_scale=r.severity.scale if r.severity else None, severity_values=r.severity.values if r.severity else None)  # fmt: skip
    producer = Producer(onto, templates_=check_templates(r.templates, str(r.path)), options=r.options,
                        similar_fraction=r.similar_fraction, seed=r.seed, max_side=r.export.max_side)  # fmt: skip
    report = BuildReport(r.name, sources=[{"kind": s.kind, "dataset": s.dataset} for s in r.sources])
    manifest, log = privacy.Manifest(), SourceLog()
    from medrcube.construction.privacy.sourcenames import SourceNames

    names = SourceNames.of(r)  # every source path printed by its coded name
    leaks: dict[str, str] = {}  # identifying value -> where it was read (the leak scan's list)
    text_screen = plan.text_screen if plan.text_screen is not None else _text_screen(r)
    manifest.text = text_screen.log
    images: dict[tuple[str, str], OutImage] = {}
    drafts: list[Draft] = []

    # Stage I and II, image by image (only PNG bytes are kept in memory).
    readers = _readers()
    bar = _bar(progress, "reading sources", "image")
    try:
        for spec in r.sources:
            try:
                for img in readers[spec.kind](spec, r.privacy, manifest, leaks, log):
                    report.images_read += 1
                    bar.update()
                    mapped = mapper.map(img)
                    if mapped is None:
                        continue
                    # Before any item, reviewer or export sees the pixels: text found by OCR is masked (or the frame refused).
                    if not text_screen.screen(mapped.image, mapped.modality):
                        log.note(f"refused: {text_screen.reason}", f"{img.dataset} {img.ref}")
                        continue
                    outs, ds = producer.produce(mapped)
                    if outs:
                        text_screen.log.link(img.dataset, img.ref, _base_image(outs[0].chain))
                    images.update({(o.dataset, o.key): o for o in outs})
                    drafts += ds
            except SourceDataError as exc:
                raise BuildError(names.scrub(str(exc))) from None
    finally:
        bar.close()
    # Free text from the sources is screened for every identifying value read, in every
    # spelling (privacy.screening), before it is printed, reviewed or written.
    from medrcube.construction.privacy.screening import Identities, Redactor

    redactor = Redactor(Identities.of(leaks))
    for m in log.messages:
        echo(f"medrcube build: {redactor.text(names.scrub(m), 'console messages')}")
    report.source_problems = redactor.counter(log.counts, "build report")
    report.mapping = redactor.json(mapper.report.to_dict(), "build report")
    report.not_written, report.neutral_questions = redactor.counter(producer.not_written, "build report"), list(producer.neutral)
    drafts = redactor.drafts(drafts)
    report.drafted = len(drafts)
    for d in drafts:
        report.cell(d.cell).drafted += 1
    if not drafts:
        raise BuildError(f"{r.path}: no item could be written from the sources ({report.images_read} images read); "
                         f"see the mapping report: {json.dumps(report.mapping)[:600]}")  # fmt: skip

    # Review and sampling: review what sampling keeps; refill from the pool as items fail.
    outcomes: dict[str, ReviewOutcome] = {}
    reviewer = None
    store = None
    if plan.adapter is not None:
        if plan.store_dir is not None:
            from medrcube.run.store import ResponseStore

            store = ResponseStore(plan.store_dir)
        reviewer = Reviewer(plan.adapter, retries=r.review.retries if r.review else 2, store=store,
                            params=r.review.params if r.review else None)  # fmt: skip
    keep_malformed = r.review is not None and r.review.on_malformed == "keep"

    def eligible(d: Draft) -> bool:
        o = outcomes.get(d.id)
        return o is None or o.status == "pass" or (o.status == "malformed" and keep_malformed)

    bar = _bar(progress and reviewer is not None, "reviewing", "item")
    try:
        while True:
            selection = select([d for d in drafts if eligible(d)], per_cell=r.per_cell, cell_targets=r.cell_targets, seed=r.seed)
            todo = [d for d in selection.chosen if d.id not in outcomes]
            if reviewer is None or not todo:
                break
            bar.total = (bar.total or 0) + len(todo)
            round_ = reviewer.review(todo, images, on_done=bar.update)
            outcomes.update(round_)
            if all(o.status == "error" for o in round_.values()):
                # A reviewer that answers nothing (down, wrong URL, wrong key) would otherwise be
                # asked every item of the pool in turn.
                first = next(iter(round_.values())).problems
                raise BuildError(f"the reviewer {reviewer.adapter.spec} answered none of {len(round_)} item(s) "
                                 f"({first[-1] if first else 'no response'}); nothing was exported")  # fmt: skip
    finally:
        bar.close()
        if store is not None:
            store.close()
    chosen = selection.chosen
    if not chosen:
        raise BuildError(f"{r.path}: no item is left after review and sampling ({len(drafts)} drafted, "
                         f"{len(outcomes)} reviewed); see the review verdicts of the reviewer")  # fmt: skip
    by_id = {d.id: d for d in drafts}
    held = [o for o in outcomes.values() if not eligible(by_id[o.item_id])]
    for o in held:
        for reason in o.reasons():
            report.held_out[_reason_key(reason)] += 1
        report.cell(by_id[o.item_id].cell).held_out += 1
    if reviewer is not None:
        report.review = pass_rates(list(outcomes.values()))
        report.reviewer = reviewer.adapter.spec
    report.surplus = selection.surplus
    for cell, n in selection.counts.items():
        report.cell(cell).selected = n
    for cell, t in selection.targets.items():
        report.cell(cell).target = t
    for cell, n in selection.chain_extras.items():
        report.cell(cell).chain_extras = n
    report.distractor_strategies = Counter(d.strategy for d in chosen)
    report.chains = _chains(chosen)

    # Export.
    out = plan.out
    _prepare_out(out)
    release = out / (r.export.release or "release")
    release.mkdir(parents=True, exist_ok=True)
    item_meta = {
        d.id: {"review": outcomes[d.id].status if d.id in outcomes else "not reviewed"} for d in chosen
    }
    info = exporter.write_release(release, chosen, images, options=r.options, item_meta=item_meta)
    from medrcube.construction.privacy import coarse  # the kept subgroup attributes, in the manifest
    manifest.subgroups = coarse.manifest_section(r.attributes, coarse.counts(chosen))
    report.exported_items, report.exported_images = info.items, info.images
    letters: dict[str, dict[str, int]] = {}
    for (task, n, letter), count in sorted(info.letters.items()):
        letters.setdefault(f"{task} ({n} options)", {})[letter] = count
    report.letters = letters
    reviewed = "none (no reviewer in the recipe)" if reviewer is None else f"every item passed the model reviewer {reviewer.adapter.spec}"
    if reviewer is not None and keep_malformed:
        reviewed += " (or returned a malformed verdict, kept by the recipe)"
    (release / "README.md").write_text(
        exporter.release_readme(r.name, Counter(d.fact.task for d in chosen), len(selection.counts), info.items, info.images, reviewed),
        encoding="utf-8",
    )
    text_screen.log.mark_exported({(d.dataset, _base_image(d.chain)) for d in chosen})
    from medrcube.construction.privacy import reviewsheet

    manifest.review = reviewsheet.write_sheet(out, release, text_screen.log.frames, r.seed, r.privacy.review_frames)
    manifest.values_searched = len(leaks)
    manifest.redactions.update(redactor.counts)
    manifest.write(release)
    hf = None
    if r.export.hf is not None:
        hf = out / r.export.hf
        bar = _bar(progress, "writing the Hugging Face dataset", "dataset", total=1)
        exporter.write_hf(release, hf)
        bar.update()
        bar.close()
        manifest.write(hf)
    report_dir = None
    if r.export.report is not None:
        report_dir = out / r.export.report
        report_dir.mkdir(parents=True, exist_ok=True)
        with open(report_dir / "review.jsonl", "w", encoding="utf-8") as f:
            for d in drafts:
                if d.id in outcomes:
                    f.write(json.dumps(redactor.json(outcomes[d.id].to_dict(), "review records"), ensure_ascii=False) + "\n")
        with open(report_dir / "held_out.jsonl", "w", encoding="utf-8") as f:
            for o in sorted(held, key=lambda o: o.item_id):
                d = by_id[o.item_id]
                f.write(json.dumps(redactor.json({"id": d.id, "cell": list(d.cell), "question": d.fact.question, "answer": d.fact.answer,
                                    "distractors": list(d.fact.distractors), "status": o.status, "reasons": o.reasons()},
                                   "review records"), ensure_ascii=False) + "\n")  # fmt: skip
    if r.review is not None and r.review.expert_judgments is not None:
        from medrcube.construction.stages.agreement import (
            AgreementError,
            agreement,
            read_judgments_csv,
        )

        try:
            expert = read_judgments_csv(r.review.expert_judgments)
        except AgreementError as exc:
            raise BuildError(str(exc)) from None
        model = {i: dict(o.verdict.judgments) for i, o in outcomes.items() if o.verdict is not None}
        table = agreement(model, expert)
        report.agreement, report.agreement_markdown = table.to_dict(), table.to_markdown()
    report.privacy = manifest.to_dict(timing=True)
    report.outputs = {"release": str(release), "hf": str(hf) if hf else "", "report": str(report_dir) if report_dir else ""}
    if report_dir is not None:
        report.write(report_dir)
    (out / MARKER).write_text("medrcube build output; `medrcube build` may replace this directory\n", encoding="utf-8")

    # The last word on privacy: search the whole export for every identifying value, in its
    # bytes and text, then in its pixels (OCR over every exported image).
    found = privacy.scan_tree(out, leaks)
    if not found:
        from medrcube.construction.privacy.pixelscan import scan_images

        pixels = scan_images(release, release.rglob("*.png"), Identities.of({**names.values(), **leaks}), text_screen.reader)
        manifest.pixel_scan = {"images_read": pixels.images, "text_regions_read": pixels.regions, "found": len(pixels.leaks)}
        found = list(pixels.leaks)
    if found:
        shutil.rmtree(out)
        where = "; ".join(f"{leak.file} ({leak.source})" for leak in found[:20])
        raise PrivacyLeakError(f"identifying values or legible text found in the export, which has been deleted: {where}; fix the recipe "
                               "(a label column holding identifiers must be listed under labels.private; text left in the pixels "
                               "needs privacy.text: refuse or a region rule, privacy.region_rules)")  # fmt: skip
    manifest.leaks = 0
    rewritten = [release / privacy.MANIFEST_NAME]
    manifest.write(release)
    if hf is not None:
        manifest.write(hf)
        rewritten.append(hf / privacy.MANIFEST_NAME)
    report.privacy = manifest.to_dict(timing=True)
    if report_dir is not None:
        report.write(report_dir)
        rewritten += [report_dir / "build_report.json", report_dir / "build_report.md"]
    if privacy.scan_tree(out, leaks, files=rewritten):  # cannot happen (no values are written); checked all the same
        shutil.rmtree(out)
        raise PrivacyLeakError("identifying values found in the rewritten manifest or report; the export has been deleted")
    errors = sum(1 for o in outcomes.values() if o.status == "error")
    return BuildResult(out, release, hf, report_dir, report, review_errors=errors, audit=run_audit(release, r.audit, report_dir))


def _text_screen(r: Recipe) -> TextScreen:
    """The OCR text screen of a build; a clear BuildError when the OCR model is not installed."""
    from medrcube.construction.privacy.ocr import OcrUnavailable
    from medrcube.construction.privacy.textscreen import TextScreen

    try:
        return TextScreen(r.privacy.text, regions=_region_table(r))
    except OcrUnavailable as exc:
        raise BuildError(f"{r.path}: every frame is read for burned-in text before export, and {exc}") from None


def _region_table(r: Recipe) -> RegionTable:
    """The recipe's region-rule table (privacy.region_rules): the default, none, or the site's own file."""
    from medrcube.construction.privacy.regions import NO_RULES, RegionRuleError, load_table

    if r.privacy.region_rules_off:
        return NO_RULES
    try:
        return load_table(r.privacy.region_rules)
    except RegionRuleError as exc:
        raise BuildError(f"{r.path}: key 'privacy.region_rules': {exc}") from None


def _base_image(chain: str) -> str:
    """The key of the unmarked image of a chain ("demo-dicom/007" -> "images/007.png")."""
    return f"images/{chain.rsplit('/', 1)[-1]}.png"


def _reason_key(reason: str) -> str:
    """A reason for counting: the principle and its name, without the reviewer's free text."""
    if reason.startswith("review:"):
        return reason.rsplit(" (", 1)[0]  # drop the parser's or the adapter's detail
    return reason.split(":", 1)[0]


def _chains(drafts: list[Draft]) -> int:
    levels: dict[str, set[Level | None]] = {}
    for d in drafts:
        levels.setdefault(d.chain, set()).add(task_level(d.fact.task))
    return sum(1 for v in levels.values() if Level.HIGH in v and v & {Level.LOW, Level.MID})
