"""A check kind is one registry entry (medrcube.gate.kinds): a toy kind registered by a
fixture of this file, and no product file touched, reads its own policy section, builds
its checks, collects its evidence, gets a test function in the suite, joins the gate's
family, and shows in the terminal summary, gate.json (valid against the shipped schema),
JUnit XML, Allure results and report.html."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import pytest

from medrcube.gate import kinds
from medrcube.gate.checks import Check
from medrcube.gate.evidence import collect_site
from medrcube.gate.thresholds import ThresholdsError, load_policy
from medrcube.records import GradedRecord
from medrcube.report.after_exit import wait_drawn

TOY = "toy_letter"


def _read_toy(c: Any, key: str, value: Any) -> float:
    d = c.mapping(key, value, ("min_share",))
    return float(c.prob(f"{key}.min_share", d.get("min_share"), "a share of answers"))


def _build_toy(ctx: kinds.BuildContext) -> list[Check]:
    bound = ctx.section("toy")
    if bound is None:
        return []
    return [Check(id="toy/overall", kind=TOY, metric="standard_right", part=None, modality=None, task=None,
                  bound=bound, rule="point", confidence=0.95, min_n=10, max_error_rate=0.05, source="toy.min_share",
                  labels={"part": "All parts", "modality": "Toy", "task": "Toy", "level": "overall",
                          "severity": "normal", "kind": TOY})]


def _toy_evidence(check: Check, records: list[GradedRecord]) -> Any:
    # The share of standard answers graded right, clustered by image, as the gate's own helper computes it.
    return collect_site(check, [r for r in records if r.variant == "standard"], lambda r: r.correct)


@pytest.fixture
def toy_kind() -> Iterator[kinds.KindEntry]:
    entry = kinds.register(kinds.KindEntry(
        TOY, "toy share of right answers", "test_toy_letter", "The toy kind: a share of right standard answers.",
        off="the toy kind needs `toy: {min_share: BOUND}`", epic="Toy kind", summary_line=True, observed="share",
        prefix="toy/", section="toy", read_policy=_read_toy, build=_build_toy, evidence=_toy_evidence))
    try:
        yield entry
    finally:
        kinds.unregister(TOY)


def test_a_registered_kind_reads_its_policy_section(toy_kind, tmp_path) -> None:
    path = tmp_path / "thresholds.yaml"
    path.write_text("version: 1\noverall: {bound: 0.5}\ntoy: {min_share: 0.7}\n", encoding="utf-8")
    assert load_policy(path).sections == {"toy": 0.7}
    path.write_text("version: 1\noverall: {bound: 0.5}\ntoy: {min_share: 1.7}\n", encoding="utf-8")
    with pytest.raises(ThresholdsError, match=r"toy\.min_share"):
        load_policy(path)


def test_an_unregistered_kind_section_is_an_unknown_key(tmp_path) -> None:
    path = tmp_path / "thresholds.yaml"
    path.write_text("version: 1\noverall: {bound: 0.5}\ntoy: {min_share: 0.7}\n", encoding="utf-8")
    with pytest.raises(ThresholdsError, match="toy"):
        load_policy(path)


def test_a_toy_kind_runs_through_the_whole_gate(toy_kind, gate_ws, monkeypatch) -> None:
    from medrcube.rundir.documents import validate

    monkeypatch.setenv("MEDRCUBE_REPORT_HTML", "after")  # the page by the detached child: the toy kind handed to it
    thresholds = gate_ws.path / "thresholds.yaml"
    thresholds.write_text(thresholds.read_text() + "toy: {min_share: 0.5}\n", encoding="utf-8")
    wrong = gate_ws.ids("Modality Recognition")[:3]  # 24 of 27 right: a share of 0.889
    result = gate_ws.run("--junitxml=junit.xml", "--alluredir=allure", model=gate_ws.replay("toy.jsonl", wrong=wrong))

    # The terminal summary: the kind's own line, under its title.
    result.stdout.fnmatch_lines(["*toy share of right answers (share; 1 pass): overall 0.889 * n=27 pass*"])
    result.stdout.fnmatch_lines(["PASSED *::test_toy_letter?toy/overall?"])

    # gate.json: the check, decided by the gate in the family, in the registry's order; valid.
    doc = gate_ws.gate_json()
    validate(doc, "gate", "gate.json")
    toy = next(c for c in doc["checks"] if c["id"] == "toy/overall")
    assert (toy["kind"], toy["verdict"], toy["n"]) == (TOY, "pass", 27)
    assert doc["checks"][-1]["id"] == "toy/overall"  # registered last: listed last

    # JUnit XML: one test case of the kind, with the verdict payload as a property.
    root = ET.parse(gate_ws.path / "junit.xml").getroot()
    case = next(tc for tc in root.iter("testcase") if tc.get("name") == "test_toy_letter[toy/overall]")
    payload = json.loads(next(p.get("value") for p in case.iter("property") if p.get("name") == "medrcube_verdict"))
    assert payload["kind"] == TOY and payload["verdict"] == "pass"

    # Allure: the case under the kind's epic.
    results = [json.loads(p.read_text(encoding="utf-8")) for p in (gate_ws.path / "allure").glob("*-result.json")]
    mine = [r for r in results if any(p["name"] == "check" and "toy/overall" in p["value"]
                                      for p in r.get("parameters", []))]
    assert len(mine) == 1 and mine[0]["status"] == "passed"
    assert [label["value"] for label in mine[0]["labels"] if label["name"] == "epic"] == ["Toy kind"]

    # report.html: the kind's panel with the gate's verdict.
    assert wait_drawn(gate_ws.run_dirs()[-1]) == "drawn"  # by a child, after the exit status, with the toy kind
    html = (gate_ws.run_dirs()[-1] / "report.html").read_text(encoding="utf-8")
    assert 'id="kind-toy_letter"' in html and "toy share of right answers" in html
    assert "<code>toy/overall</code>" in html


def test_a_run_without_the_section_says_how_to_turn_the_kind_on(toy_kind, gate_ws) -> None:
    result = gate_ws.run(model=gate_ws.replay("toy.jsonl"))
    result.stdout.fnmatch_lines(["*the toy kind needs `toy: {min_share: BOUND}`*"])
    assert all(c["kind"] != TOY for c in gate_ws.gate_json()["checks"])
