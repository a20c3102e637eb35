"""Outside gate/, no module tests a check kind by its name: the outputs (Allure, the
summary, report.html, the dossier) read what they need from the kind registry
(gate/kinds.py), so a kind added by entry point is shown like a built-in one."""

from __future__ import annotations

import ast
from pathlib import Path

from medrcube.gate.kinds import registered

SRC = Path(__file__).resolve().parents[2] / "src" / "medrcube"


def _names_kind(node: ast.expr) -> bool:
    """`x.kind`, `kind`, `x.kind.value`, `c.get("kind")`, `c["kind"]`."""
    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Name):
        return node.id == "kind"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "kind"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    return False


def _kind_literals(node: ast.expr, kinds: set[str]) -> set[str]:
    values = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {v.value for v in values if isinstance(v, ast.Constant) and v.value in kinds}


def offences() -> list[str]:
    kinds = {e.name for e in registered()}
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.relative_to(SRC).parts[0] == "gate":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any(_names_kind(s) for s in sides):
                named = set().union(*(_kind_literals(s, kinds) for s in sides))
                if named:
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}: {sorted(named)}")
    return found


def test_no_module_outside_gate_tests_a_kind_by_name() -> None:
    assert offences() == []


def test_the_scan_sees_a_comparison_by_name(tmp_path: Path) -> None:
    kinds = {e.name for e in registered()}
    tree = ast.parse('if c.get("kind") == "calibration" or c.kind.value in ("credibility", "x"): pass')
    (cmp1, cmp2) = [n for n in ast.walk(tree) if isinstance(n, ast.Compare)]
    assert _names_kind(cmp1.left) and _kind_literals(cmp1.comparators[0], kinds) == {"calibration"}
    assert _names_kind(cmp2.left) and _kind_literals(cmp2.comparators[0], kinds) == {"credibility"}
