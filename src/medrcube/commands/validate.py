"""`medrcube validate CUBE [--strict] [--json] [--audit]`: check a cube before any model sees it.

Prints every problem grouped by reason (most frequent first) with counts, each naming the
file, the item, the field, what was found and what was expected. Exits 1 when there is
any error (a skipped item, an unreadable file, a cube that does not load), 0 when there
are only warnings (an unknown axis value, a restricted item without its image).
`--audit` adds the leakage audit (`cube.audit`): can the answers be had without the
images? Each leak names its task or cell, its kind, the figure against its bound and
the fix; exit 4 when there is a leak and no error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Any

from medrcube.cube import REASONS, CubeError, Problem, load_cube
from medrcube.cube.audit import Audit, audit_items
from medrcube.cube.content import near_duplicates


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cube", help="release-layout directory, .jsonl, parquet, save_to_disk directory or hf:NAME")
    parser.add_argument("--strict", action="store_true", help="stop at the first error (default: skip bad items, report all)")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead of text")
    parser.add_argument("--limit", type=_limit, default=0, metavar="N", help="list at most N problems per reason (default: all)")
    parser.add_argument("--audit", action="store_true",
                        help="also run the leakage audit (options-only prior, sibling questions, letters): exit 4 on a leak")  # fmt: skip


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--limit must be a whole number, got {text!r} (e.g. --limit 20)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--limit must be >= 0 (0: every problem), got {value}")
    return value


EXIT_LEAK = 4


def render_audit(audit: Audit) -> str:
    """The audit's per-task figures, then every finding with its scope, kind and fix."""
    lines = ["", "LEAKAGE AUDIT (text-only models, cross-validated by image; bounds from the recipe or the defaults)",
             f"  {'task':30s} {'items':>5s} {'chance':>6s} {'prior':>6s} {'sibling':>7s} {'named':>5s} {'longest':>7s} letters"]  # fmt: skip
    for task, sc in audit.tasks.items():
        letters = " ".join(f"{k}{v}" for k, v in sc.letters.items())
        lines.append(f"  {task:30s} {sc.n:5d} {sc.chance:6.3f} {sc.prior:6.3f} {sc.sibling:7.3f} {sc.named:5d} {sc.longest:7.3f} {letters}")
    worst = {scope: max((g for g in v.values() if g is not None), default=None) for scope, v in audit.constant_letter.items() if scope != "pairs"}
    lines.append("  constant-letter grounding (worst letter): " + ", ".join(f"{k} {v:+.3f}" for k, v in worst.items() if v is not None))
    if audit.ok:
        lines.append("  no leak above its bound")
    else:
        lines.append(f"  {len(audit.findings)} leak(s):")
        lines += [f"  LEAK {f}" for f in audit.findings]
    return "\n".join(lines) + "\n"


def group(problems: list[Problem]) -> dict[str, list[Problem]]:
    """Problems by reason: errors before warnings, then the most frequent first."""
    by: dict[str, list[Problem]] = defaultdict(list)
    for p in problems:
        by[p.reason].append(p)
    return dict(sorted(by.items(), key=lambda kv: (kv[1][0].severity != "error", -len(kv[1]), kv[0])))


def render_text(source: str, problems: list[Problem], *, n_items: int | None, fingerprint: str | None, fatal: str | None, limit: int = 0) -> str:
    errors = sum(1 for p in problems if p.severity == "error")
    warnings = len(problems) - errors
    lines = [f"cube: {source}"]
    if fatal is not None:
        lines.append(f"NOT LOADABLE: {fatal.splitlines()[0]}")
    else:
        skipped = len({(p.source, p.item_id) for p in problems if p.severity == "error" and p.item_id is not None})
        anonymous = sum(1 for p in problems if p.severity == "error" and p.item_id is None)
        extra = f", plus {anonymous} file(s) or record(s) without an id that could not be read" if anonymous else ""
        lines.append(f"{n_items} items loaded, {skipped} skipped{extra}; fingerprint {fingerprint}")
    lines.append(f"{errors} error(s), {warnings} warning(s)")
    for reason, ps in group(problems).items():
        lines += ["", f"{ps[0].severity.upper()} {reason} ({len(ps)}): {REASONS.get(reason, '')}"]
        shown = ps if limit <= 0 else ps[:limit]
        lines += [f"  {p}" for p in shown]
        if len(shown) < len(ps):
            lines.append(f"  ... and {len(ps) - len(shown)} more (--limit 0 lists all)")
    if fatal is None and errors:
        lines += ["", f"FAILED: {errors} error(s). By default the items concerned are skipped (listed above); fix them for a complete cube."]
    elif fatal is None:
        lines += ["", "OK" + (" (warnings only)" if warnings else "")]
    return "\n".join(lines) + "\n"


def copies_of(cube: Any) -> dict[str, list[str]]:
    """Image key -> the other keys whose decoded pixels are its own (cube/content.py)."""
    out: dict[str, list[str]] = {}
    for k, first in sorted(cube.same_image.items()):
        if k != first:
            out.setdefault(first, []).append(k)
    return out


def render_images(copies: dict[str, list[str]], near: list[tuple[str, str, int]]) -> str:
    """Copies (counted as one image everywhere) and near duplicates (flagged, not merged)."""
    lines = []
    if copies:
        n = sum(len(v) for v in copies.values())
        lines.append(f"  images: {n} files are copies of {len(copies)} others (same decoded pixels), each counted as "
                     "one image (clustering, feasibility, the audit, the fingerprint):")
        lines += [f"    {k} = {', '.join(v[:5])}" + (f" and {len(v) - 5} more" if len(v) > 5 else "")
                  for k, v in list(copies.items())[:10]]
    if near:
        lines.append(f"  NEAR DUPLICATE images: {len(near)} pairs whose pixels differ but look alike (difference hash "
                     "within 3 of 64 bits); counted as different images: check that they are not one picture "
                     "cropped, rescaled or re-compressed:")
        lines += [f"    {a} ~ {b} (distance {d})" for a, b, d in near[:20]]
    return "".join(line + "\n" for line in lines)


def run(args: argparse.Namespace) -> int:
    fatal: str | None = None
    n_items = fingerprint = None
    audit: Audit | None = None
    near: list[tuple[str, str, int]] = []
    try:
        cube = load_cube(args.cube, strict=args.strict)
        problems, n_items, fingerprint = list(cube.problems), len(cube), cube.fingerprint
        if getattr(args, "audit", False):
            audit = audit_items(cube.items_by_content)  # copies of an image are one image
            near = near_duplicates(cube.contents)
    except CubeError as exc:
        problems, fatal = list(exc.problems), str(exc)
    errors = sum(1 for p in problems if p.severity == "error")
    if args.json:
        report = {
            "source": str(args.cube),
            "ok": fatal is None and errors == 0,
            "loaded": fatal is None,
            "fatal": fatal,
            "n_items": n_items,
            "fingerprint": fingerprint,
            "errors": errors,
            "warnings": len(problems) - errors,
            "by_reason": {r: {"severity": ps[0].severity, "count": len(ps), "meaning": REASONS.get(r, "")} for r, ps in group(problems).items()},
            "problems": [
                {"source": p.source, "item_id": p.item_id, "field": p.field, "reason": p.reason, "severity": p.severity, "message": p.message}
                for p in problems
            ],
        }
        if audit is not None:
            report["audit"] = {**audit.to_dict(), "copies": copies_of(cube),
                               "near_duplicates": [{"images": [a, b], "distance": d} for a, b, d in near]}
        sys.stdout.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_text(str(args.cube), problems, n_items=n_items, fingerprint=fingerprint, fatal=fatal, limit=args.limit))
        if fatal is not None and not problems:
            sys.stdout.write(fatal + "\n")
        if audit is not None:
            sys.stdout.write(render_audit(audit))
            sys.stdout.write(render_images(copies_of(cube), near))
    if fatal is not None or errors:
        return 1
    return EXIT_LEAK if audit is not None and not audit.ok else 0
