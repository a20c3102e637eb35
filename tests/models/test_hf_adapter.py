"""The hf: adapter, end to end on a tiny randomly initialised VLM built at test time.

Nothing is mocked: the model directory is written with save_pretrained and loaded back by
the adapter's own from_pretrained path, prompts go through the processor's chat
template, and generation really runs (on the CPU) in a worker thread.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from PIL import Image  # noqa: E402

from medrcube.models.base import ErrorKind, ImageInput, ModelAdapter, Request  # noqa: E402
from medrcube.models.registry import ModelSpecError, load_adapter  # noqa: E402

FAST = {"max_new_tokens": 6}  # the output is noise; a few tokens exercise decoding


@pytest.fixture(scope="session")
def tiny_vlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from medrcube.testing.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm") / "model")


@pytest.fixture(scope="module")
def adapter(tiny_vlm: Path) -> ModelAdapter:
    return load_adapter(f"hf:{tiny_vlm}")


def _png(color: tuple[int, int, int], size: tuple[int, int], mode: str = "RGB") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, color if mode == "RGB" else color[0]).save(buf, "PNG")
    return buf.getvalue()


def _image(data: bytes, name: str) -> ImageInput:
    return ImageInput(digest=name, read=lambda: data)


def _req(i: int, *images: ImageInput, params: dict | None = None) -> Request:
    prompt = f"Question: Which modality is image {i}?\nOptions:\nA. CT\nB. MRI\nC. X-Ray\nD. US\nAnswer with the option's letter from the given choices directly."
    return Request(key=f"k{i}", item_id=f"item-{i}", prompt=prompt, images=images, params=params or FAST)


def _three() -> list[Request]:
    # Different sizes and a grayscale PNG: the adapter converts to RGB, the processor resizes.
    return [
        _req(0, _image(_png((200, 10, 10), (40, 30)), "a")),
        _req(1, _image(_png((90, 0, 0), (64, 64), mode="L"), "b")),
        _req(2, _image(_png((0, 0, 250), (20, 50)), "c")),
    ]


def test_three_image_requests_end_to_end_and_greedy_is_deterministic(adapter: ModelAdapter) -> None:
    assert isinstance(adapter, ModelAdapter)
    assert adapter.spec.startswith("hf:")
    assert adapter.fingerprint.startswith(f"hf:{adapter.model_id}:")
    first = asyncio.run(adapter.generate(_three()))
    second = asyncio.run(adapter.generate(_three()))
    assert len(first) == 3
    for r in first:
        assert r.ok, r.error
        assert isinstance(r.text, str)
        assert r.usage is not None and r.usage["completion_tokens"] <= FAST["max_new_tokens"]
        assert r.usage["prompt_tokens"] > 16  # the 16 image tokens plus the prompt
    assert [r.text for r in first] == [r.text for r in second]


def test_batch_position_does_not_change_a_greedy_answer(adapter: ModelAdapter) -> None:
    """Left padding done right: a request's answer is the same alone or padded in a batch."""
    reqs = _three()
    together = asyncio.run(adapter.generate(reqs))
    alone = [asyncio.run(adapter.generate([r]))[0] for r in reqs]
    assert [r.text for r in together] == [r.text for r in alone]


def test_mixed_batch_blind_and_bad_image(adapter: ModelAdapter) -> None:
    blind = Request(key="blind", item_id="blind-1", prompt="Question: text only?\nOptions:\nA. yes\nB. no", params=FAST)
    bad = _req(9, _image(b"this is not an image", "bad"))
    out = asyncio.run(adapter.generate([_three()[0], blind, bad]))
    assert [r.ok for r in out] == [True, True, False]
    assert out[2].error_kind is ErrorKind.INTERNAL and "item-9" in out[2].error


def test_generation_failure_is_an_error_response_not_an_exception(adapter: ModelAdapter) -> None:
    reqs = [_req(0, params={**FAST, "no_such_generation_flag": 3}), _req(1)]
    out = asyncio.run(adapter.generate(reqs))
    assert len(out) == 2
    assert not out[0].ok and out[0].error_kind is ErrorKind.INTERNAL and "no_such_generation_flag" in out[0].error
    assert out[1].ok  # other params group: unaffected


def test_models_yaml_hf_entry(tiny_vlm: Path, tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text(
        textwrap.dedent(
            f"""
            models:
              tiny:
                provider: hf
                model: {tiny_vlm}
                params: {{max_new_tokens: 3}}
                batch_size: 2
                dtype: float32
                device: cpu
                image_max_side: 16
            """
        ),
        encoding="utf-8",
    )
    a = load_adapter("tiny", models_file=models)
    assert (a.spec, a.batch_size, a.concurrency, a.device) == ("tiny", 2, 1, "cpu")
    reqs = _three() + [_req(3, _image(_png((1, 2, 3), (300, 200)), "d")), _req(4)]
    reqs = [Request(key=r.key, item_id=r.item_id, prompt=r.prompt, images=r.images) for r in reqs]  # no params
    out = asyncio.run(a.generate(reqs))
    assert len(out) == 5 and all(r.ok for r in out)
    assert all(r.usage["completion_tokens"] <= 3 for r in out)
    # Different generation parameters are a different fingerprint (the cache must not mix them).
    assert a.fingerprint != load_adapter(f"hf:{tiny_vlm}").fingerprint


def test_fingerprint_tracks_the_weights(tiny_vlm: Path, tmp_path: Path) -> None:
    from medrcube.testing.tiny_vlm import build_tiny_vlm

    same = load_adapter(f"hf:{tiny_vlm}").fingerprint
    assert same == load_adapter(f"hf:{tiny_vlm}").fingerprint
    other = build_tiny_vlm(tmp_path / "m", seed=1)  # same config, other weights
    renamed = tmp_path / "m2"
    shutil.copytree(tiny_vlm, renamed)
    a, b = load_adapter(f"hf:{other}").fingerprint, load_adapter(f"hf:{renamed}").fingerprint
    assert a.split(":")[-1] != same.split(":")[-1]
    assert b.split(":")[-1] == same.split(":")[-1]  # same files elsewhere: same hash


def test_missing_directory_and_missing_chat_template(tiny_vlm: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelSpecError, match="not found"):
        load_adapter(f"hf:{tmp_path / 'no-such-model'}")
    bare = tmp_path / "no-template"
    shutil.copytree(tiny_vlm, bare)
    (bare / "chat_template.jinja").unlink()
    with pytest.raises(ModelSpecError, match="chat template"):
        load_adapter(f"hf:{bare}")


def test_weights_load_from_safetensors_only(tiny_vlm: Path, tmp_path: Path) -> None:
    """A pickled checkpoint is never unpickled: a directory holding only pytorch_model.bin
    (a real state dict, which transformers would load without use_safetensors=True) is
    refused with the way to convert it; beside model.safetensors a .bin is ignored."""
    import torch
    from transformers import AutoModelForImageTextToText

    state = AutoModelForImageTextToText.from_pretrained(tiny_vlm).state_dict()
    only_bin = tmp_path / "only-bin"
    shutil.copytree(tiny_vlm, only_bin)
    (only_bin / "model.safetensors").unlink()
    torch.save(state, only_bin / "pytorch_model.bin")
    with pytest.raises(ModelSpecError) as err:
        load_adapter(f"hf:{only_bin}")
    message = str(err.value)
    assert str(only_bin) in message and "pytorch_model.bin" in message
    assert "safetensors only" in message and "save_pretrained" in message

    # Both present: the safetensors weights load and the .bin is never read, even one
    # that would run code when unpickled.
    both = tmp_path / "both"
    shutil.copytree(tiny_vlm, both)
    marker = tmp_path / "unpickled"
    (both / "pytorch_model.bin").write_bytes(_pickle_that_touches(marker))
    adapter = load_adapter(f"hf:{both}")
    out = asyncio.run(adapter.generate([_req(0, _image(_png((9, 9, 9), (32, 32)), "x"))]))
    assert out[0].ok, out[0].error
    assert not marker.exists()


def _pickle_that_touches(marker: Path) -> bytes:
    """A pickle whose loading creates `marker`: what a hostile checkpoint could do."""
    import pickle

    class Touch:
        def __reduce__(self) -> tuple[object, tuple[Path]]:
            return (Path.touch, (marker,))

    return pickle.dumps(Touch())


def test_hub_id_offline_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelSpecError) as err:
        load_adapter("hf:some-org/some-vlm-that-is-not-cached")
    assert "some-org/some-vlm-that-is-not-cached" in str(err.value)
    assert "local directory" in str(err.value)


def test_install_hint_when_torch_is_missing() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["torch"] = None  # what an environment without torch looks like to import
        from medrcube.models.registry import load_adapter, ModelSpecError
        try:
            load_adapter("hf:./anything")
        except ModelSpecError as e:
            print(e)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'medrcube[hf]'" in out.stdout
    assert "cpu" in out.stdout


def test_an_answer_cut_at_max_new_tokens_is_truncated_on_both_paths(adapter: ModelAdapter, scripted_server) -> None:
    """The tiny model's noise never stops on its own: every answer reaches max_new_tokens and
    is marked truncated, as the OpenAI path marks finish_reason "length"; both grade TRUNCATED
    (never "unparsed", never a miss)."""
    from medrcube.cube.item import Cube, Item
    from medrcube.models.openai_adapter import OpenAIAdapter
    from medrcube.records import Outcome
    from medrcube.run.grade import grade
    from medrcube.run.plan import plan_asks

    responses = asyncio.run(adapter.generate([_req(i) for i in range(3)]))
    assert all(r.ok and r.truncated for r in responses)

    scripted_server.set_script({"faults": [{"fault": "length", "text": "The answer is"}]})
    api = OpenAIAdapter("m", base_url=scripted_server.base_url, max_retries=0)
    (cut,) = asyncio.run(api.generate([_req(0)]))
    assert cut.truncated

    item = Item(id="i", dataset="d", image=None, question="Which modality?", options=("CT", "MRI"), answer=0,
                task="Modality Recognition", modality="CT", part="Brain")
    (ask,) = plan_asks(Cube(items=(item,), source="t", fingerprint="c", read_image=lambda key: b""), ("blind",),
                       fingerprint="f")
    assert {grade(ask, r).outcome for r in (responses[0], cut)} == {Outcome.TRUNCATED}


def test_a_row_that_stopped_at_the_limit_is_not_truncated() -> None:
    from medrcube.models.hf_adapter import _cut_at_limit

    assert _cut_at_limit([5, 6, 7], 3, {2})
    assert not _cut_at_limit([5, 6, 2], 3, {2})  # the stop token came as the last allowed one
    assert not _cut_at_limit([5, 2, 0], 3, {2, 0})  # stopped early, padded
    assert not _cut_at_limit([5, 6], 3, {2}) and not _cut_at_limit([5, 6, 7], None, {2})
