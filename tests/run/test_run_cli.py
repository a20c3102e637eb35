"""`medrcube run` end to end: the run directory's three files, reruns from the store,
replay of a run, the bundled mini cube, and every way the command refuses to start."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from medrcube.cli import main
from medrcube.records import Outcome
from medrcube.run.store import DB_NAME
from medrcube.rundir.files import default_run_id, read_results
from medrcube.testing.gencube import generate_release_cube

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "fixtures" / "mini"


@pytest.fixture(scope="module")
def cube_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_release_cube(
        tmp_path_factory.mktemp("cli-cube"), n_items=80, n_datasets=5, n_images=40, image_size=16, n_base_images=4, seed=2
    )


def _run(tmp_path: Path, *extra: str, cube: Path | str, model: str = "random", run_id: str = "r") -> int:
    return main(
        ["run", "--model", model, "--cube", str(cube), "--out", str(tmp_path / "reports"), "--run-id", run_id,
         "--response-store", str(tmp_path / "store"), "--no-progress", *extra]
    )


def test_run_writes_the_three_files_and_reruns_from_the_store(
    cube_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(tmp_path, "--variant", "standard,blind,shuffled:2", cube=cube_dir, run_id="first") == 0
    out = capsys.readouterr().out
    run_dir = tmp_path / "reports" / "first"
    assert str(run_dir) in out
    records = read_results(run_dir / "results.jsonl")
    lines = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(records) == len(lines) == 80 * 4
    row = json.loads(lines[0])
    for field in ("id", "task", "modality", "part", "dataset", "image", "variant", "rotation", "prompt_hash",
                  "response", "extracted", "extracted_letter", "how", "outcome", "latency_s", "cached", "error"):
        assert field in row, field

    summary = json.loads((run_dir / "metrics_summary.json").read_text(encoding="utf-8"))
    assert summary["schema_version"] == 1 and summary["variant"] == "standard"
    standard = [r for r in records if r.variant == "standard"]
    graded = [r for r in standard if r.graded]
    assert summary["global"]["n"] == len(graded)
    assert summary["global"]["correct"] == sum(r.correct for r in graded)
    assert summary["global"]["unavailable"] == sum(r.outcome is Outcome.UNAVAILABLE for r in standard) > 0
    lo, hi = summary["global"]["ci95"]
    assert 0 <= lo <= summary["global"]["acc"] <= hi <= 1
    assert set(summary["slice_results"]) == {"by_task", "by_modality", "by_parts", "by_dataset"}
    assert all(k.startswith("task=") for k in summary["slice_results"]["by_task"])
    assert all(k.startswith("parts=") for k in summary["slice_results"]["by_parts"])
    voxel_keys = list(summary["voxel_results"]["by_task_modality_parts"])
    assert all(re.fullmatch(r"task=[^|]+\|modality=[^|]+\|parts=[^|]+", k) for k in voxel_keys)
    # Voxels partition the variant's records.
    voxels = summary["voxel_results"]["by_task_modality_parts"].values()
    assert sum(v["n"] for v in voxels) == len(graded)
    assert set(summary["variants"]) == {"blind", "shuffled"}
    assert summary["variants"]["shuffled"]["global"]["n"] == sum(
        r.graded for r in records if r.variant == "shuffled"
    )

    meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert meta["model_spec"] == "random" and meta["variants"] == ["standard", "blind", "shuffled:2"]
    assert meta["run_id"] == "first" and meta["cube_fingerprint"]
    assert meta["counts"]["requests_sent"] > 0 and meta["counts"]["cache_hits"] == 0
    assert meta["versions"]["python"] and meta["versions"]["medrcube"]
    assert "torch" not in meta["versions"] or meta["versions"]["torch"]

    assert _run(tmp_path, "--variant", "standard,blind,shuffled:2", cube=cube_dir, run_id="second") == 0
    again = json.loads((tmp_path / "reports" / "second" / "run.json").read_text(encoding="utf-8"))
    assert again["counts"]["requests_sent"] == 0
    assert again["counts"]["cache_hits"] == meta["counts"]["asked"]
    assert json.loads((tmp_path / "reports" / "second" / "metrics_summary.json").read_text()) == summary

    # The run replays from its own results.jsonl, with identical grades.
    replay = f"replay:{run_dir / 'results.jsonl'}"
    assert _run(tmp_path, "--variant", "standard,blind,shuffled:2", "--no-store", cube=cube_dir, model=replay,
                run_id="replayed") == 0
    replayed = read_results(tmp_path / "reports" / "replayed" / "results.jsonl")
    assert [(r.item_id, r.variant, r.rotation, r.outcome, r.extracted) for r in replayed] == [
        (r.item_id, r.variant, r.rotation, r.outcome, r.extracted) for r in records
    ]
    assert (tmp_path / "reports" / "replayed" / "metrics_summary.json").exists()


def test_the_bundled_mini_cube_runs_with_random_and_replay(tmp_path: Path) -> None:
    if not (MINI.is_dir() and any(MINI.glob("*/test.json"))):
        pytest.skip("fixtures/mini is not built yet (helper MINI)")
    assert _run(tmp_path, cube=MINI, run_id="mini") == 0
    run_dir = tmp_path / "reports" / "mini"
    assert (run_dir / "results.jsonl").stat().st_size > 0
    summary = json.loads((run_dir / "metrics_summary.json").read_text())
    assert summary["global"]["n"] > 0
    assert _run(tmp_path, cube=MINI, model=f"replay:{run_dir / 'results.jsonl'}", run_id="mini-replay") == 0
    assert json.loads((tmp_path / "reports" / "mini-replay" / "metrics_summary.json").read_text())["global"] == \
        summary["global"]


def test_a_bad_cube_stops_before_anything_is_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-cube"
    assert _run(tmp_path, cube=missing) == 1
    err = capsys.readouterr().err
    assert "cannot load the cube" in err and str(missing) in err
    assert not (tmp_path / "reports").exists()
    assert not (tmp_path / "store").exists()


def test_bad_arguments_are_clear_errors(cube_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path, cube=cube_dir, model="randm:1") == 1
    assert "did you mean" in capsys.readouterr().err
    assert _run(tmp_path, "--variant", "standard,shufled:2", cube=cube_dir) == 1
    assert "shuffled" in capsys.readouterr().err
    assert _run(tmp_path, "--template", "reasonin", cube=cube_dir) == 1
    assert "reasoning" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # a usage error of the option itself (commands/numbers.py)
        _run(tmp_path, "--concurrency", "0", cube=cube_dir)
    assert exc.value.code == 2 and "--concurrency must be at least 1, got 0" in capsys.readouterr().err
    assert _run(tmp_path, cube=cube_dir, run_id="../escape") == 1
    assert not (tmp_path / "reports").exists()


def test_an_unwritable_report_directory_keeps_the_store(
    cube_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "reports"
    blocker.write_text("a file where the reports directory should be")
    assert _run(tmp_path, cube=cube_dir) == 1
    err = capsys.readouterr().err
    assert "cannot write the run directory" in err and "nothing is re-asked" in err
    blocker.unlink()
    assert _run(tmp_path, cube=cube_dir, run_id="after") == 0
    meta = json.loads((tmp_path / "reports" / "after" / "run.json").read_text())
    assert meta["counts"]["requests_sent"] == 0 and meta["counts"]["cache_hits"] > 0


def test_a_damaged_store_is_reported_and_replaced(
    cube_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / DB_NAME).write_bytes(b"garbage, not sqlite" * 50)
    assert _run(tmp_path, cube=cube_dir) == 0
    err = capsys.readouterr().err
    assert "moved aside" in err
    assert list((tmp_path / "store").glob(f"{DB_NAME}.corrupt-*"))
    meta = json.loads((tmp_path / "reports" / "r" / "run.json").read_text())
    assert meta["store_recovered"] and meta["counts"]["requests_sent"] > 0


def test_default_run_id_is_a_timestamp_and_a_slug() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert default_run_id("openai:gpt-5.1@http://127.0.0.1:8000/v1", now) == \
        "20260102T030405Z-openai-gpt-5.1-http-127.0.0.1-8000-v1"
    assert default_run_id("random", now) == "20260102T030405Z-random"
    assert "/" not in default_run_id("hf:/models/x/y")


def test_a_bad_cube_calls_no_model(tmp_path: Path, scripted_server, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cube" / "DS").mkdir(parents=True)
    (tmp_path / "cube" / "DS" / "test.json").write_text("[{not json", encoding="utf-8")
    rc = _run(tmp_path, cube=tmp_path / "cube", model=f"openai:m@{scripted_server.base_url}")
    assert rc == 1
    assert "test.json" in capsys.readouterr().err
    assert scripted_server.stats(log=False)["total"] == 0


def test_a_missing_api_key_is_refused_before_any_request(
    cube_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert _run(tmp_path, cube=cube_dir, model="openai:gpt-test") == 1
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


def test_specs_in_files_carry_no_url_credentials() -> None:
    from medrcube.rundir.files import redact_spec

    spec = "openai:m@https://alice:s3cret@gateway.example/v1"
    assert "s3cret" not in redact_spec(spec) and "alice" not in redact_spec(spec)
    assert redact_spec(spec) == "openai:m@https://[redacted]@gateway.example/v1"
    assert redact_spec("openai:m@http://127.0.0.1:8000/v1") == "openai:m@http://127.0.0.1:8000/v1"
    assert "s3cret" not in default_run_id(spec)


def test_default_run_directories_never_collide(cube_dir: Path, tmp_path: Path) -> None:
    base = ["run", "--model", "random", "--cube", str(cube_dir), "--out", str(tmp_path / "reports"),
            "--response-store", str(tmp_path / "store"), "--no-progress"]
    assert main(base) == 0 and main(base) == 0
    dirs = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert len(dirs) == 2 and all(d.endswith("-random") or d.endswith("-random-2") for d in dirs)


def test_results_jsonl_carries_its_schema_version(tmp_path):
    import json as _json

    import pytest as _pytest

    from medrcube.records import GradedRecord, Outcome
    from medrcube.rundir.files import RESULTS_SCHEMA_VERSION, read_results, result_row

    rec = GradedRecord(
        item_id="i1", dataset="d", task="Disease Diagnosis", modality="X-Ray", part="Chest", image=None,
        image_digest=None, variant="standard", rotation=0, answer=0, n_options=2, prompt_hash="h",
        response="A", extracted=0, how="bare_letter", outcome=Outcome.CORRECT,
    )
    row = result_row(rec)
    assert row["schema_version"] == RESULTS_SCHEMA_VERSION == 1
    path = tmp_path / "results.jsonl"
    path.write_text(_json.dumps(row) + "\n", encoding="utf-8")
    assert read_results(path) == [rec]
    row["schema_version"] = RESULTS_SCHEMA_VERSION + 1
    path.write_text(_json.dumps(row) + "\n", encoding="utf-8")
    with _pytest.raises(ValueError, match="newer than this medrcube reads"):
        read_results(path)


def test_run_directory_names_come_from_one_function(tmp_path):
    from medrcube.service import new_run_dir

    first = new_run_dir(tmp_path, "openai:gpt-5.1@http://user:pw@host/v1")
    second = new_run_dir(tmp_path, "openai:gpt-5.1@http://user:pw@host/v1")
    assert first != second and first.is_dir() and second.is_dir()
    assert second.name.startswith(first.name) and second.name.endswith("-2")
    assert "pw" not in first.name
    assert new_run_dir(tmp_path, "random", "mine").name == "mine"
