"""README.md's "What the main job shows" states what two real runs of the gate give;
regenerate it with `python -m benchmarks.main_job --write` when the gate changes."""

from __future__ import annotations

from benchmarks import main_job


def test_the_readme_figures_are_those_of_a_real_run() -> None:
    stated = main_job.readme_block(main_job.README.read_text(encoding="utf-8"))
    measured = main_job.block()
    assert stated == measured, (
        "README.md's main-job figures drifted from a real run; regenerate them with "
        f"`python -m benchmarks.main_job --write`.\nREADME:\n{stated}\nrun:\n{measured}")
    assert "NOT QUALIFIED** (exit status 10)" in measured.splitlines()[0]
    assert "QUALIFIED** (exit status 0)" in measured.splitlines()[1]
    assert "NOT QUALIFIED** (exit status 10)" in measured.splitlines()[2] and "failed: " in measured.splitlines()[2]
