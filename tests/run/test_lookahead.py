"""The pump hands the adapter the requests that come next (run/pump.py `Lookahead`), and
the OpenAI adapter prepares their images ahead of the asks, in one job at a time
(models/images.py `ImageCache.prefetch`): each image still prepared once, every answer
the same, a broken image still reported by its own request."""

from __future__ import annotations

from pathlib import Path

import pytest

from medrcube.cube import load_cube
from medrcube.models.base import ErrorKind, ImageInput, Request
from medrcube.models.images import ImageCache
from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.run.pump import Lookahead
from medrcube.run.runner import run_cube
from medrcube.run.store import ResponseStore
from medrcube.testing.gencube import generate_release_cube


def _requests(n: int) -> list[Request]:
    return [Request(key=f"k{i}", item_id=f"i{i}", prompt=f"q{i}") for i in range(n)]


@pytest.mark.parametrize(("n", "window"), [(100, 8), (7, 32), (1, 1), (33, 32)])
def test_each_request_is_handed_once_in_order_and_ahead_of_its_ask(n: int, window: int) -> None:
    order = _requests(n)
    handed: list[Request] = []
    ahead = Lookahead(order, handed.extend, window)
    for taken in range(1, n + 1):
        ahead.took(1)
        assert len(handed) >= min(n, taken)  # the request just taken was handed before (or now)
        assert len(handed) <= taken + 2 * window
    assert handed == order


def test_no_hook_no_hand() -> None:
    ahead = Lookahead(_requests(5), None, 2)
    for _ in range(5):
        ahead.took(1)
    assert ahead.handed == 0


def test_a_run_prepares_its_images_ahead_once_each(tmp_path: Path, scripted_server, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    cube = load_cube(str(generate_release_cube(tmp_path / "cube", n_items=60, n_datasets=2, n_images=20,
                                               image_size=32, restricted_fraction=0.0)))
    distinct = len({it.image for it in cube.items if it.image})
    scripted_server.set_script({"default": "A", "latency": 0.01})
    cache = ImageCache()
    adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, concurrency=4, timeout=10.0,
                            image_cache=cache)
    result = run_cube(cube, adapter, store=ResponseStore(tmp_path / "store.sqlite"), concurrency=4)
    assert result.errors == 0
    assert scripted_server.stats(log=False)["total"] == len([it for it in cube.items if it.image])
    assert cache.prepared == distinct  # once each: the asks found what the jobs prepared
    assert cache.prefetched >= distinct - 4  # all but those the first asks met before the first job


def test_a_broken_image_is_reported_by_its_request_not_by_the_prefetch(scripted_server, monkeypatch) -> None:
    import asyncio

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    scripted_server.set_script({"default": "A"})
    broken = ImageInput("0" * 64, lambda: b"not an image")
    requests = [Request(key="k0", item_id="i0", prompt="q0", images=(broken,))]
    cache = ImageCache()
    adapter = OpenAIAdapter("scripted", base_url=scripted_server.base_url, concurrency=1, timeout=10.0,
                            image_cache=cache)

    async def go() -> list:
        try:
            adapter.prefetch(requests)
            return await adapter.generate(requests)
        finally:
            await adapter.aclose()

    (out,) = asyncio.run(go())
    assert out.error_kind is ErrorKind.INTERNAL and "could not be prepared" in (out.error or "")
    assert cache.prepared == 0 and cache.prefetched == 0
    assert scripted_server.stats(log=False)["total"] == 0  # never sent
