"""plugin/allure.py (`_set`): a gate case's labels, parameters, title and description set on
allure-pytest's test result at once make the same result files as `allure.dynamic`'s hook calls.

Two real gate runs on one cube and one model, with allure-pytest: one as shipped, one with a
conftest that registers a second implementation of `add_label` in allure's plugin manager
(as a site's own Allure extension would), which sends every case through `allure.dynamic`.
Their result files are compared once the uuids, times and the thread are set aside."""

from __future__ import annotations

import json
import re
from pathlib import Path

# A site's own Allure extension: one more add_label implementation (it does nothing), so
# allure-pytest's listener is no longer the only one and the gate calls allure.dynamic.
EXTENSION = '''
import allure_commons


class SiteLabels:
    seen = 0

    @allure_commons.hookimpl
    def add_label(self, label_type, labels):
        SiteLabels.seen += 1


def pytest_configure(config):
    allure_commons.plugin_manager.register(SiteLabels(), name="site-labels")


def pytest_unconfigure(config):
    import os
    with open(os.path.join(str(config.rootpath), "site_labels_seen.txt"), "w") as fh:
        fh.write(str(SiteLabels.seen))
    allure_commons.plugin_manager.unregister(name="site-labels")
'''

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r'"(start|stop)": \d+')
_THREAD = re.compile(r'("name": "thread", "value": )"[^"]*"')
_HOST = re.compile(r'("name": "host", "value": )"[^"]*"')


def _results(directory: Path) -> list[dict]:
    """The gate cases' result files, uuids, times, thread and host set aside, by name and history id."""
    out = []
    for path in directory.glob("*-result.json"):
        text = _HOST.sub(r'\1"H"', _THREAD.sub(r'\1"T"', _TIME.sub(r'"\1": 0', _UUID.sub("U", path.read_text("utf-8")))))
        doc = json.loads(text)
        if "tests_benchmark" in doc.get("fullName", ""):
            out.append(doc)
    return sorted(out, key=lambda d: (d["fullName"], d["historyId"]))


def test_labels_set_at_once_are_the_hook_calls_own(gate_ws) -> None:
    model = gate_ws.replay("half.jsonl", wrong=gate_ws.ids("Disease Diagnosis"))
    gate_ws.run_subprocess("--alluredir=direct", "--variants=standard,blind", model=model)
    gate_ws.pytester.makeconftest(EXTENSION)
    gate_ws.run_subprocess("--alluredir=hooks", "--variants=standard,blind", model=model)

    direct, hooks = _results(gate_ws.path / "direct"), _results(gate_ws.path / "hooks")
    # The second run went through allure.dynamic: the extension saw every case's labels.
    assert int((gate_ws.path / "site_labels_seen.txt").read_text()) >= len(hooks) > 5
    assert [d["historyId"] for d in direct] == [d["historyId"] for d in hooks]
    for a, b in zip(direct, hooks, strict=True):
        assert a["labels"] == b["labels"], a["fullName"]
        assert a["parameters"] == b["parameters"], a["fullName"]
        assert (a["name"], a.get("description")) == (b["name"], b.get("description"))
    # What the cases carry: the behaviours, the numbers as excluded parameters, the title.
    cell = next(d for d in direct if "Disease Diagnosis" in d["fullName"] or "Disease Diagnosis" in d["name"])
    names = {label["name"] for label in cell["labels"]}
    assert {"epic", "feature", "story", "severity", "tag"} <= names
    params = {p["name"]: p for p in cell["parameters"]}
    assert params["observed"].get("excluded") is True and "excluded" not in params["check"]
    assert cell["name"].endswith("accuracy")
    assert [a["name"] for a in cell["attachments"]] == ["check and verdict", "worst items"]
    assert [a["status"] for a in direct] == [b["status"] for b in hooks]
    assert {a["status"] for a in direct} >= {"passed", "failed", "skipped", "broken"}  # every outcome, an error too


def test_the_attachments_check_is_to_dicts_json() -> None:
    from medrcube.gate.checks import Check, CheckKind
    from medrcube.plugin.allure import _check_dict
    from medrcube.rundir.jsontext import indented

    check = Check("credibility/part/Brain", CheckKind.CREDIBILITY, "dependence", "Brain", None, None, 0.2,
                  "lower_bound", 0.95, 30, 0.05, variants=("standard", "blind"),
                  params={"exclude_low_tasks": ("View Recognition",), "nested": {"a": [1, (2, 3)]}},
                  labels={"severity": "critical"})
    assert indented(_check_dict(check), default=str) == indented(check.to_dict(), default=str)
    assert _check_dict(check)["kind"] == "credibility" and _check_dict(check)["variants"] == ["standard", "blind"]


# The gate's writer interpreter for Allure's files (plugin/speed/allure_files.py) recorded once the
# cases are collected. This workspace's cube has fewer cases than the writer's threshold: it is lowered
# to one case; WRITER_OFF keeps every file in the process (the threshold out of reach).
WRITER_SEEN = '''
import json
import os

import pytest

from medrcube.plugin.speed import allure_files


def pytest_configure(config):
    allure_files.WRITER_MIN_CASES = 10**9 if os.environ.get("WRITER_OFF") else 1
    # A slow writer (20 ms a file, as on a busy disk): the run ends well before its last file.
    allure_files._WRITER = allure_files._WRITER.replace("    os.replace(", "    __import__('time').sleep(0.02)\\n    os.replace(")


@pytest.hookimpl(trylast=True)  # after the medrcube plugin's own, which starts the writer
def pytest_collection_finish(session):
    with open(os.path.join(str(session.config.rootpath), "writers.json"), "w") as fh:
        json.dump([w.process.pid for w in allure_files._WRITERS if w.process is not None], fh)
'''


def _attached(directory: Path) -> list[str]:
    """Each attachment's text, the uuids in it set aside."""
    return sorted(_UUID.sub("U", p.read_text("utf-8")) for p in directory.glob("*-attachment.*"))


def test_a_gate_run_with_the_writer_makes_the_same_allure_files(gate_ws, monkeypatch) -> None:
    """A gate run with enough cases hands its Allure files to the writer interpreter; its result
    files and attachments are those of the same run with every file written by the process."""
    model = gate_ws.replay("half.jsonl", wrong=gate_ws.ids("Disease Diagnosis"))
    gate_ws.pytester.makeconftest(WRITER_SEEN)
    # Each run its own store, so each is the first attempt on the cube (its ledger: the same alpha).
    gate_ws.run_subprocess("--alluredir=handed", "--variants=standard,blind", model=model, store="store-handed")
    assert len(json.loads((gate_ws.path / "writers.json").read_text())) == 1
    monkeypatch.setenv("WRITER_OFF", "1")
    gate_ws.run_subprocess("--alluredir=kept", "--variants=standard,blind", model=model, store="store-kept")
    assert json.loads((gate_ws.path / "writers.json").read_text()) == []
    handed, kept = _results(gate_ws.path / "handed"), _results(gate_ws.path / "kept")
    assert len(handed) > 5 and [d["historyId"] for d in handed] == [d["historyId"] for d in kept]
    for a, b in zip(handed, kept, strict=True):
        assert {k: v for k, v in a.items() if k != "attachments"} == {k: v for k, v in b.items() if k != "attachments"}
        assert [x["name"] for x in a.get("attachments", [])] == [x["name"] for x in b.get("attachments", [])]
    assert _attached(gate_ws.path / "handed") == _attached(gate_ws.path / "kept") != []
    assert not list((gate_ws.path / "handed").glob("*.tmp"))
    # The run's trend entry counts every case's result file: the slow writer's were in place when it was made.
    trend = [json.loads((gate_ws.path / d / "medrcube-last-run.json").read_text())["data"] for d in ("handed", "kept")]
    assert trend[0] == trend[1] and trend[0]["total"] > len(handed)  # and the gate's verdict as a case
