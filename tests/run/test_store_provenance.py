"""The provenance of stored answers (issue 26): a real SQLite store, real digests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from medrcube.models.base import Response
from medrcube.run import signing
from medrcube.run.store import DB_NAME, AskedBy, ResponseStore, StoreTamperedError
from medrcube.run.store.responses import _checksum


def _edit_text(directory: Path, key: str, text: str) -> None:
    """Rewrite a stored answer and recompute its CRC, as an editor of the file would."""
    conn = sqlite3.connect(directory / DB_NAME)
    refused, usage, truncated, confidence, *provenance = conn.execute(
        "SELECT refused, usage, truncated, confidence, model, created, endpoint, run, digest, signed "
        "FROM responses WHERE key = ?", (key,)).fetchone()
    conn.execute("UPDATE responses SET text = ?, checksum = ? WHERE key = ?",
                 (text, _checksum(key, text, refused, usage, truncated, confidence, provenance), key))
    conn.commit()
    conn.close()


def test_a_stored_answer_carries_its_provenance(tmp_path: Path) -> None:
    asked = AskedBy("20260101T000000Z-aaaa", "http://127.0.0.1:9/v1")
    with ResponseStore(tmp_path) as store:
        store.put("k", Response(text="B", served_model="m-1"), model="openai:m", asked_by=asked)
        got = store.get_stored(["k"])["k"]
    assert got.response.text == "B"
    p = got.provenance
    assert (p.run, p.endpoint, p.served_model, p.signed) == (asked.run, asked.endpoint, "m-1", False)
    assert p.signer == signing.USER  # authenticated by default: this user's secret, without a site key
    assert p.created > 0


def _forge_plain(directory: Path, key: str, text: str) -> None:
    """Rewrite a stored answer as a forger who knows the format would: the text, a plain
    SHA-256 digest recomputed over it (marked unsigned) and the CRC recomputed."""
    from medrcube.run.store.responses import _RESPONSE_COLS, _digest_payload

    conn = sqlite3.connect(directory / DB_NAME)
    row = list(conn.execute(f"SELECT {_RESPONSE_COLS} FROM responses WHERE key = ?", (key,)).fetchone())
    row[1] = text
    digest = signing.digest(_digest_payload(row), None)
    model, created, endpoint, run = row[10:14]
    crc = _checksum(key, text, row[2], row[3], row[7], row[9], (model, created, endpoint, run, digest, 0))
    conn.execute("UPDATE responses SET text = ?, digest = ?, signed = 0, checksum = ? WHERE key = ?",
                 (text, digest, crc, key))
    conn.commit()
    conn.close()


def test_an_answer_bound_by_a_plain_digest_is_never_graded(tmp_path: Path) -> None:
    """Without a site key, a forged row with every plain digest recomputed reads as
    missing (asked again), and the store counts it as unsigned for the summary."""
    with ResponseStore(tmp_path) as store:
        store.put("k", Response(text="wrong answer C"), asked_by=AskedBy("r1"))
    _forge_plain(tmp_path, "k", "right answer A")
    with ResponseStore(tmp_path) as store:
        assert store.get_many(["k"]) == {} and store.unsigned == {"k"}
        assert store.claim_many(["k"], "me", 10.0) == {"k"}  # to be asked again


def test_a_store_brought_from_another_account_is_refused(tmp_path: Path, monkeypatch) -> None:
    """Answers signed with another user's secret do not verify under this user's: refused."""
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path / "their-cache"))
    with ResponseStore(tmp_path / "store") as store:
        store.put("k", Response(text="A"), asked_by=AskedBy("r1"))
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path / "my-cache"))
    with ResponseStore(tmp_path / "store") as store, pytest.raises(StoreTamperedError, match="another user's secret"):
        store.get_many(["k"])


def test_accidental_damage_to_the_provenance_is_damage_not_an_edit(tmp_path: Path) -> None:
    """A flipped byte in a provenance column fails the CRC (which covers it): the answer is
    asked again, as any damaged row is, instead of stopping the run as an edit would."""
    with ResponseStore(tmp_path) as store:
        store.put("k", Response(text="A"), asked_by=AskedBy("run-1234"))
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("UPDATE responses SET run = 'run-1235'")
    conn.commit()
    conn.close()
    with ResponseStore(tmp_path) as store:
        assert store.get_many(["k"]) == {} and store.damaged == {"k"}


def test_an_edited_answer_with_its_crc_recomputed_is_refused(tmp_path: Path) -> None:
    with ResponseStore(tmp_path) as store:
        store.put("k", Response(text="wrong answer C"), asked_by=AskedBy("r1"))
    _edit_text(tmp_path, "k", "right answer A")
    with ResponseStore(tmp_path) as store:
        with pytest.raises(StoreTamperedError, match="digest does not verify") as info:
            store.get_many(["k"])
        assert info.value.keys == ("k",) and "--fresh" in str(info.value)
        with pytest.raises(StoreTamperedError):  # a claim does not take it for answered either
            store.claim_many(["k"], "owner", 10.0)


def test_with_a_key_answers_are_signed_and_another_key_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(signing.KEY_ENV, "site-key-1")
    with ResponseStore(tmp_path) as store:
        store.put("k", Response(text="A"), asked_by=AskedBy("r1"))
        assert store.get_stored(["k"])["k"].provenance.signed is True
    monkeypatch.setenv(signing.KEY_ENV, "another-key")
    with ResponseStore(tmp_path) as store, pytest.raises(StoreTamperedError, match="another MEDRCUBE_SIGNING_KEY"):
        store.get_many(["k"])


def test_answers_that_cannot_be_checked_here_are_asked_again(tmp_path: Path, monkeypatch) -> None:
    """Unsigned while a key is set (a warm cache from elsewhere), signed with no key set,
    or written before provenance: none is trusted, each reads as missing."""
    with ResponseStore(tmp_path) as store:
        store.put("unsigned", Response(text="A"), asked_by=AskedBy("r1"))
    monkeypatch.setenv(signing.KEY_ENV, "site-key")
    with ResponseStore(tmp_path) as store:
        assert store.get_many(["unsigned"]) == {} and store.untrusted == {"unsigned"}
        assert store.claim_many(["unsigned"], "me", 10.0) == {"unsigned"}  # to be asked again
        store.put("signed", Response(text="B"), asked_by=AskedBy("r2"))
    monkeypatch.delenv(signing.KEY_ENV)
    with ResponseStore(tmp_path) as store:
        assert store.get_many(["signed"]) == {}
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("UPDATE responses SET digest = NULL")  # as a version-3 row
    conn.commit()
    conn.close()
    with ResponseStore(tmp_path) as store:
        assert store.get_many(["unsigned", "signed"]) == {}


def test_fresh_reads_only_this_runs_answers(tmp_path: Path) -> None:
    with ResponseStore(tmp_path) as store:
        store.put("old", Response(text="A"), asked_by=AskedBy("earlier-run"))
        store.put("new", Response(text="B"), asked_by=AskedBy("this-run"))
        assert set(store.get_many(["old", "new"], run="this-run")) == {"new"}
        assert store.claim_many(["old", "new"], "me", 10.0, run="this-run") == {"old"}
