"""Sequential qualification through the real gate: images asked in a seeded order, each
check looked at on planned fractions of its images, the run stopped once the gate's
verdict is final, a budget on requests or on cost; requests counted at the scripted server."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest
from tests.plugin.conftest import SUITE, GateWorkspace, _png

CELLS = [("Chest", "X-Ray", "Modality Recognition"), ("Chest", "X-Ray", "Organ Recognition"),
         ("Brain", "MRI", "Modality Recognition")]
PER_CELL = 80
THRESHOLDS = """\
version: 1
defaults: {rule: lower_bound, confidence: 0.95, min_n: 10, max_error_rate: 0.05, above_chance: 0}
overall: {bound: 0.5}
slices:
  part: {default: {bound: 0.5}}
  modality: {default: {bound: 0.5}}
  task: {default: {bound: 0.5}}
cells:
  - {match: "*/*/*", bound: 0.5}
"""


def items() -> list[dict[str, Any]]:
    out = []
    for c, (part, modality, task) in enumerate(CELLS):
        for i in range(PER_CELL):
            out.append({
                "id": f"c{c}-{i:03d}", "dataset": "seq", "image": f"img/c{c}-{i:03d}.png",
                "question": f"Cell {c} case {i}: which answer is right?", "options": ["one", "two", "three", "four"],
                "answer": i % 4, "task": task, "modality": modality, "part": part,
            })
    return out


@pytest.fixture
def seq_ws(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> GateWorkspace:
    ws = GateWorkspace(pytester, items=items())
    shutil.copytree(SUITE, ws.path / "tests_benchmark", ignore=shutil.ignore_patterns("__pycache__", "mini", "__init__.py"))
    cube = ws.path / "cube"
    (cube / "img").mkdir(parents=True)
    for n, it in enumerate(ws.items):
        (cube / it["image"]).write_bytes(_png(n % 256))
    with (cube / "cube.jsonl").open("w", encoding="utf-8") as fh:
        for it in ws.items:
            fh.write(json.dumps(it) + "\n")
    (ws.path / "thresholds.yaml").write_text(THRESHOLDS, encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-for-the-scripted-server")
    return ws


def scripted(ws: GateWorkspace, server: Any) -> str:
    # 90% right: far above every bound of 0.5.
    server.set_script({"answer_key": ws.answer_key(wrong=[it["id"] for it in ws.items if int(it["id"][-3:]) % 10 == 0])})
    return ws.openai(server)


def test_sequential_asks_a_fraction_and_agrees_with_the_full_run(seq_ws, gate_server):
    model = scripted(seq_ws, gate_server)
    full = seq_ws.run(model=model, store="full-store")
    full_verdicts, full_requests = seq_ws.verdicts(), gate_server.stats()["total"]
    assert full_requests == 3 * PER_CELL and full.ret == 0, full.stdout.str()
    gate_server.reset_stats()

    seq = seq_ws.run("--sequential", "--seed=3", model=model, store="seq-store")
    requests = gate_server.stats()["total"]
    doc = seq_ws.gate_json()
    assert seq.ret == 0, seq.stdout.str()
    assert requests <= 0.6 * full_requests, requests
    # Every check decided, and as the full run decided it.
    assert seq_ws.verdicts() == full_verdicts
    sampling = doc["sampling"]
    assert sampling["seed"] == 3 and sampling["stop"] == "every required check passed, so QUALIFIED is final"
    assert sampling["items_asked"] == requests and sampling["items_saved"] == full_requests - requests
    cell = next(c for c in doc["checks"] if c["id"] == "Chest/X-Ray/Organ Recognition")
    assert cell["decided_by"] == "group-sequential look" and "group-sequential" in cell["guarantee"]
    looks = cell["details"]["sequential"]["looks"]  # the levels spent per look, in gate.json
    assert looks[-1]["images"] < PER_CELL and looks[-1]["p_pass"] <= looks[-1]["pass_level"]
    assert all(lk["pass_spent"] <= 0.025 for lk in looks)
    seq.stdout.fnmatch_lines(["sequential: seed 3, asked * of 240 items *; stopped: every required check passed*"])

    # The same seed on the same store: the same order, nothing asked again. (In a ledger of its
    # own: on the first one this run is attempt 2, whose pass claims look at smaller levels and
    # so may need more images: docs/guarantees.md, attempts.)
    gate_server.reset_stats()
    seq_ws.run("--sequential", "--seed=3", f"--ledger={seq_ws.path / 'ledger-2'}", model=model, store="seq-store")
    assert gate_server.stats()["total"] == 0 and seq_ws.verdicts() == full_verdicts


def test_workers_take_the_same_decisions_and_split_the_requests(seq_ws, gate_server):
    model = scripted(seq_ws, gate_server)
    seq_ws.run("--sequential", model=model, store="serial")
    serial, serial_requests = seq_ws.verdicts(), gate_server.stats()["total"]
    gate_server.reset_stats()
    result = seq_ws.run_subprocess("--sequential", "-n", "3", model=model, store="parallel")
    assert result.ret == 0, result.stdout.str()
    assert seq_ws.verdicts() == serial
    # At most one batch (16 images of one item here) more per worker.
    assert gate_server.stats()["total"] <= serial_requests + 3 * 16


def test_a_budget_ends_the_run_undecided_with_what_each_check_needs(seq_ws, gate_server):
    model = scripted(seq_ws, gate_server)
    result = seq_ws.run("--sequential", "--max-requests=20", model=model)
    assert gate_server.stats()["total"] <= 20
    doc = seq_ws.gate_json()
    assert doc["sampling"]["stop"].startswith("budget: --max-requests 20")
    undecided = [c for c in doc["checks"] if c["verdict"] == "undecided"]
    assert undecided and all("not asked in full: budget: --max-requests 20" in c["message"] for c in undecided)
    assert result.ret == 11  # UNDECIDED: never green on a budget
    # The counters say where every item went, the same in gate.json and the terminal.
    tally, sampling = doc["tally"], doc["sampling"]
    assert tally["stop"] == sampling["stop"] and tally["requests"] == gate_server.stats()["total"]
    assert tally["not_needed"] == sampling["items_saved"] > 0
    assert tally["answered"] + tally["cached"] + tally["failed"] + tally["not_asked"] == tally["asks"]
    result.stdout.fnmatch_lines([f"not planned: {tally['not_needed']} items a --sequential run did not ask "
                                 f"(budget: --max-requests 20*"])


def test_max_cost_stops_the_run_within_one_batch_of_spending_it(seq_ws, gate_server):
    # Answers at the bounds (half right): no check settles early, so only the budget stops.
    gate_server.set_script({"answer_key": seq_ws.answer_key(wrong=[it["id"] for it in seq_ws.items
                                                                   if int(it["id"][-3:]) % 2 == 0])})
    models = seq_ws.path / "models.yaml"

    def priced(prompt: float, completion: float) -> str:
        models.write_text("version: 1\nmodels:\n  priced:\n    provider: openai\n    model: test-model\n"
                          f"    base_url: '{gate_server.base_url}'\n"
                          f"    price: {{prompt: {prompt}, completion: {completion}, currency: USD}}\n", encoding="utf-8")
        return "--models-file=models.yaml"

    # A first run prices a request (its tokens are the scripted server's count), then the
    # price is set so that 0.05 buys about 50 of the 240 requests.
    seq_ws.run("--sequential", "--max-requests=16", priced(1.0, 1.0), model="priced", store="probe")
    probe = seq_ws.gate_json()["usage"]["candidate"]
    per_request_at_one = probe["cost"] / probe["requests"]
    scale = (0.05 / 50) / per_request_at_one
    gate_server.reset_stats()
    result = seq_ws.run("--sequential", "--max-cost=0.05", priced(scale, scale), model="priced", store="fresh")
    doc = seq_ws.gate_json()
    sent = gate_server.stats()["total"]
    spent = doc["usage"]["candidate"]["cost"]
    per_request = spent / sent
    assert doc["sampling"]["stop"] == "budget: --max-cost 0.05 reached", doc["sampling"]["stop"]
    # Within one batch (16 requests) of spending 0.05, and never past it by more than that.
    assert 0.05 - 16 * per_request <= spent <= 0.05 + 16 * per_request, (spent, sent)
    assert sent < 3 * PER_CELL and result.ret == 11


def test_budgets_without_sequential_are_a_usage_error(seq_ws):
    result = seq_ws.run("--max-requests=10", model="random")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--max-requests only apply to a sequential run: add --sequential*"])
