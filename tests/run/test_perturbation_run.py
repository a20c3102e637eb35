"""Perturbation variants end to end: through the real runner and store, and `medrcube run`.

The simulated model reads the image it is actually sent: it answers from the pixels'
noise level (Immerkaer's estimate of the noise sigma) whether it can "see", and knows
the answers of the cube when it can. So its accuracy falls under strong noise and holds
under mild JPEG and a mild window change, and the gate's robustness and agreement checks
must fail the first and pass the others, on records produced by the real plan, runner and
store.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.gate.checks import build_checks
from medrcube.gate.evaluate import evaluate_gate
from medrcube.gate.thresholds import load_policy
from medrcube.metrics.perturbation import robustness_table
from medrcube.run.runner import run_cube
from medrcube.run.store import ResponseStore
from medrcube.testing.pixel_model import NoiseBlindModel

MINI = Path(__file__).resolve().parents[2] / "fixtures" / "mini"
MARGIN, BOUND = 0.05, 0.9


def _gate(cube, records, variants: str, scopes: str, tmp_path: Path) -> dict[str, str]:
    """The gate's verdicts on its robustness and agreement checks, under a policy of these scopes."""
    path = tmp_path / f"robustness-{scopes}.yaml"
    path.write_text(f"version: 1\nrobustness: {{margin: {MARGIN}, min_agreement: {BOUND}, scopes: [{scopes}]}}\n",
                    encoding="utf-8")
    cells = {(it.part, it.modality, it.task) for it in cube.items}
    checks = [c for c in build_checks(cells, load_policy(path), variants=variants)
              if c.kind in ("robustness", "robustness_agreement")]
    return {v.check_id: v.status.value for v in evaluate_gate(checks, records).verdicts}


def test_a_model_hurt_by_noise_fails_there_and_passes_under_jpeg_and_window(tmp_path: Path) -> None:
    cube = load_cube(MINI)
    model = NoiseBlindModel(cube)
    variants = "standard,noise:0.1,jpeg:70,window:0.9"
    with ResponseStore(tmp_path / "store") as store:
        result = run_cube(cube, model, variants=variants, store=store)
    assert result.errors == 0
    table = {r.variant: r for r in robustness_table(result.records)}
    noisy, jpeg, window = table["noise:0.1"], table["jpeg:70"], table["window:0.9"]
    assert noisy.drop.standard_acc == pytest.approx(0.8, abs=0.08)
    assert noisy.drop.perturbed_acc == 0
    for r in (jpeg, window):
        assert r.drop.drop == 0 and r.agreement.estimate == 1.0
        assert r.drop.n == len(cube.items)
        assert r.drop.clusters == len({it.image for it in cube.items})
    verdicts = _gate(cube, result.records, variants, "overall", tmp_path)
    assert (verdicts["robustness/noise:0.1/overall"], verdicts["agreement/noise:0.1/overall"]) == ("fail", "fail")
    for v in ("jpeg:70", "window:0.9"):
        assert (verdicts[f"robustness/{v}/overall"], verdicts[f"agreement/{v}/overall"]) == ("pass", "pass")

    # per modality: the noise never passes, and fails where there is evidence enough; jpeg never fails
    by_modality = _gate(cube, result.records, variants, "modality", tmp_path)
    noise = [s for cid, s in by_modality.items() if cid.startswith("robustness/noise:0.1/modality/")]
    assert noise and "pass" not in noise and noise.count("fail") >= len(noise) // 2, by_modality
    assert all(s != "fail" for cid, s in by_modality.items() if cid.startswith("robustness/jpeg:70/"))

    # the perturbed images are keyed by the bytes sent: a rerun asks nothing again
    asked = model.seen
    with ResponseStore(tmp_path / "store") as store:
        again = run_cube(cube, model, variants=variants, store=store)
    assert model.seen == asked and again.requests_sent == 0
    assert [r.to_dict() | {"cached": False, "latency_s": 0} for r in again.records] == [
        r.to_dict() | {"cached": False, "latency_s": 0} for r in result.records]


def test_perturbed_images_are_made_within_the_models_size_limit() -> None:
    cube = load_cube(MINI)
    model = NoiseBlindModel(cube, image_max_side=96)
    result = run_cube(cube, model, variants="jpeg:30,rotate:5,flip")
    assert result.errors == 0 and result.requests_sent > 0
    assert model.largest_side == 96 and model.modes <= {"L", "RGB"}


def _small_cube(tmp_path: Path, n: int = 6) -> Path:
    """A one-dataset release cube from the mini cube: n items, ROI Grounding among them."""
    src = MINI / "pydicom-ct"
    dst = tmp_path / "cube" / "pydicom-ct"
    shutil.copytree(src / "images", dst / "images")
    records = json.loads((src / "test.json").read_text())
    roi = [r for r in records if r["task"] == "ROI Grounding"][:1]
    keep = roi + [r for r in records if r["task"] != "ROI Grounding"][: n - len(roi)]
    (dst / "test.json").write_text(json.dumps(keep, indent=1))
    return dst.parent


EVERY = "standard,jpeg:30,lowres:256,noise:0.03,poisson:0.05,window:0.8,brightness:0.1,rotate:5,crop:0.9,flip"


def test_a_tiny_hf_model_runs_every_perturbation_through_medrcube_run(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from medrcube.cli import main
    from medrcube.testing.tiny_vlm import build_tiny_vlm

    model = build_tiny_vlm(tmp_path / "tiny")
    cube = _small_cube(tmp_path)
    out = tmp_path / "reports"
    args = ["run", "--model", f"hf:{model}", "--cube", str(cube), "--variant", EVERY, "--out", str(out),
            "--run-id", "r", "--response-store", str(tmp_path / "store"), "--no-progress"]
    assert main(args) == 0
    run_dir = out / "r"
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    by_variant: dict[str, list[dict[str, object]]] = {}
    for row in rows:
        by_variant.setdefault(str(row["variant"]), []).append(row)
    assert set(by_variant) == set(EVERY.split(","))
    assert all(r["outcome"] != "error" for r in rows), [r["error"] for r in rows if r["error"]]
    assert len(by_variant["standard"]) == 6 and len(by_variant["flip"]) == 5  # never the ROI Grounding item
    assert all(r["task"] != "ROI Grounding" for r in by_variant["flip"])
    summary = json.loads((run_dir / "metrics_summary.json").read_text())
    # The tiny model may run to max_new_tokens: such answers are truncated, never graded, and
    # the summary counts exactly the graded ones.
    jpeg = by_variant["jpeg:30"]
    assert len(jpeg) == 6
    assert summary["variants"]["jpeg:30"]["global"]["n"] == sum(r["outcome"] not in ("error", "truncated") for r in jpeg)
    assert "Robustness to image perturbations" in (run_dir / "report.html").read_text()
    # the second run is answered from the store: the perturbed bytes, hence the keys, are the same
    assert main([*args[:-5], "--run-id", "r2", "--response-store", str(tmp_path / "store"), "--no-progress"]) == 0
    run2 = json.loads((out / "r2" / "run.json").read_text())
    assert run2["counts"]["requests_sent"] == 0 and run2["counts"]["cache_hits"] == len(rows)
