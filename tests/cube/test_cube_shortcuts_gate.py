"""Issue 28 through the real gate: on the bundled cube, a model answering one constant
letter fails or leaves undecided every credibility check, and is NOT QUALIFIED, under the
default policy and the `screening` profile (a replay file, the packaged suite, gate.json)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.testing.shortcuts import write_replay

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "fixtures" / "mini"


@pytest.mark.slow
@pytest.mark.parametrize("profile", [None, "screening"])
@pytest.mark.parametrize("letter", ["A", "B", "C", "D"])
def test_a_constant_letter_passes_no_credibility_check(tmp_path: Path, letter: str, profile: str | None) -> None:
    replay = write_replay(load_cube(MINI).items, f"constant:{letter}", tmp_path / "answers.jsonl")
    cmd = [sys.executable, "-m", "pytest", "tests_benchmark", f"--model=replay:{replay}", f"--cube={MINI}",
           f"--response-store={tmp_path / 'store'}", f"--medrcube-report={tmp_path / 'reports'}", "-q",
           "-p", "no:cacheprovider", "-p", "no:hypothesispytest", *([f"--profile={profile}"] if profile else [])]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 10, proc.stdout[-2000:] + proc.stderr[-2000:]  # NOT QUALIFIED
    (doc,) = [json.loads(p.read_text(encoding="utf-8")) for p in (tmp_path / "reports").glob("*/gate.json")]
    cred = {c["id"]: c["verdict"] for c in doc["checks"] if c["kind"] == "credibility"}
    assert "credibility/overall" in cred and len(cred) >= 7
    assert all(v in ("fail", "undecided") for v in cred.values()), cred
