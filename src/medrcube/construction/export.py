"""Export: the release layout (`<dataset>/test.json` + `<dataset>/images/*.png`) and a Hugging
Face dataset (`save_to_disk`), the same items in both.

Answer letters are assigned here, after sampling and review, by `questions.ItemWriter`:
for each task and number of options the correct letter cycles A, B, C, D..., so every
letter is correct equally often (up to one) in the exported cube. Records are written in
a fixed order (dataset, image number, task order), so a rebuild writes the same bytes.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrcube.construction.stages.production import Draft, OutImage
from medrcube.construction.stages.questions import ItemWriter
from medrcube.taxonomy import TASK_NAMES


@dataclass
class ReleaseInfo:
    root: Path
    items: int = 0
    images: int = 0
    bytes: int = 0
    per_dataset: Counter[str] = field(default_factory=Counter)
    letters: Counter[tuple[str, int, str]] = field(default_factory=Counter)  # (task, n options, letter) -> items


def _order(d: Draft) -> tuple[str, str, str, int, str]:
    return (d.dataset, d.chain, d.image, TASK_NAMES.index(d.fact.task) if d.fact.task in TASK_NAMES else 99, d.id)


def write_release(root: Path, drafts: Sequence[Draft], images: Mapping[tuple[str, str], OutImage], *, options: int,
                  item_meta: Mapping[str, Mapping[str, Any]] | None = None) -> ReleaseInfo:  # fmt: skip
    """Write the chosen drafts and their images in the release layout under `root`."""
    writer = ItemWriter(max_options=options)
    info = ReleaseInfo(root)
    records: dict[str, list[dict[str, Any]]] = {}
    written: set[tuple[str, str]] = set()
    for d in sorted(drafts, key=_order):
        img = images[(d.dataset, d.image)]
        if (d.dataset, d.image) not in written:
            path = root / d.dataset / d.image
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(img.png)
            written.add((d.dataset, d.image))
            info.images += 1
            info.bytes += len(img.png)
        meta = {**(item_meta or {}).get(d.id, {})}
        rec = writer.record(d.fact, item_id=d.id, dataset=d.dataset, image_path=d.image, modality=d.modality, part=d.part, meta=meta)
        records.setdefault(d.dataset, []).append(rec)
        n_opts = sum(1 for k in rec if k.startswith("option_"))
        info.letters[(d.fact.task, n_opts, rec["correct_index"])] += 1
        info.items += 1
        info.per_dataset[d.dataset] += 1
    for dataset, recs in sorted(records.items()):
        text = json.dumps(recs, indent=1, ensure_ascii=False) + "\n"
        (root / dataset / "test.json").write_text(text, encoding="utf-8")
        info.bytes += len(text.encode("utf-8"))
    return info


def write_hf(release_root: Path, hf_dir: Path) -> int:
    """The release directory as a `datasets` save_to_disk directory; returns its row count.

    Goes through the cube loader (strict), so the HF export holds exactly the items a
    user of the release directory would load.
    """
    import datasets

    from medrcube.cube import load_cube
    from medrcube.cube.hf import to_hf_dataset

    cube = load_cube(release_root, strict=True)
    ds = to_hf_dataset(cube)
    quiet = datasets.is_progress_bar_enabled()
    if quiet:  # our own bar says what is happening; datasets' bars would interleave with it
        datasets.disable_progress_bars()
    try:
        ds.save_to_disk(str(hf_dir))
    finally:
        if quiet:
            datasets.enable_progress_bars()
    return len(ds)


README_TEXT = """\
# {name}

A cube in the MedRCube release layout, built by `medrcube build` from a site's own
images: `<dataset>/test.json` (records `id, dataset, image_path, question, option_A..,
gt_answer, correct_index, task, modality, parts, original_task, restricted, meta`) and
`<dataset>/images/*.png`. Load it with `medrcube.cube.load_cube("<this folder>")`, check
it with `medrcube validate <this folder>`.

{counts}

## How answers were derived

Each record's `meta.derivation` quotes its evidence. Modality from the DICOM Modality tag
(or a label or the recipe's documented modality); the plane from ImageOrientationPatient
or a NIfTI affine (within 20 degrees of a patient axis: oblique slices get no item); the
projection from ViewPosition or a label; MRI weighting from the sequence parameters
(diffusion b-value; inversion time; TR and TE of spin echoes) and sequence names, CT
protocol from ImageType or a contrast agent, the ultrasound mode from the ImageType bitmap
(conflicting evidence gives no item); the organ from BodyPartExamined, a label or the
recipe; diagnoses, abnormalities, severities and regions from the labels, mapped to the
bundled vocabulary and ontology. Distractors come from the ontology
(`meta.distractor_strategy`: `similar`, clinically confusable; `normal`, same region and
category) or from the task's fixed option set (`pool`); options are mutually exclusive.
Answer letters are balanced per task. ROI items marked `meta.marked_region` show the
region outlined in red.

## Privacy

No DICOM header is exported: images are re-encoded PNG (pixels only). `deid_manifest.json`
lists what was removed from the sources (attribute keywords and counts, never values) and
what was done to pixels with burned-in text; `DEIDENTIFICATION.md` is the profile applied
(DICOM PS3.15 Annex E actions). Every exported file was searched for every identifying
value met in the sources before the build finished.
"""


def release_readme(name: str, per_task: Counter[str], per_cell: int, items: int, images: int, reviewed: str) -> str:
    """The README.md of an exported cube (deterministic: counts only, no date, no path)."""
    lines = [f"{items} items on {images} images in {per_cell} cells; review: {reviewed}.", "", "| task | items |", "|---|---:|"]
    lines += [f"| {t} | {per_task[t]} |" for t in TASK_NAMES if per_task.get(t)]
    return README_TEXT.format(name=name, counts="\n".join(lines))
