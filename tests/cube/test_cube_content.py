"""Images by their decoded pixels (cube/content.py): copies under other names, byte for
byte or re-encoded, are one image; pictures that only look alike are flagged, not merged."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

from medrcube.cli import main
from medrcube.cube import load_cube


def _picture(seed: int) -> Image.Image:
    yy, xx = np.mgrid[0:64, 0:64]
    rng = np.random.default_rng(seed)
    img = 60 + 80 * np.exp(-(((xx - rng.uniform(10, 54)) ** 2 + (yy - rng.uniform(10, 54)) ** 2) / 200.0))
    return Image.fromarray(np.clip(img + rng.normal(0, 3, img.shape), 0, 255).astype(np.uint8), mode="L")


def _cube(tmp_path, images: dict[str, Image.Image]) -> None:
    rows = []
    for i, (name, im) in enumerate(sorted(images.items())):
        im.save(tmp_path / name, format="PNG", compress_level=i % 9)
        rows.append({"id": f"q{i}", "dataset": "d", "image": name, "question": f"Q {i}?", "options": ["a", "b"],
                     "answer": i % 2, "task": "Disease Diagnosis", "modality": "X-Ray", "part": "Chest"})
    (tmp_path / "cube.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_copies_are_one_image_and_near_duplicates_are_listed(tmp_path, capsys) -> None:
    a, b = _picture(1), _picture(2)
    shifted = a.point(lambda v: min(255, v + 2))  # looks the same, other pixels
    _cube(tmp_path, {"a.png": a, "a_copy.png": a.convert("RGB"), "b.png": b, "a_bright.png": shifted})
    cube = load_cube(tmp_path / "cube.jsonl")
    keys = {it.image: cube.image_of(it) for it in cube.items}
    assert keys["a_copy.png"] == keys["a.png"] == "a.png"
    assert len(set(keys.values())) == 3  # a (twice), b, the brightened one
    assert main(["validate", str(tmp_path / "cube.jsonl"), "--audit"]) in (0, 4)
    out = capsys.readouterr().out
    assert "a.png = a_copy.png" in out
    assert "NEAR DUPLICATE" in out and "a.png ~ a_bright.png" in out


def test_the_content_keys_are_remembered_for_the_cube_however_its_path_is_spelled(tmp_path, monkeypatch) -> None:
    """The decoded pixels' keys are kept under the cube's real path: a load through a
    relative path or a symlink to the same cube takes them from the cache (no new entry,
    the entry's bytes unchanged), where each spelling used to decode every image again."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(cache))
    root = tmp_path / "cube"
    root.mkdir()
    _cube(root, {"a.png": _picture(1), "b.png": _picture(2)})
    first = load_cube(root / "cube.jsonl")
    entries = sorted((cache / "image-content").glob("*.json"))
    assert len(entries) == 1
    written = entries[0].read_bytes(), entries[0].stat().st_mtime_ns
    (tmp_path / "link").symlink_to(root, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    for spelling in ("cube/cube.jsonl", "link/cube.jsonl", "./cube/../cube/cube.jsonl"):
        again = load_cube(spelling)
        assert {it.image: again.image_of(it) for it in again.items} == {it.image: first.image_of(it) for it in first.items}
    assert sorted((cache / "image-content").glob("*.json")) == entries
    assert (entries[0].read_bytes(), entries[0].stat().st_mtime_ns) == written
