"""A pytester workspace for the gate: the real suite (medrcube/suite, copied as tests_benchmark/),
a small JSON Lines cube with real PNG images, a thresholds file, and scripts for the
scripted OpenAI-compatible server and for replay files.

The cube (27 items, unique questions so that no two blind prompts share a store key):

    Chest/X-Ray/Disease Diagnosis     12 items, high level, images cx0..cx11
    Chest/X-Ray/Modality Recognition  12 items, low level, on the same 12 images (12 pairs)
    Brain/MRI/Organ Recognition        3 items: below min_n, always skipped

`pytest_plugins = ["pytester"]` is in the repository's top-level conftest.py.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Imported here so that pytester's in-process runs find them loaded already: its
# sys.modules snapshot drops whatever a run imported, and numpy cannot be imported twice
# in one process (scipy is also slow to import, once per run would cost seconds).
import hypothesis  # noqa: F401  (its pytest plugin imports it in every run's terminal summary)
import numpy  # noqa: F401
import openai  # noqa: F401
import pytest
import scipy.stats  # noqa: F401
from PIL import Image

import medrcube.gate.evaluate  # noqa: F401
import medrcube.models.openai_adapter  # noqa: F401
import medrcube.plugin.hooks  # noqa: F401
import medrcube.run.runner  # noqa: F401
import medrcube.rundir.files  # noqa: F401
from medrcube.models.vllm_engine import EngineError, find_python
from medrcube.testing.server import ScriptedServer

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "src" / "medrcube" / "suite"  # the packaged suite, copied as tests_benchmark/
KEY_ENV = "MEDRCUBE_TEST_KEY"
LETTERS = "ABCD"

THRESHOLDS = """\
version: 1
defaults: {rule: point, confidence: 0.95, min_n: 10, max_error_rate: 0.05}
overall: {bound: 0.6}
slices:
  part: {default: {bound: 0.6}}
cells:
  - {match: "*/*/*", bound: 0.6}
credibility:
  min_grounding: 0.1
  min_pairs: 10
  rule: point
  by_part: false
  exclude_low_tasks: []
image_dependence: {min_drop: 0.2, rule: point, min_n: 10}
position_robustness: {max_gap: 0.15, min_circular_accuracy: 0.5, rule: point, min_n: 10}
regression: {alpha: 0.05, margin: 0.05, min_n: 10, per_cell: true}
"""


# A policy with the `deployment` profile (the ledger and evidence tests run under it).
DEPLOYMENT_THRESHOLDS = """\
version: 1
defaults: {rule: point, min_n: 10}
overall: {bound: 0.6}
profiles:
  deployment:
    overall: {bound: 0.6}
"""


def _png(shade: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (shade, 255 - shade, (shade * 7) % 256)).save(buf, format="PNG")
    return buf.getvalue()


def cube_items() -> list[dict[str, Any]]:
    """The cube's items as canonical JSON Lines records (Item.to_dict layout)."""
    items: list[dict[str, Any]] = []
    for i in range(12):
        items.append(
            {
                "id": f"cx-dd-{i:02d}",
                "dataset": "plugin-test",
                "image": f"img/cx{i}.png",
                "question": f"Case {i}: what is the most likely diagnosis on this chest radiograph?",
                "options": ["pneumonia", "effusion", "normal", "nodule"],
                "answer": i % 4,
                "task": "Disease Diagnosis",
                "modality": "X-Ray",
                "part": "Chest",
            }
        )
        items.append(
            {
                "id": f"cx-mr-{i:02d}",
                "dataset": "plugin-test",
                "image": f"img/cx{i}.png",
                "question": f"Case {i}: which imaging modality acquired this image?",
                "options": ["CT", "MRI", "X-Ray", "ultrasound"],
                "answer": 2,
                "task": "Modality Recognition",
                "modality": "X-Ray",
                "part": "Chest",
            }
        )
    for i in range(3):
        items.append(
            {
                "id": f"br-or-{i}",
                "dataset": "plugin-test",
                "image": f"img/br{i}.png",
                "question": f"Brain case {i}: which organ is the main subject?",
                "options": ["brain", "liver", "kidney"],
                "answer": 0,
                "task": "Organ Recognition",
                "modality": "MRI",
                "part": "Brain",
            }
        )
    return items


def option_letter(prompt: str, text: str) -> str | None:
    """The letter under which option `text` appears in this prompt ("B. effusion")."""
    for line in prompt.splitlines():
        m = re.match(r"^\s*([A-Z])[.)]\s+(.*?)\s*$", line)
        if m and m.group(2).casefold() == text.casefold():
            return m.group(1)
    return None


def has_image(body: Mapping[str, Any]) -> bool:
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list) and any(part.get("type") == "image_url" for part in content):
            return True
    return False


@dataclass
class GateWorkspace:
    """The pytester directory with the suite, the cube and the thresholds."""

    pytester: pytest.Pytester
    items: list[dict[str, Any]] = field(default_factory=cube_items)

    @property
    def path(self) -> Path:
        return self.pytester.path

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {it["id"]: it for it in self.items}

    # -- model answers -------------------------------------------------------------------

    def answer_key(self, wrong: Sequence[str] = ()) -> dict[str, str]:
        """Scripted server `answer_key`: the right option text, or a wrong one for the
        item ids listed in `wrong`."""
        key = {}
        for it in self.items:
            k = it["answer"] if it["id"] not in wrong else (it["answer"] + 1) % len(it["options"])
            key[it["question"]] = it["options"][k]
        return key

    def replay(self, name: str, wrong: Sequence[str] = ()) -> str:
        """A replay file answering every item (standard variant) by letter."""
        lines = []
        for it in self.items:
            k = it["answer"] if it["id"] not in wrong else (it["answer"] + 1) % len(it["options"])
            lines.append(json.dumps({"id": it["id"], "response": LETTERS[k]}))
        path = self.path / name
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return f"replay:{path}"

    def ids(self, task: str) -> list[str]:
        return [it["id"] for it in self.items if it["task"] == task]

    has_image = staticmethod(has_image)
    option_letter = staticmethod(option_letter)

    @staticmethod
    def openai(server: ScriptedServer) -> str:
        """The model spec of the scripted server (the key comes from OPENAI_API_KEY)."""
        return f"openai:test-model@{server.base_url}"

    # -- running ---------------------------------------------------------------------------

    def args(self, *extra: str, model: str | None = None, store: str = ".medrcube") -> list[str]:
        # hypothesis's plugin imports hypothesis in every run's summary: seconds per xdist worker.
        out = ["tests_benchmark", "--cube=cube/cube.jsonl", "--thresholds=thresholds.yaml", "-p", "no:cacheprovider"]
        out += ["-p", "no:hypothesispytest"]
        out += [f"--response-store={store}", "-rA"]
        if model:
            out.append(f"--model={model}")
        return out + list(extra)

    def run(self, *extra: str, model: str | None = None, store: str = ".medrcube") -> pytest.RunResult:
        return self.pytester.runpytest(*self.args(*extra, model=model, store=store))

    def run_subprocess(self, *extra: str, model: str | None = None, store: str = ".medrcube") -> pytest.RunResult:
        # a bound on a hang only: far beyond an xdist run on a loaded 2-core machine
        return self.pytester.runpytest_subprocess(*self.args(*extra, model=model, store=store), timeout=900)

    def run_dirs(self) -> list[Path]:
        reports = self.path / "reports"
        return sorted(p for p in reports.iterdir() if p.is_dir()) if reports.is_dir() else []

    def gate_json(self) -> dict[str, Any]:
        """gate.json of the latest run."""
        dirs = self.run_dirs()
        assert dirs, "no run directory was written"
        return json.loads((dirs[-1] / "gate.json").read_text(encoding="utf-8"))

    def verdicts(self) -> dict[str, str]:
        return {c["id"]: c["verdict"] for c in self.gate_json()["checks"]}


@pytest.fixture(scope="session", autouse=True)
def _transport_loaded() -> None:
    """One real request through the OpenAI adapter before any in-process pytester run.

    The HTTP stack imports part of itself at the first request. Imported inside a
    pytester run, those modules are dropped by its sys.modules snapshot afterwards, and a
    later test in this worker re-imports them as new module objects: their exception
    classes then no longer match the ones the client maps (a read timeout escapes as a raw
    transport error instead of openai.APITimeoutError). Loading them here, outside any
    run, keeps one copy for the whole worker.
    """
    import asyncio

    from medrcube.models.base import Request
    from medrcube.models.openai_adapter import OpenAIAdapter

    async def ask(url: str) -> None:
        adapter = OpenAIAdapter("warm-up", base_url=url, timeout=30.0, max_retries=0)
        try:
            (response,) = await adapter.generate([Request(key="k", item_id="warm-up", prompt="Question: x\nOptions:\nA. a\nB. b")])
        finally:
            await adapter.aclose()
        assert response.ok, response.error

    with ScriptedServer() as server:
        asyncio.run(ask(server.base_url))


@pytest.fixture
def gate_ws(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> GateWorkspace:
    ws = GateWorkspace(pytester)
    shutil.copytree(SUITE, ws.path / "tests_benchmark", ignore=shutil.ignore_patterns("__pycache__", "mini", "__init__.py"))
    cube = ws.path / "cube"
    (cube / "img").mkdir(parents=True)
    for i in range(12):
        (cube / "img" / f"cx{i}.png").write_bytes(_png(10 * i))
    for i in range(3):
        (cube / "img" / f"br{i}.png").write_bytes(_png(200 + 10 * i))
    with (cube / "cube.jsonl").open("w", encoding="utf-8") as fh:
        for it in ws.items:
            fh.write(json.dumps(it) + "\n")
    (ws.path / "thresholds.yaml").write_text(THRESHOLDS, encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-for-the-scripted-server")
    monkeypatch.setenv(KEY_ENV, "sk-dummy-for-the-scripted-server")
    return ws


@pytest.fixture
def gate_server() -> Iterator[ScriptedServer]:
    """A scripted server (in this process; the runs under test reach it over HTTP)."""
    with ScriptedServer() as server:
        yield server


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The interpreter of vLLM's environment (scripts/setup-vllm); the test skips, saying
    why, where there is none."""
    try:
        return find_python()
    except EngineError as e:
        pytest.skip(f"no vLLM environment: {e}")


@pytest.fixture(scope="session")
def tiny_blip2(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BLIP-2 vLLM serves, built once per worker by the engine's own interpreter
    (its transformers reads it): test_vllm_engine.py and test_ray_serve.py share it. Read
    only; a test that needs the checkpoint under a path of its own (the engine processes
    are found by the model path on their command line) copies it."""
    out = tmp_path_factory.mktemp("engine") / "tiny-vlm"
    code = "import sys; from medrcube.testing.tiny_vlm import build_tiny_blip2; build_tiny_blip2(sys.argv[1])"
    subprocess.run([str(vllm_python), "-c", code, str(out)], check=True, capture_output=True, timeout=600,
                   env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    return out
