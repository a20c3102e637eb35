"""From pictures to the cube on disk: lesions drawn, facts chosen, records written with
balanced answer letters, PNG files encoded without metadata, README.md and NOTICE rendered.

Determinism: pictures are processed in recipe order, every random draw is seeded from the
picture's dataset and stem, and the PNG encoder writes no time or text chunk, so the same
installed packages always give the same bytes.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medrcube.construction import imageio
from medrcube.construction.mini import docs as mini_docs
from medrcube.construction.mini.common import MAX_SIDE, SEED, Picture
from medrcube.construction.mini.placement import draw_lesion, lesion_plan, split_presence
from medrcube.construction.stages import unleak
from medrcube.construction.stages.questions import Fact, ItemWriter, lesion_facts, stable_seed
from medrcube.taxonomy import TASK_NAMES, Level, task_abbrev, task_level

Cell = tuple[str, str, str]


@dataclass
class BuildReport:
    out_dir: Path
    items: int = 0
    images: int = 0
    bytes: int = 0
    per_task: Counter[str] = field(default_factory=Counter)
    per_modality: Counter[str] = field(default_factory=Counter)
    per_part: Counter[str] = field(default_factory=Counter)
    cells: Counter[Cell] = field(default_factory=Counter)
    chains: int = 0

    def cells_with(self, n: int) -> int:
        """How many (part, modality, task) cells hold at least `n` items."""
        return sum(1 for v in self.cells.values() if v >= n)

    def summary(self) -> str:
        lines = [
            (
                f"mini cube written to {self.out_dir}: {self.items} items, {self.images} images, "
                f"{len(self.cells)} cells ({self.cells_with(24)} with 24 items or more), {self.chains} chains, "
                f"{self.bytes / 1e6:.2f} MB"
            ),
            "per task: " + ", ".join(f"{k} {v}" for k, v in sorted(self.per_task.items())),
            "per modality: " + ", ".join(f"{k} {v}" for k, v in sorted(self.per_modality.items())),
            "per part: " + ", ".join(f"{k} {v}" for k, v in sorted(self.per_part.items())),
        ]
        return "\n".join(lines)


def prepare_out(out: Path) -> None:
    """Empty `out` if it is a previous build (or empty); refuse anything else."""
    if out.exists():
        if not out.is_dir():
            raise SystemExit(f"{out}: exists and is not a directory")
        entries = list(out.iterdir())
        readme = out / "README.md"
        ours = readme.is_file() and readme.read_text(encoding="utf-8").startswith(mini_docs.README_TITLE)
        if entries and not ours:
            raise SystemExit(f"{out}: not empty and not a previous mini-cube build; choose an empty or new directory")
        shutil.rmtree(out)
    out.mkdir(parents=True)


def choose_facts(pic: Picture, lesion_meta: dict[str, Any] | None, views_asked: set[tuple[str, str, str]]) -> list[Fact]:
    """The facts asked of one output image, in taxonomy order; checks that they form a chain."""
    high = [f for f in lesion_facts(lesion_meta) if f.task in pic.lesion_tasks] if (pic.lesion or pic.normal_ok) else []
    # A view is asked once per source slice: copies of one slice differ only by a
    # lesion, and repeating "axial" on each would flood the View Recognition cells.
    view_key = (pic.dataset, pic.source.relpath, pic.locator)
    facts = [f for f in pic.facts if f.task != "View Recognition" or view_key not in views_asked] + high
    if any(f.task == "View Recognition" for f in pic.facts):
        views_asked.add(view_key)
    levels = {task_level(f.task) for f in facts}
    if Level.HIGH not in levels or not levels & {Level.LOW, Level.MID}:
        raise RuntimeError(f"{pic.dataset}/{pic.stem}: an image needs a low/mid-level and a high-level item (chain)")
    return sorted(facts, key=lambda f: TASK_NAMES.index(f.task))


def read_pictures(recipe: Sequence[Callable[[], list[Picture]]]) -> list[Picture]:
    """Every picture of the recipe, with stems unique per dataset (they seed the lesions)."""
    pictures = split_presence(p for make in recipe for p in make())
    stems = Counter((p.dataset, p.stem) for p in pictures)
    repeated = sorted(k for k, n in stems.items() if n > 1)
    if repeated:
        raise RuntimeError(f"picture stems repeat within a dataset: {repeated[:5]}")
    return pictures


# The most one answer may be of its task's items (items of the most frequent answer are
# dropped from images that keep a chain without them): at 0.30, an "always name the usual
# answer" model stays below chance + 0.10 on every four-option task (not lower: Modality
# Recognition has three common answers and a rare one, X-ray).
ANSWER_SHARE_CAP = 0.34
CAPPED_TASKS: tuple[str, ...] = ("Modality Recognition", "View Recognition", "Imaging Protocol Recognition", "Organ Recognition")


@dataclass
class _Image:
    pic: Picture
    name: str
    pixels: np.ndarray
    lesion: dict[str, Any] | None
    drafts: list[unleak.Draft]


def _draft_images(pictures: Sequence[Picture]) -> list[_Image]:
    """Lesions drawn and facts chosen for every picture, in recipe order (no file written yet)."""
    plan, numbers = lesion_plan(), Counter[str]()
    views_asked: set[tuple[str, str, str]] = set()
    out = []
    for pic in pictures:
        numbers[pic.dataset] += 1
        name = f"{numbers[pic.dataset]:03d}"  # numbered files hint at no answer
        pixels, lesion_meta = draw_lesion(pic, plan, np.random.default_rng(stable_seed(SEED, pic.dataset, pic.stem)))
        if max(pixels.shape[:2]) > MAX_SIDE:
            raise RuntimeError(f"{pic.dataset}/{pic.stem}: {pixels.shape[1]}x{pixels.shape[0]} exceeds {MAX_SIDE} px")
        image = f"{pic.dataset}/{name}"
        drafts = [unleak.Draft(f"{pic.dataset}-{name}-{task_abbrev(f.task)}", image, pic.part, f, pic.modality)
                  for f in choose_facts(pic, lesion_meta, views_asked)]  # fmt: skip
        out.append(_Image(pic, name, pixels, lesion_meta, drafts))
    return out


def write_cube(pictures: Sequence[Picture], out_dir: str | Path) -> BuildReport:
    """Write the pictures as a release-layout cube into `out_dir` (replacing a previous build)."""
    out = Path(out_dir)
    prepare_out(out)
    writer, report = ItemWriter(), BuildReport(out)
    images = _draft_images(pictures)
    drafts = unleak.one_perception_item([d for im in images for d in im.drafts], SEED, CAPPED_TASKS)
    kept = unleak.cap_shares(drafts, ANSWER_SHARE_CAP, SEED, CAPPED_TASKS)
    unleak.draw_options(kept, SEED)
    unleak.assign_letters(kept, SEED)
    kept_ids = {d.item_id for d in kept}
    records: dict[str, list[dict[str, Any]]] = {}
    rows: dict[str, list[dict[str, Any]]] = {}
    for im in images:
        pic, lesion_meta = im.pic, im.lesion
        rel = f"images/{im.name}.png"
        (out / pic.dataset / "images").mkdir(parents=True, exist_ok=True)
        report.bytes += imageio.write_png(out / pic.dataset / rel, imageio.to_uint8(im.pixels))
        report.images += 1
        report.chains += 1
        source_meta = {"package": pic.source.distribution, "file": f"{pic.source.module}/{pic.source.relpath}", "where": pic.locator}
        answers = []
        for draft in (d for d in im.drafts if d.item_id in kept_ids):
            fact = draft.fact
            meta: dict[str, Any] = {"source": source_meta, "synthetic_image": lesion_meta is not None}
            if fact.synthetic and lesion_meta is not None:
                meta["lesion"] = lesion_meta
            rec = writer.record(
                fact, item_id=draft.item_id, dataset=pic.dataset, image_path=rel, modality=pic.modality,
                part=pic.part, meta=meta, arranged=unleak.arranged(draft, SEED),
            )  # fmt: skip
            records.setdefault(pic.dataset, []).append(rec)
            answers.append((fact, rec))
            report.items += 1
            report.per_task[fact.task] += 1
            report.per_modality[pic.modality] += 1
            report.per_part[pic.part] += 1
            report.cells[(pic.part, pic.modality, fact.task)] += 1
        rows.setdefault(pic.dataset, []).append({"pic": pic, "rel": rel, "lesion": lesion_meta, "answers": answers})
    for dataset, recs in sorted(records.items()):
        text = json.dumps(recs, indent=1, ensure_ascii=False) + "\n"
        (out / dataset / "test.json").write_text(text, encoding="utf-8")
        report.bytes += len(text.encode("utf-8"))
    readme = mini_docs.render_readme(rows, report)
    (out / "README.md").write_text(readme, encoding="utf-8")
    (out / "NOTICE").write_text(mini_docs.NOTICE, encoding="utf-8")
    report.bytes += len(readme.encode("utf-8")) + len(mini_docs.NOTICE.encode("utf-8"))
    return report
