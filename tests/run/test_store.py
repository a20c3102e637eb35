"""The response store on real SQLite files: round trips, claims, concurrent writers
(threads and spawned processes), corruption detection and the no-secrets rule."""

from __future__ import annotations

import logging
import multiprocessing
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from medrcube.models.base import ErrorKind, Response
from medrcube.run.store import DB_NAME, ResponseStore, StoreError, make_key


def test_make_key_is_canonical_and_sensitive_to_every_part() -> None:
    base = dict(fingerprint="openai:m", prompt="Q?", image_digests=["d1"], params={"t": 0, "n": 1},
                variant="shuffled", rotation=1)
    k = make_key(**base)
    assert len(k) == 64 and int(k, 16) >= 0
    # Dict order does not matter: the JSON is canonical.
    assert make_key(**{**base, "params": {"n": 1, "t": 0}}) == k
    changed = [
        {"fingerprint": "openai:other"},
        {"prompt": "Q? "},
        {"image_digests": ["d2"]},
        {"image_digests": []},
        {"params": {"t": 1, "n": 1}},
        {"variant": "standard"},
        {"rotation": 2},
    ]
    keys = {make_key(**{**base, **c}) for c in changed}
    assert k not in keys and len(keys) == len(changed)


def test_put_get_round_trip_and_errors_are_not_final(tmp_path: Path) -> None:
    with ResponseStore(tmp_path) as store:
        assert (tmp_path / DB_NAME).exists()
        assert store.get("k1") is None
        store.put("k1", Response(text="B", latency_s=0.25, usage={"prompt_tokens": 7}, attempts=2))
        store.put("k2", Response(text="I cannot help", refused=True))
        store.put("k3", Response(text=None, error="HTTP 500", error_kind=ErrorKind.SERVER, attempts=6))
        got = store.get("k1")
        assert got is not None and got.text == "B" and got.latency_s == 0.25
        assert got.usage == {"prompt_tokens": 7} and got.attempts == 2 and got.ok
        assert store.get("k2").refused is True
        # An error is recorded for reports but never returned as a response: a rerun retries it.
        assert store.get("k3") is None
        errs = store.errors()
        assert [(e.key, e.kind, e.message, e.attempts) for e in errs] == [("k3", "server", "HTTP 500", 6)]
        assert store.errors(["k1"]) == []
        assert store.stats() == {"responses": 2, "errors": 1, "claims": 0}
        assert set(store.get_many(["k1", "k2", "k3", "nope"])) == {"k1", "k2"}
        with pytest.raises(ValueError):
            store.record_error("k1", Response(text="fine"))
    # Reopening finds everything again (the data is on disk, not in memory).
    with ResponseStore(tmp_path) as store:
        assert store.get("k1").text == "B"


def test_newer_than_ignores_older_responses(tmp_path: Path) -> None:
    with ResponseStore(tmp_path) as store:
        store.put("old", Response(text="A"))
        cutoff = time.time() + 0.001
        time.sleep(0.01)
        store.put("new", Response(text="B"))
        assert set(store.get_many(["old", "new"], newer_than=cutoff)) == {"new"}
        assert store.get("old", newer_than=cutoff) is None
        # A claim under refresh may re-ask the old key but not the fresh one.
        assert store.claim("old", "me", 30, newer_than=cutoff)
        assert not store.claim("new", "me", 30, newer_than=cutoff)
        # Overwriting refreshes it.
        store.put("old", Response(text="C"), owner="me")
        assert store.get("old", newer_than=cutoff).text == "C"


class _Clock:
    """The claims' clock, moved by the test: an expiry is a step of this clock, never a
    sleep racing a TTL (a loaded machine can spend 50 ms between two calls)."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now


def test_claims_win_lose_expire_release_and_renew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from medrcube.run.store import claims

    clock = _Clock()
    monkeypatch.setattr(claims, "time", clock)
    with ResponseStore(tmp_path) as store:
        assert store.claim("k", "alice", 30)
        assert store.claim("k", "alice", 30)  # holding it already
        assert not store.claim("k", "bob", 30)
        assert store.unclaimed(["k", "free"]) == ["free"]
        store.release("k", "bob")  # not bob's: nothing happens
        assert not store.claim("k", "bob", 30)
        store.release("k", "alice")
        assert store.claim("k", "bob", 30)

        # An expired claim (its owner was killed) is taken over.
        assert store.claim("short", "dead", 0.05)
        assert not store.claim("short", "bob", 30)
        clock.now += 0.1
        assert store.unclaimed(["short"]) == ["short"]
        assert store.claim("short", "bob", 30)

        # Renewing keeps a slow owner's claims alive.
        assert store.claim("slow", "carol", 0.05)
        assert store.renew("carol", 30) == 1
        clock.now += 0.1
        assert not store.claim("slow", "bob", 30)

        # A stored response beats any claim; storing releases the owner's claim.
        assert store.claim("done", "alice", 30)
        store.put("done", Response(text="A"), owner="alice")
        assert not store.claim("done", "bob", 30)
        assert store.stats()["claims"] == 3  # k, short (bob), slow (carol)
        store.release_all("bob")
        assert store.stats()["claims"] == 1

        # An error releases the claim too, so that another process may retry.
        assert store.claim("err", "alice", 30)
        store.put("err", Response(text=None, error="x", error_kind=ErrorKind.TIMEOUT), owner="alice")
        assert store.claim("err", "bob", 30)


def test_claim_many_returns_the_keys_won(tmp_path: Path) -> None:
    with ResponseStore(tmp_path) as store:
        store.put("answered", Response(text="A"))
        assert store.claim("taken", "other", 30)
        won = store.claim_many(["a", "b", "taken", "answered", "a"], "me", 30)
        assert won == {"a", "b"}


def _simulate_worker(store: ResponseStore, keys: list[str], owner: str) -> list[str]:
    """What the runner does per key: claim, ask (here: nothing), store. Returns the keys
    this worker 'asked' (won and stored)."""
    asked: list[str] = []
    for key in keys:
        if store.get(key) is not None:
            continue
        if store.claim(key, owner, 30):
            asked.append(key)
            store.put(key, Response(text=f"answer {key} by {owner}"), owner=owner)
    return asked


def test_threads_hammering_the_same_keys_ask_each_once(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path)
    keys = [f"key{i}" for i in range(150)]
    results: dict[str, list[str]] = {}

    def work(name: str, order: list[str]) -> None:
        results[name] = _simulate_worker(store, order, name)

    threads = [
        threading.Thread(target=work, args=(f"t{i}", keys if i % 2 == 0 else keys[::-1])) for i in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    asked = Counter(k for v in results.values() for k in v)
    assert set(asked) == set(keys)
    assert max(asked.values()) == 1
    stored = store.get_many(keys)
    assert len(stored) == len(keys)
    # Each stored text names the thread that asked it.
    for name, mine in results.items():
        for key in mine:
            assert stored[key].text == f"answer {key} by {name}"
    store.close()


def _process_worker(args: tuple[str, list[str], str]) -> list[str]:
    directory, keys, owner = args
    with ResponseStore(directory) as store:
        return _simulate_worker(store, keys, owner)


def test_processes_hammering_the_same_keys_ask_each_once(tmp_path: Path) -> None:
    keys = [f"key{i}" for i in range(300)]
    ctx = multiprocessing.get_context("spawn")
    jobs = [(str(tmp_path), keys, "p0"), (str(tmp_path), keys[::-1], "p1"), (str(tmp_path), keys, "p2")]
    with ctx.Pool(3) as pool:
        results = pool.map(_process_worker, jobs)
    asked = Counter(k for r in results for k in r)
    assert set(asked) == set(keys)
    assert max(asked.values()) == 1
    with ResponseStore(tmp_path) as store:
        assert store.stats() == {"responses": 300, "errors": 0, "claims": 0}


def test_a_file_that_is_not_a_database_is_moved_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    garbage = b"this is not sqlite at all\n" * 200
    (tmp_path / DB_NAME).write_bytes(garbage)
    with caplog.at_level(logging.WARNING, logger="medrcube.run.store"):
        store = ResponseStore(tmp_path)
    assert store.recovered is not None
    assert store.recovered.name.startswith(f"{DB_NAME}.corrupt-")
    assert store.recovered.read_bytes() == garbage
    assert str(store.recovered) in caplog.text and "damaged" in caplog.text
    # A fresh, working store took its place.
    store.put("k", Response(text="A"))
    assert store.get("k").text == "A"
    store.close()
    with ResponseStore(tmp_path) as again:
        assert again.recovered is None and again.get("k").text == "A"


def test_a_damaged_page_is_detected_and_never_trusted(tmp_path: Path) -> None:
    with ResponseStore(tmp_path) as store:
        for i in range(400):
            store.put(f"k{i}", Response(text="x" * 300))
    db = tmp_path / DB_NAME
    # Checkpoint the WAL into the main file, then scribble over a page in the middle.
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db.read_bytes())
    assert len(data) > 8 * 4096
    data[5 * 4096 : 7 * 4096] = b"\xff" * (2 * 4096)
    db.write_bytes(bytes(data))
    with ResponseStore(tmp_path) as store:
        assert store.recovered is not None and store.recovered.exists()
        assert store.stats()["responses"] == 0
        assert store.get("k1") is None


def test_a_stale_wal_moves_aside_with_its_database(tmp_path: Path) -> None:
    (tmp_path / DB_NAME).write_bytes(b"\x00garbage" * 100)
    (tmp_path / (DB_NAME + "-wal")).write_bytes(b"old wal")
    with ResponseStore(tmp_path) as store:
        assert store.recovered is not None
        assert Path(str(store.recovered) + "-wal").read_bytes() == b"old wal"
        store.put("k", Response(text="A"))
        assert store.get("k").text == "A"


def test_a_store_from_a_newer_medrcube_is_refused(tmp_path: Path) -> None:
    ResponseStore(tmp_path).close()
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        ResponseStore(tmp_path)


@pytest.mark.parametrize(
    ("version", "missing"),
    [
        (1, ("served_model", "truncated", "confidence")),  # the first schema
        (2, ("confidence",)),  # served_model and truncated (the endpoint work)
        (2, ("served_model", "truncated")),  # an early version 2 that had only confidence
    ],
)
def test_an_older_store_gains_the_missing_columns_and_keeps_its_rows(
    tmp_path: Path, version: int, missing: tuple[str, ...]
) -> None:
    from medrcube.models.confidence import VERBAL, OptionConfidence
    from medrcube.run.store import SCHEMA_VERSION

    kept = Response(text="C", truncated="truncated" not in missing)
    with ResponseStore(tmp_path) as store:
        store.put("old", kept)
    conn = sqlite3.connect(tmp_path / DB_NAME)
    for column in missing:
        conn.execute(f"ALTER TABLE responses DROP COLUMN {column}")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()
    with ResponseStore(tmp_path) as store:
        assert store.get("old") == kept  # its checksum still holds
        new = Response(text="A", truncated=True, served_model="m-2024",
                       confidence=OptionConfidence(VERBAL, (), 0.4))
        store.put("new", new)
        assert store.get("new") == new
    conn = sqlite3.connect(tmp_path / DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    conn.close()


def test_an_unwritable_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="--response-store"):
        ResponseStore(blocker / "store")


def test_nothing_but_what_it_was_given_is_written(tmp_path: Path) -> None:
    marker = "sk-MARKER-should-never-be-stored-1234"
    with ResponseStore(tmp_path) as store:
        store.put("k", Response(text="A", usage={"prompt_tokens": 1}), model="openai:gpt@http://h")
        store.put("e", Response(text=None, error="401 check OPENAI_API_KEY", error_kind=ErrorKind.AUTH))
    for f in tmp_path.iterdir():
        assert marker.encode() not in f.read_bytes()


def test_a_damaged_value_reads_as_missing_and_is_claimed_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A flipped byte inside a stored answer passes SQLite's structural checks; the row
    checksum catches it, so the answer is asked again instead of graded."""
    with ResponseStore(tmp_path) as store:
        store.put("good", Response(text="The answer is B-unique-good"))
        store.put("bad", Response(text="The answer is B-unique-flip"))
    db = tmp_path / DB_NAME
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db.read_bytes())
    at = data.find(b"B-unique-flip")
    assert at > 0
    data[at] = ord("C")
    db.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="medrcube.run.store"):
        store = ResponseStore(tmp_path)
    assert store.recovered is None  # the file itself is sound
    assert store.get("good").text == "The answer is B-unique-good"
    assert store.get("bad") is None
    assert "damaged response" in caplog.text and store.damaged == {"bad"}
    assert store.claim("bad", "me", 30)  # a damaged row never blocks re-asking
    store.put("bad", Response(text="fresh"), owner="me")
    assert store.get("bad").text == "fresh"
    store.close()


def _checkpoint(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def test_a_text_damaged_into_invalid_utf8_reads_as_damaged_and_the_file_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Invalid UTF-8 in a stored text used to fail every query touching the row ("Could
    not decode to UTF-8"), so every run stopped at it. It is one damaged row: refused,
    reported and asked again; the other rows, and the file, stay in use."""
    with ResponseStore(tmp_path) as store:
        store.put("good", Response(text="The answer is B-utf8-good"))
        store.put("bad", Response(text="The answer is B-utf8-bad"))
        store.record_error("bad", Response(text=None, error="earlier failure -utf8-err"))
    db = tmp_path / DB_NAME
    _checkpoint(db)
    data = bytearray(db.read_bytes())
    for needle in (b"utf8-bad", b"utf8-err"):
        at = data.find(needle)
        assert at > 0
        data[at : at + 4] = b"\xff\xfe\xc3\x28"  # invalid UTF-8, same length
    db.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="medrcube.run.store"):
        store = ResponseStore(tmp_path)
    assert store.recovered is None and not list(tmp_path.glob(f"{DB_NAME}.corrupt-*"))
    assert store.get_many(["good", "bad"]).keys() == {"good"}
    assert store.get("good").text == "The answer is B-utf8-good"
    assert store.damaged == {"bad"} and "damaged response" in caplog.text
    # Other tables read too: the damaged error message comes back with replacement characters.
    assert "\ufffd" in store.errors(["bad"])[0].message
    assert store.claim("bad", "me", 30)  # asked again
    store.put("bad", Response(text="fresh"), owner="me")
    assert store.get("bad").text == "fresh"
    store.close()


def test_a_value_whose_type_was_damaged_reads_as_damaged(tmp_path: Path) -> None:
    """A damaged record header changes a value's type (a text read back as a blob or a
    number). The row is refused like any damaged value, never a crash in the checksum."""
    with ResponseStore(tmp_path) as store:
        for k in ("blob", "number", "refused", "latency", "fine"):
            store.put(k, Response(text=f"The answer is {k}", usage={"prompt_tokens": 3}))
    conn = sqlite3.connect(tmp_path / DB_NAME)
    # The file as a flipped serial-type byte leaves it: same row, another storage class.
    conn.execute("UPDATE responses SET text = CAST(text AS BLOB) WHERE key = 'blob'")
    conn.execute("UPDATE responses SET text = 12 WHERE key = 'number'")
    conn.execute("UPDATE responses SET refused = 'x' WHERE key = 'refused'")
    conn.execute("UPDATE responses SET latency_s = X'00' WHERE key = 'latency'")
    conn.commit()
    conn.close()
    with ResponseStore(tmp_path) as store:
        assert store.get_many(["blob", "number", "refused", "latency", "fine"]).keys() == {"fine"}
        assert store.damaged == {"blob", "number", "refused", "latency"}
        assert store.claim_many(["blob", "number", "fine"], "me", 30) == {"blob", "number"}


def test_damage_inside_the_key_index_moves_the_file_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """quick_check does not compare an index with its table: a key damaged in the primary
    key index alone passed it, the lookup then missed the row and the damaged file stayed
    in use. integrity_check at open finds it; the file is moved aside like other damage."""
    key = make_key("fp", "index damage")
    with ResponseStore(tmp_path) as store:
        store.put(key, Response(text="The answer is A"))
    db = tmp_path / DB_NAME
    _checkpoint(db)
    pristine = db.read_bytes()
    for at in [i for i in range(len(pristine)) if pristine.startswith(key.encode(), i)]:
        damaged = bytearray(pristine)
        damaged[at + 10 : at + 14] = b"ZZZZ"
        db.write_bytes(bytes(damaged))
        with sqlite3.connect(db) as conn:
            quick = conn.execute("PRAGMA quick_check").fetchall()
            full = conn.execute("PRAGMA integrity_check").fetchall()
        if quick == [("ok",)] and full != [("ok",)]:
            break
    else:
        pytest.fail("no copy of the key that only integrity_check notices")
    with caplog.at_level(logging.WARNING, logger="medrcube.run.store"):
        store = ResponseStore(tmp_path)
    assert store.recovered is not None and store.recovered.read_bytes() == bytes(damaged)
    assert "integrity_check" in caplog.text and "moved aside" in caplog.text
    assert store.stats()["responses"] == 0 and store.get(key) is None
    store.close()
