"""Reports: one run's report.html and the leaderboard across runs.

    from medrcube.report import write_report_html, leaderboard
    write_report_html("reports/<run-id>")                       # -> reports/<run-id>/report.html
    leaderboard(["reports/a", "reports/b"], "reports/leaderboard")

Modules: readers (run directories and the reference evaluator's files), analysis (numbers
via the metrics package; cell correlation; credibility across models), plots (matplotlib
figures), html (the run page), leaderboard (+ leaderboard_html), templates/ (Jinja2).
Nothing heavy is imported until a function is used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["leaderboard", "write_report_html"]


def __getattr__(name: str) -> Any:
    if name == "write_report_html":
        from medrcube.report.html import write_report_html

        return write_report_html
    if name == "leaderboard":
        from medrcube.report.leaderboard import leaderboard

        return leaderboard
    raise AttributeError(f"module 'medrcube.report' has no attribute {name!r}")
