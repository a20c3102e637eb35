"""The policy file's parse remembered across runs (plugin/speed/policy_memo.py): a hit is
the policy `load_policy` reads, the document validated again every time; an edited file,
a planted entry or a document JSON cannot hold exactly is read from the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medrcube.cube.derived_cache import Slot
from medrcube.gate.thresholds import ThresholdsError, load_policy, read_policy_doc
from medrcube.plugin.speed.policy_memo import _slot, remembered_policy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def policy_file(tmp_path) -> Path:
    path = tmp_path / "thresholds.yaml"
    path.write_bytes((ROOT / "thresholds.yaml").read_bytes())
    return path


def entries(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "policy-document").glob("*.json"))


def test_a_hit_is_the_policy_the_file_gives(cache_dir, policy_file):
    first = remembered_policy(policy_file)
    assert first == load_policy(policy_file) and len(entries(cache_dir)) == 1
    again = remembered_policy(policy_file)
    assert again == first and len(entries(cache_dir)) == 1
    profile = next(iter(first.profiles), None)
    if profile is not None:
        assert remembered_policy(policy_file, profile) == load_policy(policy_file, profile)


def test_an_edited_file_is_read_again_and_validated_every_time(cache_dir, policy_file):
    remembered_policy(policy_file)
    text = policy_file.read_text(encoding="utf-8")
    policy_file.write_text(text + "\nnot_a_key_of_the_schema: 1\n", encoding="utf-8")
    with pytest.raises(ThresholdsError, match="not_a_key_of_the_schema"):
        remembered_policy(policy_file)
    with pytest.raises(ThresholdsError, match="not_a_key_of_the_schema"):  # its parse remembered, not a pass
        remembered_policy(policy_file)


def test_an_entry_this_users_cache_did_not_write_is_ignored(cache_dir, policy_file):
    data = policy_file.read_bytes()
    slot = _slot(data)
    assert slot is not None
    doc = json.loads(json.dumps(read_policy_doc(policy_file)))
    doc["version"] = "not this file's"  # a document the file does not hold
    Slot(slot.path, bytes(32), slot.key).write(json.dumps(doc))  # under another secret
    assert remembered_policy(policy_file) == load_policy(policy_file)
    slot.write(json.dumps(doc))  # as this user's cache writes: believed, then validated like the file's own
    with pytest.raises(ThresholdsError):
        remembered_policy(policy_file)


def test_a_document_json_cannot_hold_exactly_is_never_remembered(cache_dir, tmp_path):
    path = tmp_path / "odd.yaml"
    path.write_text("version: 1\nwhen: 2026-12-06\n1: one\n", encoding="utf-8")  # a date, an integer key
    with pytest.raises(ThresholdsError):
        remembered_policy(path)
    assert entries(cache_dir) == []


def test_with_the_cache_off_the_file_is_read(monkeypatch, policy_file):
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", "off")
    assert remembered_policy(policy_file) == load_policy(policy_file)
