"""The terminal summary's line per kind for the kinds registered with `summary_line`
(gate/kinds.py): robustness, answer agreement, per-finding sensitivity, calibration,
selective prediction, and any kind registered beyond them.

One line per kind: how many checks decided which way, then each check's number and
verdict (the first few; gate.json holds them all)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from medrcube.gate.kinds import registered

SHOWN = 6


def _num(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _short(e: Mapping[str, Any], prefix: str) -> str:
    cid = str(e["id"]).removeprefix(prefix)
    iv = e.get("interval")
    ci = f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else ""
    return f"{cid} {_num(e.get('observed'))}{ci} n={e.get('n')} {e['verdict']}"


def kind_lines(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for k in (k for k in registered() if k.summary_line):
        mine = [e for e in entries if e["kind"] == k.name]
        if not mine:
            continue
        tally: dict[str, int] = {}
        for e in mine:
            tally[str(e["verdict"])] = tally.get(str(e["verdict"]), 0) + 1
        counts = ", ".join(f"{n} {v}" for v, n in sorted(tally.items()))
        shown = "; ".join(_short(e, k.prefix) for e in mine[:SHOWN]) + (f"; ... ({len(mine)} in all)" if len(mine) > SHOWN else "")
        lines.append(f"{k.title} ({k.observed}; {counts}): {shown}")
    return lines
