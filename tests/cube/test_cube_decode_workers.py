"""cube/decode_workers.py: a first load's images decoded in worker processes give exactly
the content keys decoded here would; a broken image, a worker killed mid-way or no worker
at all lose nothing."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tests.reliability.reliability_kit import child_pids

from medrcube.cube import content, decode_workers, load_cube
from medrcube.cube.content import decode_content


def _png(mode: str, seed: int, size: int = 48) -> bytes:
    rng = np.random.default_rng(seed)
    if mode == "I;16":
        im = Image.fromarray(rng.integers(0, 4096, (size, size), dtype=np.uint16))
    else:
        bands = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
        a = rng.integers(0, 256, (size, size, bands), dtype=np.uint8)
        im = Image.fromarray(a[:, :, 0] if bands == 1 else a, mode=mode)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def images() -> dict[str, bytes]:
    out = {f"{mode}-{i}": _png(mode, i) for i in range(12) for mode in ("L", "RGB", "RGBA", "I;16")}
    out["broken"] = b"\x89PNG\r\n\x1a\n not an image"
    return out


def _here(images: dict[str, bytes]) -> dict[str, object]:
    out: dict[str, object] = {}
    for k, data in images.items():
        try:
            out[k] = decode_content(data)
        except Exception:  # noqa: BLE001 - what decode_all gives as None
            out[k] = None
    return out


def test_workers_give_the_keys_decoding_here_gives(images) -> None:
    missing = [(k, k) for k in images]
    got = decode_workers.decode_all(missing, images.__getitem__, decode_content, 2)
    assert got == _here(images)
    assert got["broken"] is None and len({c.key for c in got.values() if c is not None}) == len(images) - 1


def test_a_worker_killed_mid_way_loses_nothing(images) -> None:
    # The reader kills one of this process's decode workers after a few images: what it held
    # unanswered is decoded here.
    me, reads = os.getpid(), []

    def workers() -> list[int]:
        return [pid for pid in child_pids(me) if b"decode_workers" in Path(f"/proc/{pid}/cmdline").read_bytes()]

    killed: list[int] = []

    def read(k: str) -> bytes:
        reads.append(k)
        if len(reads) == 8:
            killed.append(workers()[0])
            os.kill(killed[0], signal.SIGKILL)
        return images[k]

    got = decode_workers.decode_all([(k, k) for k in images], read, decode_content, 2)
    assert killed and got == _here(images)  # whatever it held unanswered when it died was decoded here


def test_no_worker_started_decodes_everything_here(images, monkeypatch) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")  # no child can start
    got = decode_workers.decode_all([(k, k) for k in images], images.__getitem__, decode_content, 2)
    assert got == _here(images)


def test_a_first_load_through_workers_has_the_keys_of_one_decoded_here(tmp_path, monkeypatch) -> None:
    cube = tmp_path / "cube"
    (cube / "img").mkdir(parents=True)
    rows = []
    for i in range(80):
        (cube / "img" / f"{i}.png").write_bytes(_png("L" if i % 2 else "RGB", 100 + i))
        rows.append({"id": f"q{i}", "dataset": "d", "image": f"img/{i}.png", "question": "Which?",
                     "options": ["CT", "MRI"], "answer": i % 2, "task": "Modality Recognition", "modality": "CT",
                     "part": "Brain"})
    (cube / "img" / "80.png").write_bytes((cube / "img" / "3.png").read_bytes())  # a copy: one image
    rows.append({**rows[3], "id": "q80", "image": "img/80.png"})
    (cube / "cube.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path / "cache-here"))
    monkeypatch.setattr(content, "DECODE_HERE_S", float("inf"))  # never workers
    here = load_cube(cube / "cube.jsonl")
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path / "cache-workers"))
    monkeypatch.setattr(content, "DECODE_HERE_S", 0.0)  # at once
    monkeypatch.setattr(content, "WORKERS_FOR_S", 0.0)
    through = load_cube(cube / "cube.jsonl")
    assert dict(through.contents) == dict(here.contents) and len(here.contents) == 81
    assert through.same_image["img/80.png"] == "img/3.png" and through.fingerprint == here.fingerprint
