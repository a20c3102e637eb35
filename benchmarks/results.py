"""The results: a terminal table, the JSON record, and benchmarks/RESULTS.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.harness import fmt

_STATUS = {"ok": "ok", "MISS": "MISS", "info": ""}


def rows(doc: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    return [(s["title"], s["metrics"]) for s in doc["scenarios"]]


def table(doc: dict[str, Any]) -> str:
    """The terminal table: one block per scenario, median [min - max] and the target."""
    lines = []
    width = max((len(m["label"]) for _, ms in rows(doc) for m in ms), default=40)
    width = min(width, 78)
    head = f"{'':<{width}}  {'median':>9}  {'min':>9}  {'max':>9}  {'unit':<6} {'n':>2}  target"
    for title, metrics in rows(doc):
        lines += ["", title, head]
        for m in metrics:
            target = m["target"]["text"] if m["target"] else ""
            status = _STATUS[m["status"]]
            label = m["label"] if len(m["label"]) <= width else m["label"][: width - 1] + "…"
            lines.append(f"{label:<{width}}  {fmt(m['median']):>9}  {fmt(m['min']):>9}  {fmt(m['max']):>9}  "
                         f"{m['unit']:<6} {m['n']:>2}  {target}{'  ' + status if status else ''}")
    for s in doc["scenarios"]:
        if s.get("error"):
            lines += ["", f"{s['title']}: FAILED: {s['error'].splitlines()[0]}"]
    return "\n".join(lines).lstrip("\n")


def write_json(doc: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(doc: dict[str, Any]) -> str:
    """benchmarks/RESULTS.md: every figure with its target, then the machine."""
    m = doc["machine"]
    out = [
        "# Benchmark results",
        "",
        f"Recorded {doc['date']} by `scripts/bench` (profile `{doc['profile']}`), the whole command taking "
        f"{doc['elapsed_s'] / 60:.1f} min. Generated from `benchmarks/results/latest.json`; how each figure is "
        "measured and what a miss means: `benchmarks/README.md`.",
        "",
        f"**Targets: {doc['summary']['ok']} met, {doc['summary']['miss']} missed**"
        + (f" ({', '.join(doc['summary']['missed'])})" if doc['summary']['missed'] else "")
        + (f"; **{len(doc['summary']['failed'])} scenario(s) failed** ({', '.join(doc['summary']['failed'])})"
           if doc["summary"]["failed"] else "") + ".",
        "",
        *[f"Rerun {m['date']} (`--only {','.join(m['scenarios'])} --merge`, load average "
          f"{m['load_average']['start']}): {', '.join(m['scenarios'])}." for m in doc.get("merged", [])],
        *([""] if doc.get("merged") else []),
        "Median of the runs, with min and max; `n` runs. The machine is shared: load average "
        f"{doc['load_average']['start']} at the start, {doc['load_average']['end']} at the end "
        "(1, 5, 15 min), so absolute times carry that noise; ratios to an ideal are steadier.",
        "",
    ]
    for s in doc["scenarios"]:
        out += [f"## {s['title']}", ""]
        if s.get("error"):
            out += [f"**Failed:** `{_md_escape(s['error'].splitlines()[0])}`", ""]
        if not s["metrics"]:
            continue
        out += ["| figure | median | min | max | unit | n | target | |", "|---|--:|--:|--:|---|--:|---|---|"]
        for x in s["metrics"]:
            label = _md_escape(x["label"].strip())
            if x["label"].startswith("  "):
                label = "&nbsp;&nbsp;" + label
            target = x["target"]["text"] if x["target"] else ""
            status = {"ok": "ok", "MISS": "**MISS**", "info": ""}[x["status"]]
            out.append(f"| {label} | {fmt(x['median'])} | {fmt(x['min'])} | {fmt(x['max'])} | {x['unit']} | {x['n']} "
                       f"| {_md_escape(target)} | {status} |")
        notes = [f"- {_md_escape(x['label'].strip())}: {x['note']}" for x in s["metrics"] if x.get("note")]
        out += ["", *notes, ""] if notes else [""]
    pk = ", ".join(f"{k} {v}" for k, v in m["packages"].items() if v)
    git = m.get("git", {})
    out += [
        "## Machine",
        "",
        f"- CPU: {m['cpu_model']}, {m['cores']} cores ({m['usable_cores']} usable)",
        f"- Memory: {m['memory_gib']} GiB",
        f"- OS: {m['platform']}",
        f"- Python: {m['python_impl']}",
        f"- Packages: {pk}",
        f"- Code: commit {git.get('commit', '?')}" + (" with uncommitted changes under src/" if git.get("src_modified") else ""),
        "",
    ]
    return "\n".join(out)
