"""Allure's result files: allure-python-commons' own writer against the C-encoding one the gate
gives it (plugin/speed/allure_files.py), on result and container items shaped as a gate case's.

    python -m benchmarks.allure_writer [--items 330] [--rounds 7] [--out FILE]

Per round, each writer writes the same `--items` items (a test result with a gate case's labels,
parameters, status and two attachments, and two fixture containers per result, as allure-pytest
makes for the `check` and `verdict` fixtures) into a directory of its own on the scratch file
system; the writers alternate, allure's first. Reported: the process time per item of each
(median and minimum over the rounds) and their ratio, and whether the two directories hold the
same files once each file's uuid is set aside.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT
from benchmarks.machine import load_average

RESULT = ROOT / "benchmarks" / "results" / "allure_writer.json"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def gate_like_items(n: int) -> list[Any]:
    """`n` items: results and, for each, two fixture containers (a gate case writes three)."""
    from allure_commons.model2 import (
        Attachment,
        Label,
        Parameter,
        Status,
        StatusDetails,
        TestResult,
        TestResultContainer,
    )

    items: list[Any] = []
    while len(items) < n:
        k = len(items)
        result = TestResult(
            uuid=str(uuid.uuid4()), historyId=f"{k:032x}", testCaseId=f"{k:032x}",
            fullName="medrcube.suite.test_gate#test_cell", name=f"Chest / X-Ray / Disease Diagnosis {k}: accuracy",
            description="accuracy of cell/Chest/X-Ray/Disease Diagnosis: its lower confidence bound against the "
                        "bound 0.6 (rule lower_bound, confidence 0.95, min_n 30; source thresholds).",
            status=Status.FAILED,
            statusDetails=StatusDetails(message="FAIL: accuracy 0.412 [0.351, 0.474] < 0.6 on 280 items \u2264",
                                        trace="worst items: cx1, cx2, cx3"),
            start=1_765_000_000_000 + k, stop=1_765_000_000_005 + k,
            labels=[Label(name=a, value=b) for a, b in (
                ("epic", "Chest"), ("feature", "X-Ray"), ("story", "Disease Diagnosis"), ("severity", "critical"),
                ("tag", "cell"), ("tag", "level:high"), ("model", "openai:bench"), ("parentSuite", "openai:bench"),
                ("suite", "medrcube.suite"), ("subSuite", "test_gate"), ("host", "ci"), ("thread", "1-MainThread"),
                ("framework", "pytest"), ("language", "cpython3"))],
            parameters=[Parameter(name=a, value=b) for a, b in (
                ("check", "'cell/Chest/X-Ray/Disease Diagnosis'"), ("model", "openai:bench"), ("verdict", "FAIL"),
                ("observed", "0.412"), ("interval", "[0.351, 0.474]"), ("bound", "0.6"), ("rule", "lower_bound"),
                ("n", "280"), ("chance", "0.25"), ("error rate", "0.0"))],
            attachments=[Attachment(name="check and verdict", source=f"{uuid.uuid4()}-attachment.json",
                                    type="application/json"),
                         Attachment(name="worst items", source=f"{uuid.uuid4()}-attachment.csv", type="text/csv")])
        items.append(result)
        for fixture in ("check", "verdict"):
            items.append(TestResultContainer(uuid=str(uuid.uuid4()), name=fixture, children=[result.uuid],
                                             start=result.start, stop=result.stop))
    return items[:n]


def _texts(directory: Path) -> list[str]:
    return sorted(_UUID.sub("U", p.read_text(encoding="utf-8")) for p in directory.glob("*.json"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.allure_writer", description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=330, help="items per round (a gate case writes 3)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=str(RESULT))
    args = ap.parse_args(argv)

    import allure_commons
    from allure_commons.logger import AllureFileLogger

    from medrcube.plugin.speed.allure_files import encode_results_in_c

    items = gate_like_items(args.items)
    spent: dict[str, list[float]] = {"allure": [], "c_encoding": []}
    same = True
    with tempfile.TemporaryDirectory(prefix="medrcube-allure-writer-") as tmp:
        for r in range(args.rounds):
            dirs = {}
            for name in ("allure", "c_encoding"):
                directory = Path(tmp) / f"{name}-{r}"
                logger = AllureFileLogger(str(directory))
                allure_commons.plugin_manager.register(logger)
                try:
                    if name == "c_encoding":
                        encode_results_in_c()
                        if "_report_item" not in vars(logger):
                            raise SystemExit("the C-encoding writer was not given to the logger")
                    t0 = time.process_time()
                    for item in items:
                        logger._report_item(item)
                    spent[name].append(time.process_time() - t0)
                finally:
                    allure_commons.plugin_manager.unregister(logger)
                dirs[name] = directory
            same = same and _texts(dirs["allure"]) == _texts(dirs["c_encoding"])
            for directory in dirs.values():
                shutil.rmtree(directory)

    def per_item(values: list[float]) -> dict[str, float]:
        return {"median_ms": 1000 * statistics.median(values) / len(items),
                "min_ms": 1000 * min(values) / len(items)}

    doc = {"items": len(items), "rounds": args.rounds, "load_average": load_average(),
           "per_item": {k: per_item(v) for k, v in spent.items()},
           "ratio_of_medians": statistics.median(spent["c_encoding"]) / statistics.median(spent["allure"]),
           "same_files": same}
    for name, s in doc["per_item"].items():
        print(f"{name:11s} {s['median_ms']:.3f} ms per item (min {s['min_ms']:.3f})")
    print(f"ratio {doc['ratio_of_medians']:.2f}; the same files: {same}")
    Path(args.out).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
