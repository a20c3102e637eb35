"""Tests of the benchmark harness itself (not of speed): `pytest benchmarks/tests -q`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks import results
from benchmarks.corpus import make_corpus
from benchmarks.cubes import subset, with_slow_marks
from benchmarks.gate_run import _COUNT
from benchmarks.harness import BenchError, Metric, Target, fmt, run_proc


def test_run_proc_measures_the_child_not_the_parent(tmp_path: Path) -> None:
    code = (
        "import time\n"
        "block = bytearray(160 * 1024 * 1024)\n"  # touched: resident
        "for i in range(0, len(block), 4096): block[i] = 1\n"
        "t = time.process_time()\n"
        "while time.process_time() - t < 0.3: pass\n"
        "print('done')\n"
    )
    p = run_proc([sys.executable, "-c", code], log_dir=tmp_path, name="child")
    assert p.returncode == 0 and p.text().strip() == "done"
    assert p.maxrss_mib >= 160
    assert p.cpu_s >= 0.25
    assert p.wall_s >= p.user_s * 0.5  # wall covers the child's run


def test_run_proc_raises_with_the_output_tail(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="exited with 3") as e:
        run_proc([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"], log_dir=tmp_path, name="bad")
    assert "boom" in str(e.value)
    p = run_proc([sys.executable, "-c", "import sys; sys.exit(1)"], log_dir=tmp_path, name="one", ok_codes=(0, 1))
    assert p.returncode == 1


def test_run_proc_kills_the_group_on_timeout(tmp_path: Path) -> None:
    with pytest.raises(BenchError):
        run_proc([sys.executable, "-c", "import time; time.sleep(60)"], log_dir=tmp_path, name="slow", timeout=0.5)


def test_metric_median_min_max_and_target() -> None:
    m = Metric("x.s", "x", "s", [3.0, 1.0, 10.0], Target("<", 5.0, "< 5 s"))
    j = m.to_json()
    assert (j["median"], j["min"], j["max"], j["n"]) == (3.0, 1.0, 10.0, 3)
    assert j["status"] == "ok" and j["target"]["text"] == "< 5 s"
    assert Metric("y", "y", "s", [6.0, 7.0], Target("<", 5.0)).status == "MISS"
    assert Metric("z", "z", "req/s", [6.0], Target(">", 5.0)).status == "ok"
    assert Metric("w", "w", "s", [1.0]).status == "info"
    assert fmt(1234.5) == "1,234" and fmt(0.01234) == "0.012" and fmt(12.34) == "12.3"


def test_corpus_is_deterministic_and_mixed() -> None:
    a, b = make_corpus(500, seed=3), make_corpus(500, seed=3)
    assert a == b and a != make_corpus(500, seed=4)
    kinds = {e.kind for e in a}
    assert {"bare_letter", "reasoning_answer_line", "think_block", "json", "refusal", "hedge"} <= kinds
    for e in a:
        assert 2 <= len(e.options) <= 5
        assert (e.expected is None) == (e.kind in ("refusal", "hedge"))
        assert e.expected is None or 0 <= e.expected < len(e.options)


def test_subset_shares_the_cube_images_and_marks_are_unique(tmp_path: Path) -> None:
    from medrcube.cube import load_cube
    from medrcube.testing.gencube import generate_release_cube

    root = generate_release_cube(tmp_path / "cube", n_items=80, n_datasets=6, n_images=30, image_size=32,
                                 n_base_images=4)
    full = load_cube(root)
    path = subset(root, 25, images_only=True)
    assert path.parent == root and subset(root, 25, images_only=True) == path  # cached
    sub = load_cube(path)
    assert len(sub) == 25 and all(it.image is not None for it in sub.items)
    assert {it.id for it in sub.items} <= {it.id for it in full.items}
    assert all(sub.digests[it.image] == full.digests[it.image] for it in sub.items)
    everything = load_cube(subset(root, 10_000, images_only=False))
    assert len(everything) == len(full)

    marked, marks = with_slow_marks(sub, 3, 12)
    assert marks == ["[slow-0]", "[slow-1]", "[slow-2]"]
    hits = [it for it in marked.items if "[slow-" in it.question]
    assert len(hits) == 3 and all(marked.items.index(h) < 12 for h in hits)


def test_pytest_summary_line_is_read() -> None:
    line = "=== 101 failed, 5 passed, 4 skipped, 2 errors in 6.81s ==="
    assert dict((k, int(n)) for n, k in _COUNT.findall(line)) == {"failed": 101, "passed": 5, "skipped": 4,
                                                                   "errors": 2}


def test_table_and_markdown_show_misses_and_failures() -> None:
    ok = Metric("a.s", "load", "s", [1.0, 2.0], Target("<", 5.0, "< 5 s")).to_json()
    miss = Metric("b.x", "  ratio | odd", "x", [1.5], Target("<", 1.25)).to_json()
    doc = {
        "date": "2026-01-01 00:00 UTC", "profile": "full", "elapsed_s": 61.0,
        "load_average": {"start": [1, 1, 1], "end": [2, 2, 2]},
        "summary": {"ok": 1, "miss": 1, "missed": ["b.x"], "failed": ["broken"]},
        "machine": {"cpu_model": "cpu", "cores": 2, "usable_cores": 2, "memory_gib": 24, "platform": "linux",
                    "python_impl": "CPython 3.11", "packages": {"pytest": "9"}, "git": {"commit": "abc"}},
        "scenarios": [
            {"name": "one", "title": "1. One", "metrics": [ok, miss], "error": None},
            {"name": "broken", "title": "2. Broken", "metrics": [], "error": "BenchError: it broke\nmore"},
        ],
    }
    text = results.table(doc)
    assert "MISS" in text and "2. Broken: FAILED: BenchError: it broke" in text
    md = results.markdown(doc)
    assert "**MISS**" in md and "ratio \\| odd" in md and "**Failed:** `BenchError: it broke`" in md
    assert "1 met, 1 missed" in md and "1 scenario(s) failed" in md
    json.dumps(doc)  # what latest.json holds stays JSON
