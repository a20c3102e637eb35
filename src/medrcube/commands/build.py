"""`medrcube build RECIPE [--out DIR]`: build a cube from a recipe (DICOM, NIfTI or PNG+CSV sources).

Before anything is read, the command says whether anything will leave the machine:
nothing does unless the recipe names a remote reviewer model, which must be allowed
explicitly (`review.allow_remote: true` or `--allow-remote`). Exit status: 0 built; 1
the recipe, a source or the export failed (nothing usable written); 2 built, but some
items could not be reviewed (reviewer errors: run again, the response store keeps what
was answered); 3 an identifying value was found in the export, which was deleted; 4 the
leakage audit found a text shortcut that fails under the recipe's `audit.on_leak` (`text`,
the default: a sibling question names an answer or the options alone give it away; `fail`:
any finding), the cube stays written; `medrcube validate --audit` repeats the findings.

Every build writes a review sheet (OUT/review/sheet.html); a person who has looked at it
records the decision with `medrcube build --record-review OUT --decision approved|rejected
--reviewed-by NAME --frames N --leaks K` (no recipe): until then the manifest and `medrcube
cube stats` say that no review is recorded.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

EXIT_OK, EXIT_ERROR, EXIT_REVIEW_ERRORS, EXIT_LEAK, EXIT_SHORTCUT = 0, 1, 2, 3, 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from medrcube.commands.numbers import whole_number

    parser.add_argument("recipe", nargs="?", help="the recipe YAML (see recipes/site-example.yaml; recipes/mini.yaml rebuilds the mini cube)")
    parser.add_argument("--out", default=None, metavar="DIR", help="output directory (default: the recipe's 'out')")
    parser.add_argument("--reviewer", default=None, metavar="SPEC", help="review with this model instead of the recipe's review.model")
    parser.add_argument("--models-file", default=None, metavar="FILE", help="models.yaml for --reviewer")
    parser.add_argument("--response-store", default=None, metavar="DIR", help="response store for the review (default: the recipe's review.store)")
    parser.add_argument("--allow-remote", action="store_true", help="allow a remote reviewer to receive item texts and images")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    review = parser.add_argument_group("recording a person's review of a finished build (no recipe)")
    review.add_argument("--record-review", default=None, metavar="OUT", help="the output directory of a build whose review sheet was read")
    review.add_argument("--decision", default=None, choices=("approved", "rejected"), help="the reviewer's decision")
    review.add_argument("--reviewed-by", dest="review_by", default=None, metavar="NAME", help="who reviewed (initials will do)")
    review.add_argument("--frames", type=whole_number("--frames", minimum=1, example="30"), default=None, metavar="N", help="frames of the sheet looked at")
    review.add_argument("--leaks", type=whole_number("--leaks", minimum=0, example="0"), default=0, metavar="K", help="frames with anything identifying left (default 0)")
    review.add_argument("--note", default="", help="a free-text note for the record (no patient data)")


def _err(message: str, code: int = EXIT_ERROR) -> int:
    print(f"medrcube build: error: {message}", file=sys.stderr)
    return code


def _record_review(args: argparse.Namespace) -> int:
    from pathlib import Path

    from medrcube.construction.privacy.reviewsheet import ReviewRecordError, record

    if args.recipe is not None:
        return _err("--record-review takes no recipe: give only the build's output directory")
    if args.decision is None or args.review_by is None or args.frames is None:
        return _err("--record-review needs --decision approved|rejected, --reviewed-by NAME and --frames N (the frames looked at)")
    try:
        section = record(Path(args.record_review), args.decision, args.review_by, args.frames, args.leaks, args.note)
    except ReviewRecordError as exc:
        return _err(str(exc))
    bound = section["leak_rate_upper_95"]
    print(f"review recorded: {section['status']} by {section['reviewer']}: {section['leaks_found']} leak(s) in "
          f"{section['frames_reviewed']} frame(s); leak rate below {100 * bound:.1f}% with 95% confidence")  # fmt: skip
    return EXIT_OK if args.decision == "approved" else EXIT_ERROR


def run(args: argparse.Namespace) -> int:
    if args.record_review is not None:
        return _record_review(args)
    if args.recipe is None:
        return _err("give a recipe (or --record-review OUT to record a review)")
    from medrcube.construction.pipeline import BuildError, PrivacyLeakError, prepare
    from medrcube.construction.pipeline import run as run_build
    from medrcube.construction.recipe import RecipeError
    from medrcube.construction.stages.ontology import OntologyError
    from medrcube.construction.stages.vocabulary import VocabularyError

    reviewer = None
    try:
        if args.reviewer is not None:
            from medrcube.models.registry import ModelSpecError, load_adapter

            try:
                reviewer = load_adapter(args.reviewer, models_file=args.models_file)
            except ModelSpecError as exc:
                return _err(f"--reviewer: {exc}")
        plan = prepare(args.recipe, args.out, reviewer=reviewer, allow_remote=args.allow_remote, store_dir=args.response_store)
    except (RecipeError, OntologyError, VocabularyError, BuildError) as exc:
        return _err(str(exc))
    print(plan.notice(), file=sys.stderr, flush=True)
    try:
        result = run_build(plan, progress=not args.no_progress and sys.stderr.isatty())
    except PrivacyLeakError as exc:
        return _err(str(exc), EXIT_LEAK)
    except BuildError as exc:
        return _err(str(exc))
    print(result.report.summary())
    print(f"release layout: {result.release}")
    if result.hf is not None:
        print(f"Hugging Face dataset (save_to_disk): {result.hf}")
    if result.report_dir is not None:
        print(f"build report: {result.report_dir / 'build_report.md'}")
    print(f"review sheet: {result.out / 'review' / 'sheet.html'} (not reviewed: a person records a decision with "
          f"`medrcube build --record-review {result.out} --decision ... --reviewed-by ... --frames N`)")
    if result.audit is not None:
        from medrcube.commands.validate import render_audit

        sys.stdout.write(render_audit(result.audit))
        failing = plan.recipe.audit.failing([f.kind for f in result.audit.findings])
        if failing:
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(Counter(failing).items()))
            return _err(f"the leakage audit found {len(failing)} text shortcut(s) that fail the build under `audit: {{on_leak: "
                        f"{plan.recipe.audit.on_leak}}}` ({kinds}; listed above, and in the build report's audit.json); fix the "
                        "construction (or its templates), or set `audit: {on_leak: flag}` in the recipe to build anyway", EXIT_SHORTCUT)  # fmt: skip
    if result.review_errors:
        return _err(f"{result.review_errors} item(s) could not be reviewed (reviewer errors) and were held out; run the "
                    "build again to retry them", EXIT_REVIEW_ERRORS)  # fmt: skip
    return EXIT_OK
