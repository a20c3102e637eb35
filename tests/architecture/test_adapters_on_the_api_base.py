"""Adapters stand on the API base, not on each other: no provider's adapter module imports
another provider's, with no exception (models/api_base.py holds the contract they share;
models/openai_wire.py the chat-completions wire that the OpenAI and vLLM adapters both
speak, as siblings). Imports made inside functions count, in either spelling
(`from medrcube.models.openai_adapter import X`, `from medrcube.models import openai_adapter`)."""

from __future__ import annotations

import ast
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "src" / "medrcube" / "models"


def _imported_models(path: Path) -> set[str]:
    """The medrcube.models modules a file imports (their last name), anywhere in it."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        out.update(n.split(".")[2] for n in names if n.startswith("medrcube.models.") and n.count(".") >= 2)
    return out


def adapters_importing_others() -> dict[str, list[str]]:
    adapters = {p.stem for p in MODELS.glob("*_adapter.py")}
    found = {}
    for name in sorted(adapters):
        others = _imported_models(MODELS / f"{name}.py") & (adapters - {name})
        if others:
            found[name] = sorted(others)
    return found


def test_no_adapter_module_imports_another_provider_s() -> None:
    adapters = {p.stem for p in MODELS.glob("*_adapter.py")}
    assert {"openai_adapter", "anthropic_adapter", "gemini_adapter", "vllm_adapter", "hf_adapter"} <= adapters
    assert adapters_importing_others() == {}


def test_the_scan_sees_both_spellings(tmp_path: Path) -> None:
    """The scan would catch an adapter that imported another (a file of its own here, not src/)."""
    probe = tmp_path / "probe_adapter.py"
    probe.write_text("def f():\n    from medrcube.models import openai_adapter\n"
                     "from medrcube.models.gemini_adapter import GeminiAdapter\n", encoding="utf-8")
    assert _imported_models(probe) == {"openai_adapter", "gemini_adapter"}


def test_no_adapter_class_subclasses_another_provider_s() -> None:
    from medrcube.models.anthropic_adapter import AnthropicAdapter
    from medrcube.models.api_base import ApiAdapter
    from medrcube.models.gemini_adapter import GeminiAdapter
    from medrcube.models.openai_adapter import OpenAIAdapter
    from medrcube.models.openai_wire import ChatCompletionsAdapter
    from medrcube.models.vllm_adapter import VLLMAdapter

    for cls in (AnthropicAdapter, GeminiAdapter):
        assert cls.__mro__[1] is ApiAdapter, cls
    for cls in (OpenAIAdapter, VLLMAdapter):  # siblings on the chat-completions wire
        assert cls.__mro__[1:3] == (ChatCompletionsAdapter, ApiAdapter), cls
    providers = {AnthropicAdapter, GeminiAdapter, OpenAIAdapter, VLLMAdapter}
    for cls in providers:
        assert not (set(cls.__mro__[1:]) & providers), cls
    assert not ChatCompletionsAdapter.provider  # the wire names no provider
