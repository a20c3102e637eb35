"""The leakage audit (issue 28): a cube built with each leak is flagged, cell, kind and fix;
the bundled mini cube, rebuilt without them, meets the issue's bounds."""

from __future__ import annotations

import io
import json
from collections import Counter
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from medrcube.cli import main as cli_main
from medrcube.cube import audit_model, load_cube
from medrcube.cube.audit import AuditBounds, audit_items
from medrcube.cube.item import Item

MODALITIES = ("CT", "MRI", "Ultrasound", "X-ray radiography")
ORGANS = ("Brain", "Heart", "Chest", "Pelvis")


def _png(path: Path, shade: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", (16, 16), shade).save(path, format="PNG")


def _rec(i: int, task: str, question: str, options: list[str], answer: int, part: str, modality: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"id": f"leaky-{i:03d}-{task[:2]}", "dataset": "leaky", "image_path": f"images/{i:03d}.png",
                           "question": question, "gt_answer": options[answer], "correct_index": "ABCD"[answer],
                           "task": task, "modality": modality, "parts": part, "original_task": "", "restricted": False}  # fmt: skip
    for letter, text in zip("ABCD", options, strict=False):
        rec[f"option_{letter}"] = text
    return rec


def leaky_cube(root: Path) -> Path:
    """120 images, the old construction's leaks on purpose:
    - the protocol question names the modality ("Which MRI sequence..."): sibling_named;
    - the organ item's distractors depend on the answer (Brain always beside Knee, Heart
      beside Thyroid...): options_prior;
    - the location question presupposes the lesion the presence item asks about: sibling_lift;
    - correct letters cycle in lockstep across an image's items: letter_correlation;
    - the presence item's answer is always "A": letter_balance."""
    recs = []
    far = {"Brain": ("Knee", "Hip", "Ankle"), "Heart": ("Thyroid", "Wrist", "Foot"),
           "Chest": ("Elbow", "Hand", "Toe"), "Pelvis": ("Skull", "Jaw", "Neck")}  # fmt: skip
    for i in range(120):
        modality = ("CT", "MRI", "US", "X-Ray")[i % 4]
        mod_text = MODALITIES[i % 4]
        organ = ORGANS[(i // 4) % 4]
        pos = i % 4  # every item of image i gets the same letter: lockstep
        lesion = i % 2 == 0
        _png(root / "leaky" / "images" / f"{i:03d}.png", i)
        recs.append(_rec(i, "Modality Recognition", "Which imaging modality was used to acquire this image?",
                         _place(mod_text, [m for m in MODALITIES if m != mod_text], pos), pos, organ, modality))  # fmt: skip
        recs.append(_rec(i, "Imaging Protocol Recognition", f"Which {mod_text} protocol produced this image?",
                         _place("Standard", ["Contrast", "Dynamic", "Low dose"], pos), pos, organ, modality))  # fmt: skip
        recs.append(_rec(i, "Organ Recognition", "Which body region or organ is imaged?",
                         _place(organ, list(far[organ]), pos), pos, organ, modality))  # fmt: skip
        recs.append(_rec(i, "Abnormality Diagnosis", "Does this image show a focal lesion?",
                         ["Yes", "No"] if lesion else ["No", "Yes"], 0, organ, modality))  # fmt: skip
        if lesion:
            recs.append(_rec(i, "ROI Grounding", "This image contains one focal lesion. In which quadrant does it lie?",
                             _place("Upper left", ["Upper right", "Lower left", "Lower right"], pos), pos, organ, modality))  # fmt: skip
            recs.append(_rec(i, "Severity Grading", "Grade the size of the lesion.",
                             _place("Small", ["Medium", "Large", "Very large"], pos), pos, organ, modality))  # fmt: skip
    (root / "leaky" / "test.json").write_text(json.dumps(recs), encoding="utf-8")
    return root


def _place(answer: str, others: list[str], pos: int) -> list[str]:
    return others[:pos] + [answer] + others[pos:]


def _validate(*argv: str) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = cli_main(["validate", *argv])
    return code, buf.getvalue()


def test_validate_audit_flags_every_leak_with_its_scope_kind_and_fix(tmp_path: Path) -> None:
    cube = leaky_cube(tmp_path / "cube")
    code, text = _validate("--audit", str(cube))
    assert code == 4, text  # a leak and no error
    leaks = [line for line in text.splitlines() if line.startswith("  LEAK ")]
    kinds = Counter(line.split(": ")[1].split(" ")[0] for line in leaks)
    assert kinds["sibling_named"] >= 100, leaks[:5]  # "Which CT protocol..." names the modality item's answer
    assert any("task Organ Recognition: options_prior" in line for line in leaks)
    assert any("task Abnormality Diagnosis: sibling_lift" in line for line in leaks)
    assert any("task Abnormality Diagnosis: letter_balance" in line for line in leaks)
    assert any(line.startswith("  LEAK overall: letter_correlation") for line in leaks)
    assert all(". Fix: " in line for line in leaks)
    named = next(line for line in leaks if "sibling_named" in line)
    assert "item leaky-" in named and "Imaging Protocol Recognition" in named


def test_audit_json_carries_the_figures_and_bounds(tmp_path: Path) -> None:
    cube = leaky_cube(tmp_path / "cube")
    code, text = _validate("--audit", "--json", str(cube))
    doc = json.loads(text)["audit"]
    assert code == 4 and doc["ok"] is False
    org = doc["tasks"]["Organ Recognition"]
    assert org["prior"] > org["chance"] + doc["bounds"]["prior_margin"]
    assert doc["constant_letter_grounding"]["overall"]["A"] > 0.2  # lockstep letters: a constant "A" looks grounded


def test_bounds_decide_what_is_a_leak(tmp_path: Path) -> None:
    items = load_cube(leaky_cube(tmp_path / "cube")).items
    lax = audit_items(items, AuditBounds(prior_margin=1.0, sibling_margin=1.0, length_margin=1.0, letter_band=1.0,
                                         constant_letter_grounding=1.0))  # fmt: skip
    assert {f.kind for f in lax.findings} == {"sibling_named"}  # a named answer has no margin


def half_quadrant_cell(root: Path) -> Path:
    """ROI Grounding in four cells of 100 items; three have every quadrant 25 times, the
    fourth (Lungs/CT, like a slice whose lung fields fill its upper half) only the upper
    two. The task as a whole is nearly balanced (125/125/75/75), so only the cell shows it
    (a fold's model picks the upper quadrant its training folds hold more of, so the cell
    reads about 0.4 rather than 0.5)."""
    recs = []
    cells = [("Brain", "MRI"), ("Heart", "US"), ("Pelvis", "MRI"), ("Lungs", "CT")]
    quadrants = ["Upper left", "Upper right", "Lower left", "Lower right"]
    for c, (part, modality) in enumerate(cells):
        for k in range(100):
            i = 100 * c + k
            answer = quadrants[k % 2] if part == "Lungs" else quadrants[k % 4]
            _png(root / "half" / "images" / f"{i:03d}.png", i % 256)
            recs.append(_rec(i, "ROI Grounding", "This image contains one focal lesion. In which quadrant does it lie?",
                             _place(answer, [q for q in quadrants if q != answer], i % 4), i % 4, part, modality))  # fmt: skip
    (root / "half" / "test.json").write_text(json.dumps([dict(r, dataset="half") for r in recs]), encoding="utf-8")
    return root


def test_a_cell_whose_answers_fill_half_the_options_is_flagged_with_its_cell(tmp_path: Path) -> None:
    code, text = _validate("--audit", str(half_quadrant_cell(tmp_path / "cube")))
    leaks = [line for line in text.splitlines() if line.startswith("  LEAK ")]
    assert code == 4, text
    assert [line.split(":")[0] for line in leaks] == ["  LEAK cell Lungs/CT/ROI Grounding"], leaks
    assert "options_prior" in leaks[0] and "> 0.350" in leaks[0] and ". Fix: balance the answers within the cell" in leaks[0]


def test_an_item_the_text_model_knows_nothing_of_scores_chance_not_a_coin_flip() -> None:
    """A task of one item (the mini cube's Disease Diagnosis): no feature of its options is
    seen in training, its options tie, and the audit counts the expected 1/4, not the 0 or
    1 of the hash that breaks the tie; where training shows the answer, it scores 1."""
    def item(i: int, options: tuple[str, ...], task: str) -> Item:
        return Item(f"i{i}", "d", f"images/{i}.png", "Which?", options, 0, task, "CT", "Brain")

    lone = item(0, ("Alpha", "Bravo", "Delta", "Gamma"), "Disease Diagnosis")  # no longest or shortest
    seen = [item(i, ("Yes", "No"), "Abnormality Diagnosis") for i in range(1, 41)]
    prior = audit_model.cross_validated([lone, *seen], audit_model.option_features)
    assert prior[lone.id] == 0.25
    assert all(prior[it.id] == 1.0 for it in seen)


@pytest.mark.slow
def test_the_bundled_cube_meets_the_issue_bounds() -> None:
    """Issue 28's Done-when on fixtures/mini: no flagged cell or task at all (no answer
    named by a sibling question, letters in the 99% band, no constant letter with a
    grounding above the screening bound), and the options-only prior at most chance + 0.10
    in every task, Disease Diagnosis's single item included."""
    audit = audit_items(load_cube(Path(__file__).resolve().parents[2] / "fixtures" / "mini").items)
    assert audit.ok, [str(f) for f in audit.findings]
    assert not audit.flagged_cells()
    for task, s in audit.tasks.items():
        assert s.prior <= s.chance + 0.10, (task, s)
        assert s.named == 0 and s.sibling <= s.prior + 0.10, (task, s)
    for scope, letters in audit.constant_letter.items():
        if scope != "pairs":
            assert all(g is None or g <= 0.05 for g in letters.values()), (scope, letters)


def test_the_text_models_fit_on_one_blas_thread_and_give_the_thread_back() -> None:
    """The audit's fits hold BLAS to one thread (OpenBLAS's threads cost the audit several
    times its own CPU: benchmarks/RESULTS.md section 24), for its whole cross-validation,
    and the caller's setting is back afterwards."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    seen: list[set[int]] = []

    def features(item: Item, j: int) -> list[str]:
        seen.append(blas_threads())
        return audit_model.option_features(item, j)

    items = [Item(f"i{i}", "d", f"images/{i}.png", "Which?", ("Yes", "No"), i % 2, "Abnormality Diagnosis", "CT", "Brain")
             for i in range(40)]
    with threadpool_limits(limits=2, user_api="blas"):  # a caller that wants two
        before = blas_threads()
        prior = audit_model.cross_validated(items, features)
        after = blas_threads()
    assert len(prior) == 40 and seen and all(s == {1} for s in seen)
    assert after == before
