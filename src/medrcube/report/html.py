"""`report.html` of one run: a single self-contained page (CSS and images inline, no
script, no network) that a clinician, an engineer and a manager can all read.

Top to bottom: the gate's verdict (or "no gate run"), overall accuracy, the cube
heatmaps (part x task per modality, with n and the gate's cell verdicts), accuracy per
axis with intervals and the chance level, the credibility 2x2 table, standard against
blind accuracy, position robustness, regression deltas, and the worst items with
their image, question, expected and given answers.

Every number comes from the metrics package over the run's records (report.analysis);
every optional input (gate.json, run.json, the cube itself) may be missing, and the page
says what is missing instead of failing. The pytest plugin and `medrcube run` call
`write_report_html` at the end of a run.
"""

from __future__ import annotations

import base64
import io
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medrcube.metrics.worst import worst_records
from medrcube.records import GradedRecord, Outcome
from medrcube.report.analysis import AXES, CANONICAL, Cell, Profile, Stat, cell_id, ordered, profile
from medrcube.report.gate_sections import (
    cell_verdicts,
    gate_section,
    kind_panels,
    regression_rows,
    tally_lines,
    usage_rows,
)
from medrcube.report.readers import MEDRCUBE, RunData, read_run
from medrcube.taxonomy import MODALITIES, PARTS, TASK_NAMES

if TYPE_CHECKING:
    import jinja2

    from medrcube.cube.item import Cube

REPORT_NAME = "report.html"
WORST_ITEMS = 12
THUMB_SIDE = 192
RESPONSE_CHARS = 300


# -- shared rendering -------------------------------------------------------------------------


def environment() -> jinja2.Environment:
    """The Jinja2 environment of the report templates (package data under report/templates)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("medrcube.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["pct"] = pct
    env.filters["num"] = num
    return env


def pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}%"


def num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def atomic_write_text(path: Path, text: str) -> None:
    from medrcube.rundir.files import atomic_write

    atomic_write(path, lambda fh: fh.write(text))


def letter(index: int | None) -> str:
    if index is None or index < 0:
        return "?"
    from medrcube.gate.verdict import letter as gate_letter

    return gate_letter(index) or "?"


# -- the cube, for questions and thumbnails ---------------------------------------------------


def open_cube(run: RunData, notes: list[str]) -> Cube | None:
    """The run's cube, loaded from the source run.json names, or None with a note saying why.

    Never loads an `hf:` cube (that may mean a download); a cube whose fingerprint differs
    from the run's is not used, since its questions or images may not be the ones asked."""
    spec = run.cube_source
    if not spec:
        notes.append("run.json names no cube: questions and thumbnails are left out "
                      "(`medrcube report RUN --cube CUBE` adds them)")
        return None
    if spec.startswith("hf:"):
        notes.append(f"the cube {spec} is on the Hugging Face hub; it is not downloaded for a report: "
                     "questions and thumbnails are left out (`medrcube report RUN --cube DIR` adds them)")
        return None
    path = Path(spec).expanduser()
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, run.run_dir.parent.parent / path]
    found = next((c for c in candidates if c.exists()), None)
    if found is None:
        notes.append(f"the cube {spec} named in run.json is not found from here: questions and thumbnails are "
                     "left out (`medrcube report RUN --cube CUBE` adds them)")
        return None
    from medrcube.cube import load_cube

    try:
        cube = load_cube(found)
    except Exception as e:  # any loader failure only costs the thumbnails
        notes.append(f"the cube {found} could not be loaded ({type(e).__name__}: {str(e).splitlines()[0]}): "
                     "questions and thumbnails are left out")
        return None
    return checked_cube(cube, run, notes)


def checked_cube(cube: Cube, run: RunData, notes: list[str]) -> Cube | None:
    want = run.cube_fingerprint
    if want and cube.fingerprint != want:
        notes.append(f"the cube {cube.source} has fingerprint {cube.fingerprint[:12]}, the run was made on "
                     f"{want[:12]}: it changed since, so its questions and images are not shown")
        return None
    return cube


def thumbnail(data: bytes, side: int = THUMB_SIDE) -> str | None:
    """A JPEG data URI of an image scaled to fit `side` pixels, or None if it cannot be decoded."""
    try:
        import numpy as np
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            im.draft(im.mode, (side * 2, side * 2))  # a JPEG decodes at reduced size, colours kept
            if im.mode not in ("L", "RGB"):
                if im.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
                    a = np.asarray(im, dtype=np.float64)
                    lo, hi = float(a.min()), float(a.max())
                    a = (a - lo) / (hi - lo) * 255.0 if hi > lo else np.zeros_like(a)
                    im2 = Image.fromarray(a.astype(np.uint8), "L")
                else:
                    im2 = im.convert("RGB")
            else:
                im2 = im.copy()
        im2.thumbnail((side, side))
        buf = io.BytesIO()
        im2.save(buf, format="JPEG", quality=82)
        return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    except Exception:  # a broken image costs its thumbnail, never the report
        return None


# -- worst items ------------------------------------------------------------------------------


def standard_worst(records: Sequence[GradedRecord], limit: int = WORST_ITEMS) -> list[GradedRecord]:
    """The gate's choice of worst items (metrics/worst.py), among standard answers."""
    return worst_records([r for r in records if r.variant == "standard"], limit)


def worst_rows(run: RunData, cube: Cube | None, notes: list[str]) -> list[dict[str, Any]]:
    """The worst items as the template shows them."""
    items = {it.id: it for it in cube.items} if cube is not None else {}
    rows = []
    for r in standard_worst(run.records):
        item = items.get(r.item_id)
        if item is not None:
            question, options = item.question, tuple(item.options)
        else:
            question, options = run.questions.get(r.item_id, ("", ()))
        thumb = None
        if r.image:
            data = _image_bytes(r, cube, run)
            thumb = thumbnail(data) if data is not None else None
        response = " ".join((r.response or "").split())
        if len(response) > RESPONSE_CHARS:
            response = response[: RESPONSE_CHARS - 1] + "…"
        rows.append({
            "item_id": r.item_id,
            "cell": cell_id(r.cell),
            "dataset": r.dataset,
            "thumb": thumb,
            "has_image": bool(r.image),
            "question": question,
            "options": [
                {"letter": letter(i), "text": text, "expected": i == r.answer, "given": i == r.extracted}
                for i, text in enumerate(options)
            ],
            "expected": letter(r.answer),
            "given": letter(r.extracted) if r.extracted is not None else None,
            "outcome": r.outcome.value,
            "response": response,
        })
    if rows and not items and not run.questions:
        notes.append("the worst items are listed without their questions: the cube is not available")
    return rows


def _image_bytes(r: GradedRecord, cube: Cube | None, run: RunData) -> bytes | None:
    try:
        if cube is not None:
            return cube.read_image(r.image) if r.image is not None else None
        if run.kind != MEDRCUBE and r.image and os.path.isfile(r.image):
            return Path(r.image).read_bytes()  # a reference results.json names image files
    except Exception:
        return None
    return None


# -- the page ---------------------------------------------------------------------------------


def _axis_order(p: Profile) -> dict[str, list[str]]:
    return {a: ordered(p.axes[a], CANONICAL[a]) for a in AXES}


def heatmaps(p: Profile, verdicts: Mapping[Cell, str], plots_dir: Path | None) -> list[dict[str, Any]]:
    """The cube as HTML tables (one per modality, part x task, cells shaded by verdict and interval:
    crisp at any zoom and cheap to draw) and, under plots/, the same as a figure."""
    from medrcube.report import plots
    from medrcube.taxonomy import task_abbrev

    parts = ordered({c[0] for c in p.cells}, PARTS)
    tasks = ordered({c[2] for c in p.cells}, TASK_NAMES)
    modalities = ordered({c[1] for c in p.cells}, MODALITIES)
    if plots_dir is not None:
        plots.save(plots.cube_heatmaps(modalities, parts, tasks, p.cells, verdicts), "cube_heatmaps", plots_dir,
                   tight=False)
    out = []
    for modality in modalities:
        rows = []
        # Only the parts this modality covers: a site cube's many parts would otherwise
        # fill every grid with empty rows (the figure under plots/ keeps one common grid).
        for part in [x for x in parts if any((x, modality, t) in p.cells for t in tasks)]:
            row = []
            for task in tasks:
                s = p.cells.get((part, modality, task))
                verdict = verdicts.get((part, modality, task), "")
                # Shaded by the verdict and the interval, never by the point estimate alone.
                bg, fg = plots.cell_colour(verdict, s.lo, s.hi) if s is not None and s.acc is not None \
                    else plots.accuracy_colour(None)
                row.append({
                    "stat": s,
                    "bg": bg,
                    "fg": fg,
                    "mark": plots.MARKS.get(verdict, ""),
                    "verdict": verdict,
                    "title": _cell_title(part, modality, task, s, verdict),
                })
            rows.append({"part": part, "cells": row})
        out.append({
            "modality": modality,
            "tasks": [{"abbrev": task_abbrev(t), "name": t} for t in tasks],
            "rows": rows,
        })
    return out


def _cell_title(part: str, modality: str, task: str, s: Stat | None, verdict: str) -> str:
    where = f"{part} / {modality} / {task}"
    if s is None:
        return f"{where}: no items"
    text = f"{where}: accuracy {pct(s.acc)} ({s.correct}/{s.n}), 95% CI [{pct(s.lo)}, {pct(s.hi)}] (clustered by image)"
    return text + (f"; gate: {verdict}" if verdict else "")


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text).strip("-").lower() or "x"


def build_page(run: RunData, *, cube: Cube | None = None, plots_dir: Path | None = None) -> dict[str, Any]:
    """Everything report.html shows, as template values (and plots written to `plots_dir`)."""
    from medrcube.report import plots

    notes = list(run.notes)
    standard = run.of_variant("standard")
    p = profile(standard)
    gate = gate_section(run.gate)
    if gate["ran"] and run.seal:
        gate["evidence"].append(f"run directory {run.seal} when this page was drawn")
    verdicts = cell_verdicts(run.gate)
    order = _axis_order(p)

    figures: dict[str, str | None] = {"axes": None, "blind": None}
    # Figures of accuracy only when there is one: a run where every request failed gets
    # its page all the same, saying so (`nothing_graded`), instead of crashing in them.
    graded = p.overall.n > 0
    maps = heatmaps(p, verdicts, plots_dir) if p.cells and graded else []
    if graded:
        figures["axes"] = plots.save(plots.axis_bars(p.axes, order), "accuracy_by_axis", plots_dir,
                                     tight=False).data_uri

    axis_tables = {
        a: [{"value": v, "stat": p.axes[a][v]} for v in order[a]] for a in AXES
    }

    blind = None
    bp = profile(run.of_variant("blind"), with_credibility=False) if any(
        r.variant == "blind" for r in run.records) else None
    if bp is not None and (graded or bp.overall.n > 0):
        from medrcube.metrics.robustness import image_dependence

        dep = image_dependence(run.records)
        tasks = ordered(set(p.axes["task"]) | set(bp.axes["task"]), TASK_NAMES)
        figures["blind"] = plots.save(
            plots.blind_bars(tasks, p.axes["task"], bp.axes["task"]), "standard_vs_blind", plots_dir, tight=False
        ).data_uri
        blind = {
            "dep": dep,
            "blind_overall": bp.overall,
            "rows": [{"task": t, "standard": p.axes["task"].get(t), "blind": bp.axes["task"].get(t)} for t in tasks],
        }

    position = None
    if any(r.variant == "shuffled" for r in run.records):
        from medrcube.metrics.robustness import position_robustness

        position = position_robustness(run.records)

    cred_parts = None
    if p.credibility is not None and p.credibility.pairs:
        from medrcube.metrics.credibility import credibility_by_part

        by_part = credibility_by_part(standard)
        cred_parts = [{"part": k, "c": by_part[k]} for k in ordered(by_part, PARTS) if by_part[k].pairs]

    if cube is None and run.kind == MEDRCUBE and run.records:
        cube = open_cube(run, notes)
    elif cube is not None:
        cube = checked_cube(cube, run, notes)
    worst = worst_rows(run, cube, notes)
    from medrcube.report.clinical import clinical_section  # the issue-16 panel
    from medrcube.report.robustness_panel import robustness_section  # image perturbations
    robustness = robustness_section(run, cube, plots_dir)
    clinical = clinical_section(run.records, plots_dir) if graded else None

    counts: dict[str, int] = defaultdict(int)
    for r in run.records:
        counts[r.outcome.value] += 1
    meta = run.meta
    timings = meta.get("timings") or {}
    return {
        "title": f"medrcube report: {run.model_spec or run.label}",  # the spec as given (./my-vlm stays)
        "run": {
            "label": run.model_spec or run.label,
            "run_id": run.run_id,
            "kind": run.kind,
            "model": run.model_spec,
            "model_fingerprint": run.model_fingerprint,
            "cube_source": run.cube_source,
            "cube_fingerprint": run.cube_fingerprint,
            "template": run.template,
            "variants": ", ".join(run.variants) or "–",
            "started": timings.get("started"),
            "wall_s": timings.get("wall_s"),
            "records": len(run.records),
            "outcomes": dict(sorted(counts.items())),
            "usage": usage_rows(meta.get("usage")),
            "tally": tally_lines(meta.get("tally")),
        },
        "gate": gate,
        "overall": p.overall,
        "high_level": p.high_level,
        "heatmaps": maps,
        "figures": figures,
        "axis_tables": axis_tables,
        "axis_titles": {"task": "Task", "modality": "Modality", "part": "Anatomical part"},
        "credibility": p.credibility,
        "cred_parts": cred_parts,
        "blind": blind,
        "position": position,
        "robustness": robustness,
        "regression": regression_rows(run.gate),
        "kinds": kind_panels(run.gate),
        "worst": worst,
        "clinical": clinical,
        "notes": notes,
        "errors": counts.get(Outcome.ERROR.value, 0),
        "nothing_graded": None if graded else nothing_graded(standard),
        "unavailable": counts.get(Outcome.UNAVAILABLE.value, 0),
    }


def nothing_graded(standard: Sequence[GradedRecord], top: int = 5) -> dict[str, Any]:
    """What the page says instead of its accuracy figures when no standard answer was
    graded: why (every request failed, or how the records ended) and the most frequent
    error messages, the first thing to read when a run failed."""
    outcomes: dict[str, int] = defaultdict(int)
    messages: dict[str, int] = defaultdict(int)
    for r in standard:
        outcomes[r.outcome.value] += 1
        if r.outcome is Outcome.ERROR:
            messages[(r.error or "no message recorded").split("\n")[0]] += 1
    errors, unavailable = outcomes[Outcome.ERROR.value], outcomes[Outcome.UNAVAILABLE.value]
    if not standard:
        why = "No graded answer: the run has no standard-variant record"
    elif errors and errors + unavailable == len(standard):
        # Items whose image is restricted were never asked: every request *sent* failed.
        why = f"No graded answer: every request failed ({_plural(errors, 'error')}"
        why += f"; {_plural(unavailable, 'item')} not asked, image unavailable)" if unavailable else ")"
    else:
        why = "No graded answer: " + ", ".join(f"{v} {k}" for k, v in sorted(outcomes.items()) if v)
    common = sorted(messages.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return {"why": why, "errors": [{"message": m, "count": c} for m, c in common]}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render_run_page(page: Mapping[str, Any]) -> str:
    env = environment()
    return env.get_template("run.html.j2").render(**page)


def write_report_html(run_dir: str | os.PathLike[str], *, cube: Cube | None = None) -> Path:
    """Write `report.html` (and its figures under `plots/`) into the run directory and return
    its path. `cube` (a loaded Cube) supplies questions and thumbnails; without it the cube
    run.json names is loaded when it is found and unchanged, else the page says why they
    are missing. Raises RunReadError only when the run itself (results.jsonl) is unreadable."""
    run = read_run(run_dir)
    out_dir = run.run_dir
    page = build_page(run, cube=cube, plots_dir=out_dir / "plots")
    path = out_dir / REPORT_NAME
    text = render_run_page(page)
    from medrcube.rundir.seal import seal_page

    seal_page(out_dir, text)  # the page a reader sees is sealed too, before it replaces the placeholder (rundir/seal.py)
    atomic_write_text(path, text)
    return path


__all__ = ["REPORT_NAME", "build_page", "write_report_html", "Stat"]


def write_report_after_run(run_dir: str | os.PathLike[str], *, cube: Cube | None = None) -> tuple[Path | None, str | None]:
    """`write_report_html` for the end of a run: a report that cannot be drawn never fails
    the run (the results are written already). Returns (path, None), or (None, a warning
    saying how to draw it again) for the caller to show its own way."""
    try:
        return write_report_html(run_dir, cube=cube), None
    except Exception as exc:  # noqa: BLE001 - any report failure is a warning, by design
        return None, (f"report.html was not written ({type(exc).__name__}: {exc}); "
                      f"retry with `medrcube report {run_dir}`")
