"""rundir/files.Landing: atomic writes whose fsync and rename run on a worker thread, each
file in place and whole once the landing is waited for, an error raised by the wait."""

from __future__ import annotations

from pathlib import Path

import pytest

from medrcube.rundir.files import Landing, atomic_write


def _strays(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_files_are_whole_and_in_place_after_the_landing(tmp_path: Path) -> None:
    texts = {f"f{i}.json": f"{i}" * (10_000 * (i + 1)) for i in range(4)}
    with Landing() as landing:
        for name, text in texts.items():
            atomic_write(tmp_path / name, lambda fh, t=text: fh.write(t), landing=landing)
    assert {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()} == texts
    assert _strays(tmp_path) == []


def test_an_error_on_the_landing_thread_is_raised_by_the_wait(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()  # os.replace cannot put a file where a directory is
    with pytest.raises(IsADirectoryError), Landing() as landing:
        atomic_write(tmp_path / "ok.json", lambda fh: fh.write("{}"), landing=landing)
        atomic_write(tmp_path / "taken", lambda fh: fh.write("{}"), landing=landing)
    assert (tmp_path / "ok.json").read_text(encoding="utf-8") == "{}"
    assert (tmp_path / "taken").is_dir() and _strays(tmp_path) == []


def test_a_writer_that_fails_leaves_nothing_and_the_block_error_is_the_one_seen(tmp_path: Path) -> None:
    def broken(fh) -> None:
        fh.write("half")
        raise ValueError("encoder broke")

    with pytest.raises(ValueError, match="encoder broke"), Landing() as landing:
        atomic_write(tmp_path / "a.json", lambda fh: fh.write("{}"), landing=landing)
        atomic_write(tmp_path / "b.json", broken, landing=landing)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]
    atomic_write(tmp_path / "c.json", lambda fh: fh.write("[]"))  # without a landing, as before
    assert (tmp_path / "c.json").read_text(encoding="utf-8") == "[]"


def test_the_seal_takes_a_landed_digest_only_for_a_file_unchanged_since(tmp_path: Path) -> None:
    """The landing reads each file back for its SHA-256 as it puts it in place; the seal
    uses that digest for a file still as it landed, and reads again one changed since
    (here rewritten with bytes of the same length): the manifest always holds what is on
    disk when it is sealed."""
    import json

    from medrcube.rundir.files import file_sha256
    from medrcube.rundir.seal import MANIFEST, seal_run_dir

    with Landing() as landing:
        for name in ("results.jsonl", "notes.txt"):
            atomic_write(tmp_path / name, lambda fh, n=name: fh.write(n * 1000), landing=landing)
    assert {p.name: d.sha256 for p, d in landing.landed.items()} == \
        {name: file_sha256(tmp_path / name) for name in ("results.jsonl", "notes.txt")}
    (tmp_path / "notes.txt").write_text("G" * len("notes.txt" * 1000), encoding="utf-8")  # changed after landing
    seal_run_dir(tmp_path, {"run_id": "t"}, landed=landing.landed)
    files = json.loads((tmp_path / MANIFEST).read_text(encoding="utf-8"))["files"]
    assert files == {"results.jsonl": file_sha256(tmp_path / "results.jsonl"),
                     "notes.txt": file_sha256(tmp_path / "notes.txt")}
    assert files["notes.txt"] != landing.landed[tmp_path / "notes.txt"].sha256
