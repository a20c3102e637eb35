"""The ledger of attempts through the real gate: every run numbered on its cube, its pass
claims at its attempt's share of alpha, the deployment profile refusing a run without its
ledger, and a ledger cut, deleted or edited refused (run/ledger.py, gate/attempts.py)."""

from __future__ import annotations

import json

import pytest
from tests.plugin.conftest import DEPLOYMENT_THRESHOLDS as DEPLOYMENT

from medrcube.gate.attempts import share


def _ledger(gate_ws):
    (path,) = sorted((gate_ws.path / ".medrcube").glob("ledger-*.jsonl"))
    return path


def test_the_twentieth_run_of_a_series_shows_its_attempt_number(gate_ws):
    from medrcube.run.ledger import begin, conclude, read_ledger

    model = gate_ws.replay("good.jsonl")
    for k in (1, 2):
        gate_ws.run(model=model)
        assert gate_ws.gate_json()["attempt"]["number"] == k
    verdict = gate_ws.gate_json()["verdict"]
    # Attempts 3 to 19 written by the ledger's own code, entry for entry what a run of the
    # gate writes (the two above), in this workspace's account; the 20th is a run again.
    ledger = _ledger(gate_ws)
    cube = read_ledger(ledger)[0]["cube"]
    for k in range(3, 20):
        attempt = begin(ledger.parent, cube, run=f"run-{k}", identity={"model": model})
        assert attempt.number == k
        conclude(attempt, run=f"run-{k}", verdict=verdict, run_id=f"run-{k}")
    gate_ws.run(model=model)
    doc = gate_ws.gate_json()
    assert doc["attempt"]["number"] == 20
    attempt = doc["attempt"]
    assert attempt["pass_level"] == pytest.approx(0.025 * share(20)) and attempt["share"] == pytest.approx(1 / 760)
    assert attempt["across"] == pytest.approx(0.025 * (1.5 - 1 / 40))
    assert sum(attempt["earlier"].values()) == 19
    entries = [json.loads(line) for line in _ledger(gate_ws).read_text(encoding="utf-8").splitlines()]
    assert [e["event"] for e in entries][:3] == ["opened", "attempt", "verdict"]
    assert sum(e["event"] == "attempt" for e in entries) == 20 and entries[-1]["verdict"] == doc["verdict"]
    page = (gate_ws.run_dirs()[-1] / "report.html").read_text(encoding="utf-8")
    assert "attempt 20 on this cube" in page


def test_the_deployment_profile_refuses_a_run_without_its_ledger(gate_ws):
    (gate_ws.path / "thresholds.yaml").write_text(DEPLOYMENT, encoding="utf-8")
    model = gate_ws.replay("good.jsonl")
    refused = gate_ws.run("--profile=deployment", model=model)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    err = refused.stderr.str()
    assert "no ledger of attempts for this cube" in err and "--new-ledger" in err and "--ledger=DIR" in err
    assert not gate_ws.run_dirs()

    gate_ws.run("--profile=deployment", "--new-ledger", f"--ledger={gate_ws.path / 'site-ledger'}", model=model)
    assert gate_ws.gate_json()["attempt"]["number"] == 1 and gate_ws.gate_json()["attempt"]["opened"] is True
    gate_ws.run("--profile=deployment", f"--ledger={gate_ws.path / 'site-ledger'}", model=model)
    assert gate_ws.gate_json()["attempt"]["number"] == 2


def test_a_deleted_ledger_is_refused_and_a_new_one_counts_on(gate_ws):
    model = gate_ws.replay("good.jsonl")
    gate_ws.run(model=model)
    gate_ws.run(model=model)
    ledger = _ledger(gate_ws)
    ledger.unlink()
    refused = gate_ws.run(model=model)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "is gone, and this account's cache recorded 2 attempt(s) in it" in refused.stderr.str()

    gate_ws.run("--new-ledger", model=model)
    attempt = gate_ws.gate_json()["attempt"]
    assert attempt["number"] == 3 and attempt["earlier"] == {"carried from an earlier ledger": 2}


@pytest.mark.parametrize("damage", ["cut", "edit"])
def test_a_ledger_cut_or_edited_is_refused(gate_ws, damage):
    model = gate_ws.replay("good.jsonl")
    gate_ws.run(model=model)
    gate_ws.run(model=model)
    ledger = _ledger(gate_ws)
    lines = ledger.read_text(encoding="utf-8").splitlines(keepends=True)
    if damage == "cut":
        ledger.write_text("".join(lines[:2]), encoding="utf-8")  # the second attempt and both verdicts gone
        why = "it was cut or replaced"
    else:
        entry = json.loads(lines[2])
        entry["verdict"] = "QUALIFIED"
        lines[2] = json.dumps(entry, sort_keys=True) + "\n"
        ledger.write_text("".join(lines), encoding="utf-8")
        why = "line 3: its digest does not verify under the user secret"
    refused = gate_ws.run(model=model)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR and why in refused.stderr.str(), refused.stderr.str()
