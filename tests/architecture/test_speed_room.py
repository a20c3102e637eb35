"""The start-up and tail machinery (plugin/speed/) is reached from four places only, so a
reader of the gate's rules never meets it: the plugin package (which narrows assertion
rewriting first), the hooks, the session and the leakage reading. Imports made inside
functions count."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
SPEED = "medrcube.plugin.speed"
ALLOWED = {"medrcube.plugin", "medrcube.plugin.hooks", "medrcube.plugin.session", "medrcube.plugin.leakage"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def importers() -> set[str]:
    found = set()
    for path in (SRC / "medrcube").rglob("*.py"):
        name = _module(path)
        if name == SPEED or name.startswith(SPEED + "."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            if any(t == SPEED or t.startswith(SPEED + ".") for t in targets):
                found.add(name)
    return found


def test_only_the_plugin_package_hooks_session_and_leakage_reach_the_speed_room() -> None:
    assert importers() <= ALLOWED, sorted(importers() - ALLOWED)
    assert "medrcube.plugin" in importers()  # the scan sees the package's own import of it
