"""The feasibility pass remembered per cube content (issue 29): a hit gives the same checks,
a changed cube or policy misses, a corrupt entry is ignored."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.cube.audit_cache import items_digest
from medrcube.gate.checks import build_checks
from medrcube.gate.feasible import assess
from medrcube.gate.thresholds import load_policy
from medrcube.plugin.speed.feasibility_memo import feasibility_memo

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mini():  # type: ignore[no-untyped-def]
    cube = load_cube(str(ROOT / "fixtures" / "mini"))
    policy = load_policy(str(ROOT / "thresholds.yaml"))
    checks = build_checks(sorted({it.cell for it in cube.items}), policy)
    return list(cube.items), policy, checks, assess(checks, cube.items, policy)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _assessed(items, checks, policy):  # type: ignore[no-untyped-def]
    return assess(checks, items, policy, feasibility_memo(checks, items_digest(items), policy))


def test_a_hit_gives_the_same_checks(mini, cache_dir):
    items, policy, checks, truth = mini
    assert any(not c.required for c in truth) and any(c.required for c in truth)
    assert _assessed(items, checks, policy) == truth
    [entry] = sorted((cache_dir / "feasibility").glob("*.json"))
    assert _assessed(items, checks, policy) == truth
    assert sorted((cache_dir / "feasibility").glob("*.json")) == [entry]


def test_a_changed_cube_or_policy_misses(mini, cache_dir):
    items, policy, checks, truth = mini
    _assessed(items, checks, policy)
    # Every item of the largest cell made restricted (no image): its checks lose their evidence.
    cell = max({it.cell for it in items}, key=lambda c: sum(it.cell == c for it in items))
    edited = [dataclasses.replace(it, image=None) if it.cell == cell else it for it in items]
    got = _assessed(edited, checks, policy)
    assert got == assess(checks, edited, policy) and got != truth
    looser = dataclasses.replace(policy, feasibility=dataclasses.replace(policy.feasibility, min_images=1))
    assert _assessed(items, checks, looser) == assess(checks, items, looser)
    assert len(list((cache_dir / "feasibility").glob("*.json"))) == 3


def test_a_corrupt_or_planted_entry_is_ignored(mini, cache_dir):
    items, policy, checks, truth = mini
    _assessed(items, checks, policy)
    [entry] = sorted((cache_dir / "feasibility").glob("*.json"))
    doc = json.loads(entry.read_text())
    doc["value"] = {}  # "every check decidable": what a vendor would plant
    entry.write_text(json.dumps(doc))
    assert _assessed(items, checks, policy) == truth
    entry.write_bytes(b"\xff\xfe garbage")
    assert _assessed(items, checks, policy) == truth
