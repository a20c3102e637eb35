"""Our metrics_summary.json against the MedRCube reference evaluator's scoring.

The reference rule is re-implemented here in a few lines (read from scripts/eval.py of
the authors' repository, not copied): samples whose image file is missing are skipped at
load; the ground-truth letter is the option whose text equals `gt_answer`; a response is
correct when the first standalone letter A-D of the upper-cased response (regex
`\\b([A-D])\\b`) is that letter; groups are keyed `task=...|modality=...|parts=...` with
the record's own spelling of each axis.

Fed the same plain-letter responses (through the reference's own results.json format and
our `replay:` adapter), both must give the same n and correct count in every voxel, slice
and overall. Our keys use the canonical axis names, so the reference keys are mapped
through the taxonomy before comparing.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import defaultdict
from pathlib import Path

from medrcube.cli import main
from medrcube.taxonomy import canonical_modality, canonical_part, canonical_task
from medrcube.testing.gencube import generate_release_cube

_REF_LETTER = re.compile(r"\b([A-D])\b")


def _reference_samples(root: Path) -> list[dict]:
    samples = []
    for test_json in sorted(root.glob("*/test.json")):
        for item in json.loads(test_json.read_text(encoding="utf-8")):
            img = item.get("image_path")
            if img and not os.path.isabs(img):
                img = os.path.normpath(os.path.join(test_json.parent, img))
            if img and not os.path.exists(img):
                continue  # the reference skips samples whose image is missing
            gt = next((L for L in "ABCD" if item.get(f"option_{L}") == item["gt_answer"]), "")
            samples.append({**item, "_gt_letter": gt})
    return samples


def _reference_correct(response: str, gt_letter: str) -> bool:
    m = _REF_LETTER.search(str(response).upper())
    return (m.group(1) if m else "") == gt_letter


def _reference_groups(samples: list[dict], keys: tuple[str, ...]) -> dict[str, dict[str, int]]:
    stats: dict[str, dict[str, int]] = defaultdict(lambda: {"n": 0, "correct": 0})
    for s in samples:
        gid = "|".join(f"{k}={s.get(k)}" for k in keys)
        stats[gid]["n"] += 1
        stats[gid]["correct"] += int(s["correct"])
    return dict(stats)


_CANON = {"task": canonical_task, "modality": canonical_modality, "parts": canonical_part, "dataset": None}


def _canonical_key(gid: str) -> str:
    parts = []
    for piece in gid.split("|"):
        k, _, v = piece.partition("=")
        fn = _CANON[k]
        parts.append(f"{k}={fn(v).value if fn else v}")
    return "|".join(parts)


def _merge(groups: dict[str, dict[str, int]]) -> dict[str, tuple[int, int]]:
    # Two release spellings may map to one canonical name: add their counts.
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for gid, s in groups.items():
        key = _canonical_key(gid)
        out[key][0] += s["n"]
        out[key][1] += s["correct"]
    return {k: (n, c) for k, (n, c) in out.items()}


def _ours(groups: dict[str, dict]) -> dict[str, tuple[int, int]]:
    # A group whose every item is unavailable has n == 0 here (we report it, with its
    # unavailable count); the reference has no such group at all.
    return {k: (g["n"], g["correct"]) for k, g in groups.items() if g["n"] or g["error"]}


def test_per_voxel_counts_match_the_reference_evaluator(tmp_path: Path) -> None:
    cube = generate_release_cube(
        tmp_path / "cube", n_items=300, n_datasets=11, n_images=150, image_size=16, n_base_images=4, seed=11
    )
    samples = _reference_samples(cube)
    assert 0 < len(samples) < 300  # some restricted images are missing, as in the release
    rng = random.Random(5)
    # Plain letters only: upper and lower case, and letters beyond an item's options.
    results = []
    for s in samples:
        response = rng.choice(["A", "B", "C", "D", "a", "b", "c", "d"])
        s["model_response"] = response
        s["correct"] = _reference_correct(response, s["_gt_letter"])
        results.append({"id": s["id"], "model_response": response})
    replay = tmp_path / "results.json"  # the reference evaluator's own output format
    replay.write_text(json.dumps(results), encoding="utf-8")

    rc = main(["run", "--model", f"replay:{replay}", "--cube", str(cube), "--out", str(tmp_path / "reports"),
               "--run-id", "ref", "--no-store", "--no-progress"])
    assert rc == 0
    summary = json.loads((tmp_path / "reports" / "ref" / "metrics_summary.json").read_text(encoding="utf-8"))

    ref_voxels = _merge(_reference_groups(samples, ("task", "modality", "parts")))
    ours = _ours(summary["voxel_results"]["by_task_modality_parts"])
    assert ours == ref_voxels
    assert sum(c for _, c in ours.values()) > 0  # something was correct, something not
    assert sum(n - c for n, c in ours.values()) > 0
    for name, keys in (("by_task", ("task",)), ("by_modality", ("modality",)), ("by_parts", ("parts",)),
                       ("by_dataset", ("dataset",))):
        assert _ours(summary["slice_results"][name]) == _merge(_reference_groups(samples, keys)), name
    n = len(samples)
    assert (summary["global"]["n"], summary["global"]["correct"]) == (n, sum(s["correct"] for s in samples))
    # The restricted items are reported, not graded (the reference drops them silently).
    restricted = sum(len(json.loads(p.read_text())) for p in cube.glob("*/test.json")) - n
    assert summary["global"]["unavailable"] == restricted > 0
