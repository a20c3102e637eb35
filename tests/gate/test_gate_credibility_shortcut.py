"""Credibility that catches shortcuts, through the real gate: `pytest --model=simulate:...`
on the bundled cube. A model whose diagnoses ignore its perception (diagnosis 0.7,
perception 0.5, independent: enough pairs of every group on 309 images for the odds
ratio to be decided) fails credibility/overall, the gate is NOT QUALIFIED (exit 10), and
the check's evidence carries the value and interval of the statistic it decided on,
beside the paper's rationality and shortcut probability."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "fixtures" / "mini"
SHORTCUT = "simulate:accuracy=0.5,AD=0.7,DD=0.7,SG=0.7,icc=0.3,seed=1"


@pytest.mark.slow
def test_a_shortcut_model_fails_credibility_through_the_gate(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "pytest", "tests_benchmark", f"--model={SHORTCUT}", f"--cube={MINI}",
           f"--response-store={tmp_path / 'store'}", f"--medrcube-report={tmp_path / 'reports'}", "-q",
           "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 10, proc.stdout[-3000:] + proc.stderr[-2000:]  # NOT QUALIFIED
    (doc,) = [json.loads(p.read_text(encoding="utf-8")) for p in (tmp_path / "reports").glob("*/gate.json")]
    cred = next(c for c in doc["checks"] if c["id"] == "credibility/overall")
    assert cred["verdict"] == "fail", cred
    d = cred["details"]
    # Decided on the odds ratio: the value and interval shown are the odds ratio's own.
    assert d["decided_on"] == "odds ratio"
    assert cred["observed"] == pytest.approx(d["dependence"]["odds_ratio"])
    assert cred["interval"] == pytest.approx([d["dependence"]["lo"], d["dependence"]["hi"]])
    assert cred["interval"][1] < d["min_odds_ratio"]
    # ... and the luck rate is far above its bound: both routes missed.
    assert d["luck_rate_interval"][0] > d["max_luck_rate"]
    # The paper's numbers stay in every output.
    assert d["rationality"] is not None and d["shortcut_prob"] is not None
    assert "shortcut probability" in proc.stdout and "rationality" in proc.stdout
