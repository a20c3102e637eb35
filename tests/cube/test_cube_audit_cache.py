"""The leakage audit's cache (issue 29): a hit gives the same audit, a changed cube misses,
a corrupt or planted entry is ignored, and `MEDRCUBE_CACHE_DIR=off` writes nothing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from tests.cube.test_cube_audit import leaky_cube

from medrcube.cube import load_cube
from medrcube.cube.audit import audit_items
from medrcube.cube.audit_cache import cached_audit


@pytest.fixture(scope="module")
def leaky_items(tmp_path_factory):
    root = leaky_cube(tmp_path_factory.mktemp("leaky") / "cube")
    items = list(load_cube(root).items)[:160]  # 40 images: leaky still, and quick to audit
    return items, audit_items(items)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(d))
    return d


def _entries(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "leak-audit").glob("*.json"))


def test_a_hit_gives_the_same_audit(leaky_items, cache_dir):
    items, truth = leaky_items
    assert truth.findings  # the cube leaks: a cache that dropped findings would show
    first = cached_audit(items)
    [entry] = _entries(cache_dir)
    written = entry.read_bytes()
    again = cached_audit(items)
    assert first == truth and again == truth
    assert again.flagged_cells() == truth.flagged_cells()
    assert entry.read_bytes() == written and _entries(cache_dir) == [entry]  # read, not rewritten


def test_a_changed_cube_misses(leaky_items, cache_dir):
    items, truth = leaky_items
    cached_audit(items)
    # One item's answer moved to another option: the same ids, another content.
    it = items[0]
    edited = [dataclasses.replace(it, answer=(it.answer + 1) % len(it.options)), *items[1:]]
    got = cached_audit(edited)
    assert len(_entries(cache_dir)) == 2
    assert got == audit_items(edited)
    assert got.prior_by_item.keys() == truth.prior_by_item.keys()


@pytest.mark.parametrize("damage", ["garbage", "planted"])
def test_a_corrupt_or_planted_entry_is_ignored(leaky_items, cache_dir, damage):
    items, truth = leaky_items
    cached_audit(items)
    [entry] = _entries(cache_dir)
    doc = json.loads(entry.read_text())
    if damage == "garbage":
        entry.write_bytes(b"\x00not json{")
    elif damage == "planted":
        # What an adversary wants: the leaky cube's key holding a clean audit, without the secret.
        doc["value"]["findings"] = []
        entry.write_text(json.dumps(doc))
    got = cached_audit(items)
    assert got == truth and got.findings
    assert json.loads(entry.read_text())["value"]["findings"]  # rewritten with the true figures


def test_cache_off_writes_nothing(leaky_items, tmp_path, monkeypatch):
    items, truth = leaky_items
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cached_audit(items) == truth
    assert not (tmp_path / "xdg").exists()


def test_stored_audit_reads_and_never_computes(leaky_items, cache_dir, monkeypatch):
    """What the gate reads while its answers come in (plugin/speed/tail_ahead.py): the cached audit,
    or None, never a computation, and nothing written."""
    from medrcube.cube.audit_cache import stored_audit

    items, truth = leaky_items
    assert stored_audit(items) is None and _entries(cache_dir) == []
    cached_audit(items)
    assert stored_audit(items) == truth
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", "off")
    assert stored_audit(items) is None


def test_a_tie_read_back_keeps_its_expected_hit(cache_dir):
    """An item whose options tie is scored 1/t (cube/audit_model.expected_hits); read back
    from the cache it is 1/t still, not rounded to right (it was read as a bool: a second
    run on a cube counted every tie as an options-only hit, where its first run did not)."""
    from medrcube.cube.item import Item

    def item(i: int, options: tuple[str, ...], task: str) -> Item:
        return Item(f"i{i}", "d", f"images/{i}.png", "Which?", options, 0, task, "CT", "Brain")

    lone = item(0, ("Alpha", "Bravo", "Delta", "Gamma"), "Disease Diagnosis")  # ties: nothing of it seen in training
    items = [lone, *(item(i, ("Yes", "No"), "Abnormality Diagnosis") for i in range(1, 41))]
    computed = cached_audit(items)
    [_] = _entries(cache_dir)
    read_back = cached_audit(items)
    assert computed.prior_by_item[lone.id] == read_back.prior_by_item[lone.id] == 0.25
    assert read_back == computed
