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
