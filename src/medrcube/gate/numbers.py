"""The terminal summary's lines of numbers for the core kinds that have a shape of their own
(credibility, image dependence, position, regression, site checks), written from gate.json's
check entries and attached to their kinds by `@describes` (gate/kinds.py). The summary
(plugin/summary.py) asks the registry, never a kind's name, so a kind added by entry point
gives its own `numbers` or the generic line. Pure: strings from mappings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from medrcube.gate.account import short_method
from medrcube.gate.kinds import describes

Entry = Mapping[str, Any]


def fmt(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def labelled(name: Any, value: Any, interval: Any = None, method: Any = None) -> str:
    """`luck rate 0.054 [0.018, 0.090] (cluster-robust ...)`: a value with its own interval,
    named, and the interval's method; never an interval beside another value."""
    out = f"{str(name or 'value').replace('_', ' ')} {fmt(value)}"
    if value is not None and interval and len(interval) == 2 and None not in interval:
        out += f" [{interval[0]:.3f}, {interval[1]:.3f}]"
        if method:
            out += f" ({short_method(method)})"
    return out


@describes("credibility")
def credibility(entries: Sequence[Entry]) -> list[str]:
    lines = []
    for e in entries:
        d = e.get("details") or {}
        groups = " ".join(f"{g}={d[g]}" for g in "ABCD" if g in d)
        g = d.get("grounding") or {}
        g_iv = (g.get("lo"), g.get("hi")) if g.get("lo") is not None and g.get("hi") is not None else None
        decided = d.get("decided_on") or e.get("metric") or "grounding"  # the value decided on, with its own interval
        values = [labelled(decided, e.get("observed"), e.get("interval"), e.get("method"))]
        if decided != "grounding":  # grounding with its own interval, never the decided value's
            values.append(labelled("grounding", g.get("difference"), g_iv, g.get("method")))
        lines.append(
            f"credibility {e['id'].removeprefix('credibility/')}: {'; '.join(values)}; "
            f"{labelled('rationality', d.get('rationality'), d.get('rationality_interval'))}; "
            f"{labelled('shortcut probability', d.get('shortcut_prob'), d.get('shortcut_interval'))}; "
            f"{d.get('pairs', e['n'])} pairs"
            f"{f' ({groups})' if groups else ''}: {e['verdict']}"
        )
    return lines


@describes("image_dependence")
def image_dependence(entries: Sequence[Entry]) -> list[str]:
    return [
        f"image dependence: standard {fmt(d.get('standard_acc'))}, blind {fmt(d.get('blind_acc'))}, "
        f"{labelled('drop', e['observed'], e.get('interval'), e.get('method'))} on {e['n']} items, "
        f"options-only prior {fmt(d.get('options_only_prior'))}: {e['verdict']}"
        for e in entries for d in [e.get("details") or {}]
    ]


@describes("position")
def position(entries: Sequence[Entry]) -> list[str]:
    return [
        f"position: circular accuracy {fmt(e['observed'])}, standard {fmt(d.get('standard_acc'))}, "
        f"gap {fmt(d.get('gap'))} on {e['n']} items: {e['verdict']}"
        for e in entries for d in [e.get("details") or {}]
    ]


@describes("regression")
def regression(entries: Sequence[Entry]) -> list[str]:
    worse = sum(e["verdict"] == "fail" for e in entries)
    return [f"regression against the baseline: {worse} of {len(entries)} checks significantly worse"]


@describes("site")
def site(entries: Sequence[Entry]) -> list[str]:
    return [
        f"site check {e['id']}: {labelled(e.get('metric'), e['observed'], e.get('interval'), e.get('method'))} "
        f"n={e['n']} (bound {fmt(e['bound'], 2)}, {e['rule']}): {e['verdict']}"
        for e in entries
    ]
