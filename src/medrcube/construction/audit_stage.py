"""The build's leakage-audit stage: the written cube audited under the recipe's bounds.

Runs on the release layout as written (what a model will be asked), after every other
stage. The figures and findings go to `audit.json` in the build report folder (when the
recipe writes one); `medrcube build` prints them and, under `on_leak: fail`, exits 4 with
the leaks listed (the cube stays written, to be inspected). `on_leak: off` skips it.
"""

from __future__ import annotations

import json
from pathlib import Path

from medrcube.construction.recipe.spec import AuditSpec
from medrcube.cube import load_cube
from medrcube.cube.audit import Audit, AuditBounds, audit_items


def bounds_of(spec: AuditSpec) -> AuditBounds:
    return AuditBounds(
        prior_margin=spec.prior_margin, sibling_margin=spec.sibling_margin, length_margin=spec.length_margin,
        letter_band=spec.letter_band, constant_letter_grounding=spec.constant_letter_grounding,
    )  # fmt: skip


def run_audit(release: Path, spec: AuditSpec, report_dir: Path | None) -> Audit | None:
    """The audit of the cube at `release` (None when the recipe turns it off)."""
    if spec.on_leak == "off":
        return None
    audit = audit_items(load_cube(release, strict=True).items, bounds_of(spec))
    if report_dir is not None:
        report_dir.mkdir(parents=True, exist_ok=True)
        doc = {"on_leak": spec.on_leak, **audit.to_dict()}
        (report_dir / "audit.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return audit
