"""The house keeps its shape: the import contracts of pyproject.toml (drawn in
docs/architecture.md) hold, no two modules import each other in a loop, nor do the parts
(modules and subpackages) of any package, and modules stay small. Imports made inside
functions count: grimp reads every import statement."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with the project's contracts, importing medrcube from `src`."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(exe), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )


def test_import_contracts_hold() -> None:
    result = lint_imports(SRC)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_violation_added_on_purpose_breaks_the_contracts(tmp_path: Path) -> None:
    copy = tmp_path / "src"
    shutil.copytree(SRC / "medrcube", copy / "medrcube", ignore=shutil.ignore_patterns("__pycache__"))
    metrics = copy / "medrcube" / "metrics" / "accuracy.py"
    # The pure metrics reaching up into the report room, inside a function as a lazy import would.
    metrics.write_text(metrics.read_text() + "\n\ndef _leak():\n    import medrcube.report.html  # noqa: F401\n")
    result = lint_imports(copy)
    assert result.returncode != 0
    assert "medrcube.metrics.accuracy -> medrcube.report.html" in result.stdout


def _checks_on_a_copy(tmp_path: Path, edit_metrics: str) -> subprocess.CompletedProcess[str]:
    """scripts/check on a copy of the checkout's src/, tests/ and benchmarks (ruff reads them all) whose
    metrics/accuracy.py ends in `edit_metrics`."""
    for rel in ("scripts/check", "pyproject.toml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, tmp_path / rel)
    shutil.copytree(SRC / "medrcube", tmp_path / "src" / "medrcube", ignore=shutil.ignore_patterns("__pycache__"))
    for tree in ("tests", "benchmarks", "tests_benchmark"):
        shutil.copytree(ROOT / tree, tmp_path / tree, ignore=shutil.ignore_patterns("__pycache__", "out", "results"))
    metrics = tmp_path / "src" / "medrcube" / "metrics" / "accuracy.py"
    metrics.write_text(metrics.read_text() + edit_metrics)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src"), "MEDRCUBE_VENV": str(Path(sys.executable).parents[1])}
    return subprocess.run([str(tmp_path / "scripts" / "check")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_test_command_stops_on_a_lint_finding(tmp_path: Path) -> None:
    # scripts/test runs scripts/check first (set -e): a failing check means no tests run.
    assert '"$here/scripts/check"' in (ROOT / "scripts" / "test").read_text()
    result = _checks_on_a_copy(tmp_path, "\nimport json\n")
    assert result.returncode == 1
    assert "F401" in result.stdout and "ruff failed" in result.stderr
    assert "mypy" not in result.stdout  # cheapest first: the slow check never started


def test_the_test_command_stops_on_a_contract_violation(tmp_path: Path) -> None:
    result = _checks_on_a_copy(tmp_path, "\n\ndef _leak():\n    import medrcube.report.html  # noqa: F401\n")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "scripts/check: ruff: All checks passed!" in result.stdout
    assert "medrcube.metrics.accuracy -> medrcube.report.html" in result.stdout
    assert "lint-imports failed" in result.stderr


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start) & modules)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child) & modules))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("medrcube", cache_dir=None)


def test_no_module_imports_itself_through_others(graph: grimp.ImportGraph) -> None:
    modules = {m for m in graph.modules if m.startswith("medrcube")}
    assert _cycles(graph, modules) == []


def test_no_package_cycle(graph: grimp.ImportGraph) -> None:
    # Rooms (first-level packages) as nodes: an arrow when any module of one imports the other.
    rooms = {m.split(".")[1] for m in graph.modules if m.count(".") >= 1}
    arrows: dict[str, set[str]] = {r: set() for r in rooms}
    for m in graph.modules:
        if m.count(".") < 1:
            continue
        for t in graph.find_modules_directly_imported_by(m):
            if t.startswith("medrcube.") and t.split(".")[1] != m.split(".")[1]:
                arrows[m.split(".")[1]].add(t.split(".")[1])
    room_graph = grimp.ImportGraph()
    for r in rooms:
        room_graph.add_module(r)
    for r, targets in arrows.items():
        for t in targets:
            room_graph.add_import(importer=r, imported=t)
    assert _cycles(room_graph, rooms) == []


def package_graph(graph: grimp.ImportGraph, package: str) -> tuple[grimp.ImportGraph, set[str]]:
    """The direct children of `package` (its modules and subpackages) as nodes, with an
    arrow when any module inside one imports any module inside another."""
    depth = package.count(".") + 1
    child_of = {m: ".".join(m.split(".")[: depth + 1]) for m in graph.modules if m.startswith(package + ".")}
    children = set(child_of.values())
    folded = grimp.ImportGraph()
    for c in children:
        folded.add_module(c)
    for m, c in child_of.items():
        for t in graph.find_modules_directly_imported_by(m):
            if t in child_of and child_of[t] != c:
                folded.add_import(importer=c, imported=child_of[t])
    return folded, children


def packages(graph: grimp.ImportGraph) -> list[str]:
    modules = {m for m in graph.modules if m.startswith("medrcube")}
    return sorted(p for p in modules if any(m.startswith(p + ".") for m in modules))


def test_no_cycle_between_the_parts_of_any_package(graph: grimp.ImportGraph) -> None:
    # The room-level test above, at every depth: within construction/, readers/ and stages/
    # (say) must not import each other in a loop even when no two modules do.
    found = {p: _cycles(*package_graph(graph, p)) for p in packages(graph)}
    assert {p: c for p, c in found.items() if c} == {}
    assert "medrcube.construction" in found and "medrcube.construction.readers" in found


def test_the_package_cycle_finder_sees_a_loop_of_subpackages() -> None:
    # a.x -> b.y and b.z -> a.w: no module imports itself, but a and b import each other.
    g = grimp.ImportGraph()
    for m in ("pkg", "pkg.a", "pkg.a.x", "pkg.a.w", "pkg.b", "pkg.b.y", "pkg.b.z"):
        g.add_module(m)
    g.add_import(importer="pkg.a.x", imported="pkg.b.y")
    g.add_import(importer="pkg.b.z", imported="pkg.a.w")
    assert _cycles(g, set(g.modules)) == []
    assert _cycles(*package_graph(g, "pkg")) == [["pkg.a", "pkg.b"]]


def test_the_cycle_finder_finds_a_cycle() -> None:
    g = grimp.ImportGraph()
    for m in ("a", "b", "c"):
        g.add_module(m)
    g.add_import(importer="a", imported="b")
    g.add_import(importer="b", imported="a")
    g.add_import(importer="b", imported="c")
    assert _cycles(g, {"a", "b", "c"}) == [["a", "b"]]
