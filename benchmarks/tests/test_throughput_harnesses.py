"""The harness comparison's parts (issue 29): the bare client sends one request per job with
its image, and the summary's ratios are per round."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest
from PIL import Image

from benchmarks.bare_client import main as bare_main
from benchmarks.throughput_harnesses import summarise
from medrcube.testing.server import ScriptedServer


@pytest.mark.parametrize("mode", [[], ["lazy"]])  # bodies built first, or each when it is sent
def test_the_bare_client_sends_each_job_once_with_its_image(tmp_path, mode):
    png = tmp_path / "x.png"
    Image.new("L", (8, 8), 40).save(png)
    jobs = [{"prompt": f"question {i}", "image": str(png) if i % 2 else None} for i in range(5)]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    with ScriptedServer({"default": "A"}) as srv:
        out = io.StringIO()
        with redirect_stdout(out):
            assert bare_main([str(tmp_path / "jobs.json"), srv.base_url, "3", *mode]) == 0
        st = srv.stats(log=False)
    assert json.loads(out.getvalue()) == {"requests": 5, "errors": 0}
    assert st["total"] == 5 and st["images"] == {"with": 2, "without": 3, "total": 2}
    assert st["connections"] <= 3


def test_the_ratio_to_the_bare_client_is_taken_within_each_round():
    def run(h, rnd, wall):  # type: ignore[no-untyped-def]
        return {"cube": "mini", "delay_s": 0.1, "concurrency": 10, "harness": h, "round": rnd, "wall_s": wall,
                "requests": 100, "limit_s": 1.0, "startup_s": 0.1, "requests_s": 1.0, "tail_s": 0.1,
                "cpu_ms_per_request": 1.0, "maxrss_mib": 50.0}

    runs = [run("bare", 0, 1.0), run("gate", 0, 2.0), run("bare", 1, 4.0), run("gate", 1, 4.4), run("bare", 2, 1.0),
            run("gate", 2, 1.5)]
    rows = {r["harness"]: r for r in summarise(runs)}
    assert rows["gate"]["x_bare"] == 1.5  # the median of 2.0, 1.1, 1.5: not 2.0 / 1.0 of the medians
    assert rows["gate"]["wall_s"] == 2.0 and rows["gate"]["x_limit"] == 2.0
