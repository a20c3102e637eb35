"""The source says what the code does and why, not which issue brought it: history is in
git and in docs/ (a reference such as "issue 17" in src/ means nothing to a reader)."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "medrcube"
ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def test_no_issue_number_in_src() -> None:
    found = [f"{p.relative_to(SRC)}:{n}: {line.strip()}"
             for p in sorted(SRC.rglob("*")) if p.is_file() and p.suffix in (".py", ".yaml", ".j2", ".md", ".txt")
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if ISSUE.search(line)]
    assert found == []
