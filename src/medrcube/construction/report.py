"""The build report: counts per cell, rejected items by reason, review pass rates, agreement.

Written as `build_report.json` (machine-readable, versioned) and `build_report.md` (for a
reader) into the export's report folder, with `review.jsonl` (every verdict) and
`held_out.jsonl` (every item left out by review, with its reasons). The report names
sources by kind and dataset, never by file path: paths in a hospital archive can carry
names.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrcube.taxonomy import TASK_NAMES

SCHEMA_VERSION = 1


@dataclass
class CellRow:
    part: str
    modality: str
    task: str
    drafted: int = 0
    held_out: int = 0
    target: float | None = None
    selected: int = 0
    chain_extras: int = 0


@dataclass
class BuildReport:
    name: str
    sources: list[dict[str, str]] = field(default_factory=list)
    images_read: int = 0
    source_problems: Counter[str] = field(default_factory=Counter)
    mapping: dict[str, Any] = field(default_factory=dict)
    not_written: Counter[tuple[str, str]] = field(default_factory=Counter)  # (task, why)
    # (item id, task, placeholders left out): questions phrased neutrally so as not to name
    # another item's answer on the same image (`production.Producer._neutral`)
    neutral_questions: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    drafted: int = 0
    cells: dict[tuple[str, str, str], CellRow] = field(default_factory=dict)
    held_out: Counter[str] = field(default_factory=Counter)  # reason -> items
    review: dict[str, Any] | None = None
    reviewer: str | None = None
    agreement: dict[str, Any] | None = None
    agreement_markdown: str | None = None
    surplus: int = 0
    exported_items: int = 0
    exported_images: int = 0
    chains: int = 0
    letters: dict[str, dict[str, int]] = field(default_factory=dict)
    distractor_strategies: Counter[str] = field(default_factory=Counter)
    privacy: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)

    def cell(self, key: tuple[str, str, str]) -> CellRow:
        if key not in self.cells:
            self.cells[key] = CellRow(*key)
        return self.cells[key]

    def to_dict(self) -> dict[str, Any]:
        def target(t: float | None) -> float | None:
            return None if t is None or t == float("inf") else int(t)

        return {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "sources": self.sources,
            "images_read": self.images_read,
            "source_problems": dict(sorted(self.source_problems.items())),
            "mapping": self.mapping,
            "not_written": [{"task": t, "why": w, "count": n} for (t, w), n in sorted(self.not_written.items())],
            "drafted": self.drafted,
            "questions_phrased_neutrally": [{"item": i, "task": t, "left_out": list(f)} for i, t, f in self.neutral_questions],
            "held_out_by_reason": dict(sorted(self.held_out.items(), key=lambda kv: (-kv[1], kv[0]))),
            "review": self.review,
            "reviewer": self.reviewer,
            "agreement": self.agreement,
            "sampling_surplus": self.surplus,
            "exported": {"items": self.exported_items, "images": self.exported_images, "chains": self.chains},
            "answer_letters": self.letters,
            "distractor_strategies": dict(sorted(self.distractor_strategies.items())),
            "cells": [
                {"part": c.part, "modality": c.modality, "task": c.task, "drafted": c.drafted, "held_out": c.held_out,
                 "target": target(c.target), "selected": c.selected, "chain_extras": c.chain_extras}
                for c in self._rows()
            ],  # fmt: skip
            "privacy": self.privacy,
            "outputs": self.outputs,
        }

    def _rows(self) -> list[CellRow]:
        order = {t: i for i, t in enumerate(TASK_NAMES)}
        return sorted(self.cells.values(), key=lambda c: (c.part, c.modality, order.get(c.task, 99)))

    def to_markdown(self) -> str:
        lines = [f"# Build report: {self.name}", ""]
        lines.append(f"Exported {self.exported_items} items on {self.exported_images} images ({self.chains} image chains), "
                     f"from {self.images_read} source images; {self.drafted} items drafted.")  # fmt: skip
        lines += ["", "## Items per cell", "", "| part | modality | task | drafted | held out | target | selected | chain extras |",
                  "|---|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        for c in self._rows():
            t = "-" if c.target is None or c.target == float("inf") else str(int(c.target))
            lines.append(f"| {c.part} | {c.modality} | {c.task} | {c.drafted} | {c.held_out} | {t} | {c.selected} | {c.chain_extras} |")
        if self.neutral_questions:
            by_field = Counter(f for _, _, fs in self.neutral_questions for f in fs)
            lines += ["", f"{len(self.neutral_questions)} question(s) phrased neutrally: their template would have named another item's "
                      "answer on the same image (a sibling leak); left out: " + ", ".join(f"{{{f}}} {n}" for f, n in sorted(by_field.items()))
                      + " (the items: `questions_phrased_neutrally` in build_report.json)."]  # fmt: skip
        lines += ["", "## Rejected items by reason", ""]
        rejected = [(f"held out by review: {r}", n) for r, n in self.held_out.items()]
        rejected += [(f"not written ({t}): {w}", n) for (t, w), n in self.not_written.items()]
        rejected += [(f"source: {r}", n) for r, n in self.source_problems.items()]
        rejected += [(f"not derived ({d['task']}): {d['why']}", d["images"]) for d in self.mapping.get("not_derived", [])]
        rejected += [(f"unmapped {d['field']} {d['value']!r}: {d['why']}", d["images"]) for d in self.mapping.get("unmapped", [])]
        if self.surplus:
            rejected.append(("left out by sampling (cell full)", self.surplus))
        lines += [f"- {r}: {n}" for r, n in sorted(rejected, key=lambda x: (-x[1], x[0]))] or ["- none"]
        lines += ["", "## Review", ""]
        if self.review is None:
            lines.append("No reviewer in the recipe: items were not reviewed.")
        else:
            lines.append(f"Reviewer: {self.reviewer}. Items reviewed: {self.review['reviewed']}; by status: "
                         + ", ".join(f"{k} {v}" for k, v in self.review["by_status"].items()) + ".")  # fmt: skip
            lines += ["", "| principle | passed | judged | pass rate |", "|---|---:|---:|---:|"]
            for code, v in self.review["per_principle"].items():
                rate = "n/a" if v["rate"] is None else f"{100 * v['rate']:.1f}%"
                lines.append(f"| {code} {v['name']} | {v['passed']} | {v['judged']} | {rate} |")
        if self.agreement_markdown:
            lines += ["", "## Agreement with the clinician (Table 5 layout)", "", self.agreement_markdown.rstrip()]
        lines += ["", "## Privacy", ""]
        lines.append(f"De-identified DICOM files: {self.privacy.get('dicom_files_deidentified', 0)}; pixel actions: "
                     + (", ".join(f"{k} {v}" for k, v in self.privacy.get("pixel_actions", {}).items()) or "none")
                     + f"; identifying values searched for in the export: {self.privacy.get('leak_scan', {}).get('identifying_values_searched', 0)}, "
                     f"found: {self.privacy.get('leak_scan', {}).get('found', 0)}.")  # fmt: skip
        return "\n".join(lines) + "\n"

    def summary(self) -> str:
        held = sum(self.held_out.values())
        return (f"cube {self.name!r}: {self.exported_items} items on {self.exported_images} images in {len([c for c in self.cells.values() if c.selected])} "
                f"cells ({self.chains} chains); {self.drafted} drafted, {held} held out by review, {self.surplus} left out by sampling")  # fmt: skip

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "build_report.json").write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        (folder / "build_report.md").write_text(self.to_markdown(), encoding="utf-8")
