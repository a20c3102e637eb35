"""The checked records of a test.json remembered by content (cube/records_cache.py): a
second load gives the same cube and the same problems, in order (strict mode raising the
same first error); a changed file is parsed again; an entry not this user's is ignored;
a good entry is what a hit gives (so nothing else may write one: the MAC)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medrcube.cube import CubeError, load_cube
from medrcube.cube.derived_cache import Slot
from medrcube.cube.records_cache import KIND
from medrcube.testing.gencube import edit_record, find_record


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(d))
    return d


def _entry(cache: Path, test_json: Path) -> tuple[Slot, dict]:
    for f in (cache / KIND).glob("*.json"):
        doc = json.loads(f.read_text(encoding="utf-8"))
        if any(d[0] == str(test_json) for d in doc["value"]["drafts"]):
            return Slot(f, (cache / "secret.key").read_bytes(), doc["key"]), doc
    raise AssertionError(f"no entry for {test_json}")


def _same(a, b) -> None:
    assert a.items == b.items and a.problems == b.problems and a.fingerprint == b.fingerprint


def test_a_second_load_gives_the_same_cube_and_problems(small_cube, cache, monkeypatch):
    f, rec = find_record(small_cube)
    edit_record(small_cube, rec["id"], task="Not A Task")  # a warning, kept
    first = load_cube(small_cube)
    assert any(p.reason == "unknown_task" for p in first.problems)
    assert list((cache / KIND).glob("*.json"))
    _same(first, load_cube(small_cube))
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", "off")
    _same(first, load_cube(small_cube))  # what parsing gives


def test_a_hit_is_the_entry_and_a_changed_file_is_parsed_again(small_cube, cache):
    f, rec = find_record(small_cube)
    load_cube(small_cube)
    slot, doc = _entry(cache, f)
    draft = next(d for d in doc["value"]["drafts"] if d[1] == rec["id"])
    draft[3]["question"] = "from the entry"
    slot.write(doc["value"])  # with this user's secret: trusted as this user's cache
    assert next(it for it in load_cube(small_cube) if it.id == rec["id"]).question == "from the entry"
    edit_record(small_cube, rec["id"], question="edited in the file")  # other bytes: a miss
    assert next(it for it in load_cube(small_cube) if it.id == rec["id"]).question == "edited in the file"


@pytest.mark.parametrize("how", ["planted", "corrupt", "malformed"])
def test_an_entry_not_written_by_this_users_cache_or_malformed_is_ignored(small_cube, cache, how):
    f, rec = find_record(small_cube)
    want = load_cube(small_cube)
    slot, doc = _entry(cache, f)
    draft = next(d for d in doc["value"]["drafts"] if d[1] == rec["id"])
    draft[3]["question"] = "planted"
    if how == "planted":
        slot.path.write_text(json.dumps(doc), encoding="utf-8")  # the old MAC: no longer its value's
    elif how == "corrupt":
        slot.path.write_text("{", encoding="utf-8")
    else:
        doc["value"]["problems"] = [["s", None, None, "m", "no_such_reason", "error"]]
        slot.write(doc["value"])
    _same(want, load_cube(small_cube))


def test_strict_raises_the_same_first_error_on_a_hit(small_cube, cache):
    f, rec = find_record(small_cube)
    edit_record(small_cube, rec["id"], gt_answer="none of the options")
    with pytest.raises(CubeError) as miss:
        load_cube(small_cube, strict=True)
    with pytest.raises(CubeError) as hit:
        load_cube(small_cube, strict=True)
    assert str(hit.value) == str(miss.value) and "gt_answer" in str(hit.value)
    assert hit.value.problems == miss.value.problems
