"""The robustness panel of report.html: accuracy under each image perturbation.

Shown when the run asked at least one perturbation variant (run/perturb.py). It holds:
- a figure: standard and perturbed accuracy per perturbation and level, with the
  clustered interval of the drop;
- a table: per perturbation, the paired items and images, standard and perturbed
  accuracy, the drop and its 95% interval (clustered by image), the answer agreement
  and its interval, and the gate's verdicts on its robustness and agreement checks
  (gate.json; the report decides nothing: without a gate run, or a check, it shows none);
- the drop per task for each perturbation, red where the gate failed that task's check;
- a strip of one item's images as each perturbation showed them (remade from the cube
  with the same parameters and seed, so byte for byte what was sent to a model with the
  default size limit), with the answer given under each, so a reader sees what was asked.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medrcube.gate.kinds import entry_of
from medrcube.metrics.perturbation import PerturbationRobustness, perturbation_variants, robustness_table
from medrcube.records import GradedRecord
from medrcube.report.readers import RunData
from medrcube.taxonomy import TASK_NAMES, task_abbrev

if TYPE_CHECKING:
    from medrcube.cube.item import Cube

STRIP_SIDE = 150
DETAIL = 48  # source pixels of the centre detail, shown enlarged (noise and JPEG blocks)


def _per_perturbation(check: Mapping[str, Any], observed: str | None = None) -> bool:
    """A check of a kind with one check per perturbation asked (gate/kinds.py), and, when
    `observed` is given, whose number is that (the accuracy "drop" or the "agreement")."""
    entry = entry_of(str(check.get("kind")))
    return bool(entry and entry.per_perturbation and (observed is None or entry.observed == observed))


def gate_statuses(gate: Mapping[str, Any] | None) -> dict[str, str]:
    """The gate's verdict on each robustness and agreement check of gate.json, by id."""
    return {str(c.get("id")): str(c.get("verdict")) for c in (gate or {}).get("checks") or [] if _per_perturbation(c)}


def _bound_of(gate: Mapping[str, Any] | None, observed: str) -> float | None:
    """The margin (or agreement bound) the gate decided with, as gate.json records it."""
    return next((c.get("bound") for c in (gate or {}).get("checks") or [] if _per_perturbation(c, observed)), None)


def robustness_section(run: RunData, cube: Cube | None = None, plots_dir: Path | None = None) -> dict[str, Any] | None:
    """The panel's template values, or None when the run has no perturbation variant."""
    variants = perturbation_variants(run.records)
    if not variants:
        return None
    overall = robustness_table(run.records, variants=variants)
    statuses = gate_statuses(run.gate)
    rows = [_row(r, statuses) for r in overall]
    figure = None
    if any(r.drop.n for r in overall):
        from medrcube.report import plots

        figure = plots.save(accuracy_figure(overall, statuses), "robustness", plots_dir, tight=False).data_uri
    return {
        "rows": rows,
        "figure": figure,
        "margin": _bound_of(run.gate, "drop"),
        "bound": _bound_of(run.gate, "agreement"),
        "by_task": by_task(run.records, variants, statuses),
        "strip": strip(run.records, variants, cube),
    }


def _row(r: PerturbationRobustness, statuses: Mapping[str, str]) -> dict[str, Any]:
    """One perturbation's figures and the gate's verdicts on its overall checks (None: no such check)."""
    return {
        "variant": r.variant, "n": r.drop.n, "clusters": r.drop.clusters,
        "standard": r.drop.standard_acc, "perturbed": r.drop.perturbed_acc, "drop": r.drop.drop,
        "lo": r.drop.lo, "hi": r.drop.hi, "lost": r.drop.b, "gained": r.drop.c,
        "agreement": r.agreement.estimate, "agree_lo": r.agreement.lo, "agree_hi": r.agreement.hi,
        "accuracy_decision": statuses.get(f"robustness/{r.variant}/overall"),
        "agreement_decision": statuses.get(f"agreement/{r.variant}/overall"),
        "errors": r.errors, "not_graded": r.not_graded,
    }


def by_task(records: Sequence[GradedRecord], variants: Sequence[str],
            statuses: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Tasks x perturbations: the drop (and n) on each task, and the gate's verdict there."""
    statuses = statuses or {}
    cells: dict[tuple[str, str], PerturbationRobustness] = {
        (r.scope.split("=", 1)[1], r.variant): r for r in robustness_table(records, by="task", variants=variants)
    }
    tasks = sorted({t for t, _ in cells}, key=lambda t: (TASK_NAMES.index(t) if t in TASK_NAMES else 99, t))
    return {
        "variants": list(variants),
        "rows": [{"task": t, "abbrev": task_abbrev(t),
                  "cells": [_task_cell(cells.get((t, v)), statuses.get(f"robustness/{v}/task/{t}"))
                            for v in variants]} for t in tasks],
    }


def _task_cell(r: PerturbationRobustness | None, status: str | None) -> dict[str, Any] | None:
    if r is None or r.drop.n == 0:
        return None
    d = r.drop.drop or 0.0
    tone = {"fail": "bad", "undecided": "warn"}.get(status or "", "")
    title = f"drop {100 * d:.1f} points, 95% CI [{100 * r.drop.lo:.1f}, {100 * r.drop.hi:.1f}], n={r.drop.n}"
    title += f"; gate: {status}" if status else ""
    return {"drop": d, "change": signed_points(-d), "n": r.drop.n, "tone": tone, "title": title}


def signed_points(x: float) -> str:
    """A change in points: "+3", "−12", and "0" (never "-0")."""
    p = round(100 * x)
    return "0" if p == 0 else f"{'+' if p > 0 else '−'}{abs(p)}"


def accuracy_figure(results: Sequence[PerturbationRobustness], statuses: Mapping[str, str] | None = None) -> Any:
    """Horizontal bars: perturbed accuracy per perturbation, the standard accuracy on the
    same items as a tick, and the drop's interval as a whisker around the bar's end; red
    where the gate failed the perturbation's overall check."""
    statuses = statuses or {}
    from medrcube.report.plots import use_agg

    use_agg()
    import matplotlib.pyplot as plt
    shown = [r for r in results if r.drop.n]
    fig, ax = plt.subplots(figsize=(7.2, 0.9 + 0.3 * len(shown)))
    ys = list(range(len(shown)))[::-1]
    for y, r in zip(ys, shown, strict=True):
        std, per = 100 * (r.drop.standard_acc or 0.0), 100 * (r.drop.perturbed_acc or 0.0)
        bad = statuses.get(f"robustness/{r.variant}/overall") == "fail"
        colour = "#e45756" if bad else "#4c78a8"
        ax.barh(y, per, height=0.6, color=colour)
        ax.plot([per], [y], marker="D", markersize=4, color=colour)  # visible where the bar has no length
        ax.plot([std, std], [y - 0.38, y + 0.38], color="#222222", linewidth=1.6)
        lo, hi = std - 100 * r.drop.hi, std - 100 * r.drop.lo  # perturbed accuracy implied by the drop's CI
        ax.plot([max(0, lo), min(100, hi)], [y, y], color="#222222", linewidth=0.9)
        ax.text(101, y, f"{per:.0f}% ({signed_points((per - std) / 100)})", va="center", fontsize=7.5,
                color="#c0392b" if bad else "#222222")
    ax.set_yticks(ys, [r.variant for r in shown])
    ax.set_xlim(0, 112)
    ax.set_xticks([0, 20, 40, 60, 80, 100])
    ax.set_xlabel("accuracy (%) under the perturbation; black tick: standard on the same items")
    ax.xaxis.grid(True, color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    height = 0.9 + 0.3 * len(shown)
    fig.subplots_adjust(left=0.16, right=0.97, top=1 - 0.1 / height, bottom=0.55 / height)
    return fig


# -- the strip of one item ------------------------------------------------------------------


def pick_item(records: Sequence[GradedRecord], variants: Sequence[str]) -> str | None:
    """The item to show: asked in the most perturbations, preferring one whose answer
    changes under some of them (what the panel is about), then the first in run order."""
    by_item: dict[str, dict[str, GradedRecord]] = defaultdict(dict)
    order: list[str] = []
    for r in records:
        if r.variant == "standard" or r.variant in variants:
            if r.item_id not in by_item:
                order.append(r.item_id)
            by_item[r.item_id][r.variant] = r
    best: tuple[int, int, int] | None = None
    chosen = None
    for i, item_id in enumerate(order):
        rs = by_item[item_id]
        std = rs.get("standard")
        if std is None or not std.image:
            continue
        changed = sum(1 for v in variants if v in rs and rs[v].extracted != std.extracted)
        score = (sum(1 for v in variants if v in rs), 1 if changed else 0, -i)
        if best is None or score > best:
            best, chosen = score, item_id
    return chosen


def strip(records: Sequence[GradedRecord], variants: Sequence[str], cube: Cube | None) -> dict[str, Any] | None:
    """One item's images under each perturbation, with the answer given to each."""
    item_id = pick_item(records, variants)
    if item_id is None or cube is None:
        return None
    item = next((it for it in cube.items if it.id == item_id), None)
    if item is None or item.image is None:  # no image: nothing to perturb
        return None
    from medrcube.run.perturb import DEFAULT_MAX_SIDE, parse_perturbation, perturb_image

    try:
        data = cube.read_image(item.image)
    except Exception:  # noqa: BLE001 - a missing image costs the strip, never the report
        return None
    digest = cube.image_digest(item) or hashlib.sha256(data).hexdigest()
    mine = {r.variant: r for r in records if r.item_id == item_id}
    tiles = []
    for v in ["standard", *variants]:
        r = mine.get(v)
        if r is None:
            continue
        try:
            shown = data if v == "standard" else perturb_image(
                parse_perturbation(v), data, source_digest=digest, max_side=DEFAULT_MAX_SIDE,
                meta=item.meta, task=item.task)
        except Exception:  # noqa: BLE001
            shown = None
        if shown is None:
            continue
        thumb, detail = _tiles(shown)
        tiles.append({"variant": v, "thumb": thumb, "detail": detail, "outcome": r.outcome.value,
                      "given": _letter(r.extracted), "right": r.correct})
    return {"item_id": item.id, "question": item.question, "task": item.task,
            "options": [f"{_letter(i)}. {o}" for i, o in enumerate(item.options)],
            "expected": _letter(item.answer), "tiles": tiles}


def _letter(i: int | None) -> str:
    return "?" if i is None or i < 0 else chr(ord("A") + i)


def _tiles(data: bytes) -> tuple[str | None, str | None]:
    """The image scaled to STRIP_SIDE, and its centre DETAIL x DETAIL pixels enlarged
    without smoothing (so noise, JPEG blocks and lost resolution stay visible)."""
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as opened:
            im = opened.convert("RGB") if opened.mode not in ("L", "RGB") else opened.copy()
        small = im.copy()
        small.thumbnail((STRIP_SIDE, STRIP_SIDE), Image.Resampling.LANCZOS)
        cx, cy, h = im.width // 2, im.height // 2, DETAIL // 2
        detail = im.crop((cx - h, cy - h, cx + h, cy + h)).resize((STRIP_SIDE // 2, STRIP_SIDE // 2),
                                                                   Image.Resampling.NEAREST)
        return _uri(small), _uri(detail)
    except Exception:  # noqa: BLE001
        return None, None


def _uri(im: Any) -> str:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def robustness_columns(records: Sequence[GradedRecord],
                       gate: Mapping[str, Any] | None = None) -> Mapping[str, dict[str, Any]]:
    """Per perturbation, the overall figures the leaderboard puts in its columns, with the
    gate's verdicts of the run (gate.json) when it has them."""
    statuses = gate_statuses(gate)
    return {r.variant: _row(r, statuses) for r in robustness_table(records, variants=perturbation_variants(records))}
