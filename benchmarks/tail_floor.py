"""What a gate's cases cost at the least, whatever the gate decides: pytest with JUnit and
Allure on N cases shaped like the gate's (issue 46, the time after the last answer).

    python -m benchmarks.tail_floor [--cases 78,110] [--rounds 5] [--modes allure,c,writer] [--out FILE]

A generated suite of N cases, each with what a gate case has: a parametrized argument and
one function-scoped fixture (the gate's `check` and `verdict`, so two Allure containers),
eight excluded Allure parameters, a title, a description and two attachments (a JSON of
about 2 KB and a CSV). It runs as the gate runs, `pytest -q --junitxml --alluredir`, with
the medrcube plugin left out (`-p no:medrcube`): nothing of the gate is in it. Reported, per
N: wall and CPU (this process's user + system) from the end of collection to the end of the
session, read by a conftest's hooks, and to the process's exit (after pytest's cleanup, where a
writer interpreter is waited for); medians over the rounds. The gate's own cases cost this
plus deciding and describing each verdict: benchmarks/RESULTS.md section 24 compares them.

`--modes`: how Allure's files are written, each mode in every round in turn: `allure` (allure's
own file logger), `c` (its items encoded by the C JSON encoder, plugin/speed/allure_files.py's
`encode_results_in_c`), `writer` (that, and the files handed to the writer interpreter,
`hand_files_to_a_writer`, as the gate does with 20 cases or more on two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT
from benchmarks.machine import load_average

RESULT = ROOT / "benchmarks" / "results" / "tail_floor.json"

SUITE = '''
import json
import os
import allure
import pytest

PAYLOAD = {"observed": 0.71, "interval": [0.62, 0.79], "bound": 0.6, "n": 120,
           "details": {f"key{i}": [i, i / 7.0, "text " * 4] for i in range(40)}}


@pytest.fixture
def decided(case):
    return dict(PAYLOAD, case=case)


@pytest.mark.parametrize("case", [f"cell/{i:03d}" for i in range(N)])
def test_floor(case, decided):
    for k in range(8):
        allure.dynamic.parameter(f"number {k}", k / 3.0, excluded=True)
    allure.dynamic.title(case)
    allure.dynamic.description("what the case checks, in one sentence")
    allure.attach(json.dumps(decided, indent=2), name="check and verdict",
                  attachment_type=allure.attachment_type.JSON)
    allure.attach("item,answer,chosen\\nq1,A,B\\nq2,C,D\\n", name="worst items",
                  attachment_type=allure.attachment_type.CSV)
'''

CLOCKS = '''
import atexit
import json
import os
import time

_AT = {}
MODE = os.environ["TAIL_FLOOR_MODE"]


def pytest_sessionstart(session):
    if MODE in ("c", "writer"):
        from medrcube.plugin.speed.allure_files import encode_results_in_c

        encode_results_in_c()


def pytest_collection_finish(session):
    if MODE == "writer":
        from medrcube.plugin.speed.allure_files import hand_files_to_a_writer

        assert hand_files_to_a_writer(session.config, len(session.items))
    _AT["wall"], _AT["cpu"] = time.perf_counter(), sum(os.times()[:2])


def pytest_sessionfinish(session):
    if MODE == "writer":  # as the medrcube plugin does once the cases have run
        from medrcube.plugin.speed.allure_files import send_pending_files

        send_pending_files()
    _AT["out"] = {"wall_s": time.perf_counter() - _AT["wall"], "cpu_s": sum(os.times()[:2]) - _AT["cpu"]}
    atexit.register(_at_exit)


def _at_exit():
    with open(os.environ["TAIL_FLOOR_OUT"], "w") as fh:
        json.dump({**_AT["out"], "to_exit_s": time.perf_counter() - _AT["wall"]}, fh)
'''


def one(cases: int, work: Path, mode: str = "allure") -> dict[str, float]:
    work.mkdir(parents=True)
    (work / "test_floor.py").write_text(SUITE.replace("range(N)", f"range({cases})"), encoding="utf-8")
    (work / "conftest.py").write_text(CLOCKS, encoding="utf-8")
    out = work / "clocks.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:medrcube",
                           f"--junitxml={work / 'junit.xml'}", f"--alluredir={work / 'allure'}", "test_floor.py"],
                          cwd=work, capture_output=True, text=True,
                          env={**os.environ, "TAIL_FLOOR_OUT": str(out), "TAIL_FLOOR_MODE": mode})
    if proc.returncode != 0:
        raise SystemExit(f"the floor suite failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    files = len(list((work / "allure").iterdir()))
    return {**json.loads(out.read_text(encoding="utf-8")), "allure_files": files}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tail_floor", description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="78,110", help="N,... (the bundled cube's 78 cases, paper scale's 110)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--modes", default="allure", help="allure,c,writer: how Allure's files are written (module docstring)")
    ap.add_argument("--out", default=str(RESULT))
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="medrcube-tail-floor-") as tmp:
        for r in range(args.rounds):
            for n in (int(c) for c in args.cases.split(",")):
                for mode in args.modes.split(","):
                    got = one(n, Path(tmp) / f"{n}-{mode}-{r}", mode)
                    runs.append({"cases": n, "mode": mode, "round": r, **got, "load": load_average()})
    for n, mode in sorted({(run["cases"], run["mode"]) for run in runs}):
        mine = [run for run in runs if (run["cases"], run["mode"]) == (n, mode)]
        wall, cpu, to_exit = (statistics.median(run[k] for run in mine) for k in ("wall_s", "cpu_s", "to_exit_s"))
        rows.append({"cases": n, "mode": mode, "rounds": len(mine), "wall_s": wall, "cpu_s": cpu, "to_exit_s": to_exit,
                     "cpu_ms_per_case": 1000 * cpu / n, "allure_files": mine[0]["allure_files"]})
        print(f"{n} cases, {mode}: wall {wall:.3f} s, CPU {cpu:.3f} s ({1000 * cpu / n:.2f} ms a case), to the exit "
              f"{to_exit:.3f} s, {mine[0]['allure_files']} Allure files (medians of {len(mine)})")
    Path(args.out).write_text(json.dumps({"rows": rows, "runs": runs}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
