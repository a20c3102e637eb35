"""Adapters stand on the API base, not on each other: no provider's adapter module imports
another provider's (models/api_base.py holds the contract they share). The one exception
is named: the vLLM adapter is the OpenAI adapter on an engine the gate starts, since vLLM
serves OpenAI's chat-completions wire."""

from __future__ import annotations

import ast
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "src" / "medrcube" / "models"
SPEAKS_OPENAI = {"vllm_adapter": {"openai_adapter"}}


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_no_adapter_imports_another_provider_s() -> None:
    adapters = {p.stem for p in MODELS.glob("*_adapter.py")}
    assert {"openai_adapter", "anthropic_adapter", "gemini_adapter"} <= adapters
    found = {}
    for name in sorted(adapters):
        others = {m.rsplit(".", 1)[-1] for m in _imports(MODELS / f"{name}.py")
                  if m.startswith("medrcube.models.")} & (adapters - {name})
        others -= SPEAKS_OPENAI.get(name, set())
        if others:
            found[name] = sorted(others)
    assert found == {}


def test_the_api_adapters_share_the_base() -> None:
    from medrcube.models.anthropic_adapter import AnthropicAdapter
    from medrcube.models.api_base import ApiAdapter
    from medrcube.models.gemini_adapter import GeminiAdapter
    from medrcube.models.openai_adapter import OpenAIAdapter

    for cls in (OpenAIAdapter, AnthropicAdapter, GeminiAdapter):
        assert cls.__mro__[1] is ApiAdapter, cls
