"""The README's local-server commands against a real server nobody here wrote:
`transformers serve` (transformers' own OpenAI-compatible server, one inference thread)
serving the tiny LLaVA-style model built at test time, whose noise never reaches a stop
token. Run on the pytester workspace's 27-item cube (the mini cube's 1,064 items take
minutes on a CPU: benchmarks/failing_servers.py measures that).

The server runs with the packages the README's `pip install` line names, which are
pyproject's `serve` extra (scripts/setup installs it): a test below holds the two to
each other. Skipped, saying why, where `transformers serve` cannot run offline; the
scripted server's "endless" fault (tests/reliability/test_failing_servers.py) has the
same behaviour without it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _serve_available() -> str | None:
    try:
        import accelerate  # noqa: F401  (transformers serve loads with a device map)
        from transformers.utils.import_utils import is_serve_available
    except ImportError as e:
        return f"transformers serve cannot run here: {e}"
    return None if is_serve_available() else "transformers serve needs fastapi and uvicorn: pip install 'transformers[serving]'"


def _readme_commands() -> tuple[str, str]:
    """The README's `transformers serve` line and the `pytest` line after it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    serve = re.search(r"^transformers serve .*$", text, re.M)
    assert serve is not None, "README.md shows no `transformers serve` command"
    run = re.search(r"^pytest --model=openai:\./my-vlm@\S+.*$", text[serve.end():], re.M)
    assert run is not None, "README.md shows no pytest command after `transformers serve`"
    return serve.group(0).split("#")[0].strip().rstrip("&").strip(), run.group(0).split("#")[0].strip()


def _readme_packages() -> list[str]:
    """The requirements of the README's `pip install` line before `transformers serve`."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    serve = re.search(r"^transformers serve .*$", text, re.M)
    assert serve is not None
    pip = re.findall(r"^pip install (.*?)(?:\s+#.*)?$", text[:serve.start()], re.M)
    assert pip, "README.md names no `pip install` line before `transformers serve`"
    return shlex.split(pip[-1])


def _name(requirement: str) -> str:
    """A requirement's distribution name and extras, lower case ("transformers[serving]")."""
    return re.sub(r"\s*[<>=!~;].*$", "", requirement).strip().lower()


def test_the_readme_serving_packages_are_the_serve_extra_and_installed() -> None:
    # "As written": the README's pip line is what scripts/setup installs (the serve extra of
    # the dev extra), so the server the tests start runs on exactly those packages.
    import tomllib
    from importlib.metadata import PackageNotFoundError, version

    extra = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert sorted(_name(r) for r in _readme_packages()) == sorted(_name(r) for r in extra["serve"])
    assert any("serve" in r for r in extra["dev"])  # scripts/setup installs [hf,dev]
    assert "pillow" in {_name(r) for r in extra["serve"]}  # a vision model's image processor needs it
    for requirement in extra["serve"]:
        name = _name(requirement).split("[")[0]
        try:
            version(name)
        except PackageNotFoundError:
            pytest.fail(f"{name} (the serve extra) is not installed: run scripts/setup")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """(base URL, served model name, the README's pytest command) of a running server."""
    why = _serve_available()
    if why:
        pytest.skip(why)
    from medrcube.testing.tiny_vlm import build_tiny_vlm

    model = str(build_tiny_vlm(tmp_path_factory.mktemp("served") / "my-vlm"))
    port = _free_port()
    serve, run = _readme_commands()
    argv = [a.replace("./my-vlm", model).replace("8000", str(port)) for a in shlex.split(serve)]
    argv[0] = str(Path(sys.executable).with_name("transformers"))
    argv += ["--host", "127.0.0.1"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=5) as r:
                    if json.load(r).get("data"):
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not come up: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(1)
        yield base, model, run.replace("./my-vlm", model).replace("8000", str(port))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.slow
def test_the_readme_command_finishes_with_every_answer_recorded(gate_ws, served) -> None:
    base, model, command = served
    args = shlex.split(command)[1:]  # the README's pytest arguments (its --model)
    result = gate_ws.run(*args)

    records = [json.loads(line) for line in (gate_ws.run_dirs()[-1] / "results.jsonl").read_text().splitlines()]
    assert len(records) == 27
    outcomes = {r["outcome"] for r in records}
    assert outcomes <= {"correct", "wrong", "unparsed", "refused", "truncated"}, outcomes  # no request failed
    assert "truncated" in outcomes  # noise runs to the limit: recorded as cut, never graded
    assert result.ret in (10, 11)  # decided or undecided, never QUALIFIED on noise
    run_json = json.loads((gate_ws.run_dirs()[-1] / "run.json").read_text())
    assert run_json.get("aborted") is None


@pytest.mark.slow
def test_a_wrong_model_name_is_one_usage_error_naming_the_served_one(gate_ws, served) -> None:
    base, model, _ = served
    result = gate_ws.run(model=f"openai:wrong-model-name@{base}")
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert result.ret == pytest.ExitCode.USAGE_ERROR and len(errors) == 1, result.errlines
    assert repr(model) in errors[0] and "'wrong-model-name'" in errors[0]


@pytest.mark.slow
def test_the_servers_own_words_are_kept_for_a_400(served) -> None:
    import asyncio

    from medrcube.models.base import Request
    from medrcube.models.openai_adapter import OpenAIAdapter

    base, model, _ = served
    adapter = OpenAIAdapter("wrong-model-name", base_url=base, max_retries=0)
    (response,) = asyncio.run(adapter.generate([Request(key="k", item_id="i", prompt="Question: x?\nOptions:\nA. a")]))
    assert response.error is not None and f"Server is pinned to '{model}'; requested 'wrong-model-name'." in response.error
    assert "temperature" not in response.error


@pytest.mark.slow
def test_a_near_miss_name_is_asked_as_the_server_lists_it(served) -> None:
    # The server lists the model's path and refuses every other name with HTTP 400
    # ("Server is pinned to ..."): the pre-flight resolves the bare name to the listed one.
    import asyncio

    from medrcube.models.base import Request
    from medrcube.models.openai_adapter import OpenAIAdapter

    base, model, _ = served
    adapter = OpenAIAdapter("my-vlm", base_url=base, max_retries=0, params={"max_tokens": 4})

    async def ask() -> tuple[object, object]:
        said = await adapter.preflight()
        (response,) = await adapter.generate([Request(key="k", item_id="i", prompt="Question: x?\nOptions:\nA. a")])
        await adapter.aclose()
        return said, response

    said, response = asyncio.run(ask())
    assert said.served == model and said.resolved and adapter.model == model  # type: ignore[attr-defined]
    assert response.error is None or "pinned" not in response.error  # type: ignore[attr-defined]
