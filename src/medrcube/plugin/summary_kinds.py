"""The terminal summary's line per kind of issues 16 and 17: robustness, answer
agreement, per-finding sensitivity, calibration and selective prediction.

One line per kind: how many checks decided which way, then each check's number and
verdict (the first few; gate.json holds them all)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SHOWN = 6
KINDS: dict[str, tuple[str, str]] = {  # kind -> (label, what `observed` is)
    "robustness": ("robustness to image perturbations", "drop"),
    "robustness_agreement": ("answer agreement under perturbations", "agreement"),
    "finding": ("per-finding sensitivity", "sensitivity"),
    "calibration": ("calibration", "error"),
    "selective": ("selective prediction", "value"),
}
PREFIXES = ("robustness/", "agreement/", "finding/", "selective/")


def _num(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _short(e: Mapping[str, Any]) -> str:
    cid = str(e["id"])
    for p in PREFIXES:
        cid = cid.removeprefix(p)
    iv = e.get("interval")
    ci = f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else ""
    return f"{cid} {_num(e.get('observed'))}{ci} n={e.get('n')} {e['verdict']}"


def kind_lines(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for kind, (label, what) in KINDS.items():
        mine = [e for e in entries if e["kind"] == kind]
        if not mine:
            continue
        tally: dict[str, int] = {}
        for e in mine:
            tally[str(e["verdict"])] = tally.get(str(e["verdict"]), 0) + 1
        counts = ", ".join(f"{n} {v}" for v, n in sorted(tally.items()))
        shown = "; ".join(_short(e) for e in mine[:SHOWN]) + (f"; ... ({len(mine)} in all)" if len(mine) > SHOWN else "")
        lines.append(f"{label} ({what}; {counts}): {shown}")
    return lines
